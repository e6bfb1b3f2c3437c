/**
 * What the work model learns from a replica's scrape: its queue as another gateway's work, its
 * KV in use, its prefill rate and the decode time per token from vLLM's per-request histograms,
 * and that an idle replica has prefilled what we sent it. Apart from the model (work-model.ts)
 * because this is where the replica's word enters the model, with its units and its pitfalls.
 */
import type { ReplicaLoad } from '../metrics/replica-load';
import type { Ewma } from './ewma';
import { RATE_BOUND, type ReplicaState } from './replica-state';

/** What the replica's last scrape said, as far as the work model reads it (see ReplicaLoad). */
export type ReplicaFigures = Pick<
  ReplicaLoad,
  | 'waiting'
  | 'running'
  | 'kvUsage'
  | 'promptTokensTotal'
  | 'firstTokensTotal'
  | 'kvCapacityTokens'
  | 'finishedPromptTokens'
  | 'prefillSeconds'
  | 'finishedComputedTokens'
  | 'computedTokensTotal'
  | 'generationTokens'
  | 'finishedRequests'
  | 'decodeSeconds'
>;

/** The model's fleet-wide figures a scrape reads or teaches. */
export interface Learned {
  /** The configured prior prefill rate, tokens a second: a learned rate stays near it. */
  priorTokensPerS: number;
  /** Mean prompt of the requests admitted, for a queue whose replica does not say its own. */
  meanPrompt: Ewma;
  /** Decode time per output token, ms. */
  decodeMs: Ewma;
}

/**
 * A scrape of `r` at `at` (begun at `startedAt`), `r` advanced to `at`: its queue times the mean
 * prompt (from its own counters when it has them) overrides a smaller own view. The prefill rate
 * is learned from vLLM's per-request histograms, which PrometheusStatLogger observes together
 * when a request finishes (`histogram_num_prompt_tokens_request` and
 * `histogram_prefill_time_request`, vllm/v1/metrics/loggers.py `record`, vLLM v0.11.0):
 * over a poll interval both sums describe the same requests, so their ratio is the tokens a
 * second their prefill ran at, decodes sharing the steps included. `vllm:prompt_tokens_total`
 * is not a rate: it moves when a request gets its first token (IterationStats.update_from_output,
 * vllm/v1/metrics/stats.py, v0.11.0), and a queue waiting for KV room (long prompts) gets
 * scheduled only as running requests end, at the decode pace (measured in the DES: it taught
 * rates 20x too low and predictions tens of seconds too long).
 */
export function learnFromScrape(
  r: ReplicaState,
  f: ReplicaFigures,
  at: number,
  startedAt: number,
  m: Learned,
): void {
  if (f.kvCapacityTokens !== undefined && f.kvCapacityTokens > 0) r.kvCapacity = f.kvCapacityTokens;
  // Its mean computed prompt where it exports computed tokens: a waiting request's cached prefix queues no prefill.
  const queued = f.computedTokensTotal ?? f.promptTokensTotal;
  const mean =
    queued !== undefined && f.firstTokensTotal !== undefined && f.firstTokensTotal > 0
      ? queued / f.firstTokensTotal
      : m.meanPrompt.value;
  r.implied = { tokens: f.waiting * mean, at };
  r.scrapedWaiting = f.waiting;
  r.scrapedRunning = f.running;
  r.sinceScrape = 0;
  r.impliedKv = f.kvUsage !== undefined && r.kvCapacity !== undefined ? f.kvUsage * r.kvCapacity : 0;
  learnPrefill(r, f, m);
  if (f.generationTokens !== undefined && f.finishedRequests !== undefined && f.decodeSeconds !== undefined) {
    const last = r.decode;
    if (last) {
      // A request's first token is its prefill's: the decode phase made the rest.
      const tokens = f.generationTokens - last.tokens - (f.finishedRequests - last.requests);
      const s = f.decodeSeconds - last.seconds;
      if (tokens > 0 && s > 0) m.decodeMs.observe((s * 1000) / tokens);
    }
    r.decode = { tokens: f.generationTokens, requests: f.finishedRequests, seconds: f.decodeSeconds };
  }
  if (f.waiting === 0 && f.running === 0) clearPrefilled(r, f.firstTokensTotal, startedAt);
}

/**
 * Idle when scraped: what of ours reached the replica has been prefilled. Not all we admitted
 * before the scrape began reached it: Kong proxies a request after the access phase, a few ms on,
 * and a request admitted before its adapter's load goes only once the load ends (measured: such
 * requests, cleared, put the next ones under a queue; a fixed time margin made the DES worse).
 * vLLM counts a request in `vllm:time_to_first_token_seconds` in the output pass of the engine
 * step that made its first token (IterationStats.update_from_output, vllm/v1/metrics/stats.py;
 * observed by PrometheusStatLogger.record, vllm/v1/metrics/loggers.py, vLLM v0.11.0). Since the
 * last idle scrape (when every request of ours that had reached the replica was accounted
 * for), its growth less ours completed since bounds how many of ours still here got theirs
 * (oldest first: FIFO). Other gateways' requests count there too: an upper bound. Without the
 * count, all admitted before the scrape began, as before.
 */
function clearPrefilled(r: ReplicaState, firstTokens: number | undefined, startedAt: number): void {
  // Before any idle scrape: all the replica counted since it started.
  const base = r.firstTokensAccounted ?? 0;
  // A count that fell is a restarted replica's: all it counted is since.
  let budget =
    firstTokens === undefined
      ? Infinity
      : firstTokens >= base
        ? firstTokens - base - r.completedUncounted
        : firstTokens;
  for (let e = r.entries.oldest; e !== undefined; e = e.younger) {
    if (e.at > startedAt) break;
    if (!e.counted) {
      if (budget <= 0) break;
      budget--;
      e.counted = true;
    }
    if (e.end > r.drained) r.drained = e.end;
  }
  r.firstTokensAccounted = firstTokens;
  r.completedUncounted = 0;
}

/**
 * The prefill rate from the prefill histograms' growth since the last scrape: computed tokens
 * over prefill seconds where the replica exports them (`finishedComputedTokens`); prompt tokens
 * only where it does not. Prefix caching is on by default in vLLM's V1 engine, and a cache hit
 * costs no prefill: over prompt tokens, a replica serving repeated system prompts learns a rate
 * far above its real one and predicts an uncached prompt too fast.
 */
function learnPrefill(r: ReplicaState, f: ReplicaFigures, m: Learned): void {
  if (f.finishedPromptTokens === undefined || f.prefillSeconds === undefined) return;
  const computed = f.finishedComputedTokens !== undefined;
  const total = f.finishedComputedTokens ?? f.finishedPromptTokens;
  const requests = computed ? f.finishedRequests : undefined;
  const last = r.prefill;
  // The same kind of tokens as last time (an upgrade between scrapes gives no sample).
  if (last && last.computed === computed) {
    const tokens = total - last.tokens;
    let s = f.prefillSeconds - last.seconds;
    // Some of the prompts were cache hits: each request's prefill phase ends with an engine step
    // however little it computed (a cached prompt still runs its last token); a decode step's
    // time, which the decode histograms measure, is taken out (`prefillStepMs`, and the
    // prediction adds it back). Left in, mostly cached prompts teach a rate far below the
    // engine's. An interval that is mostly such steps says little of the rate: no sample.
    // Without hits the rate is the prompt tokens' (long prefills inflate the decode figure).
    const hits = f.finishedPromptTokens - last.prompt > tokens;
    if (hits && requests !== undefined && last.requests !== undefined) {
      const steps = ((requests - last.requests) * m.decodeMs.value) / 1000;
      s = s - steps >= s / 4 ? s - steps : 0;
    }
    // Nothing finished (or the replica restarted and its sums fell): no sample.
    if (tokens > 0 && s > 0) {
      const prior = m.priorTokensPerS;
      r.rate.observe(Math.min(prior * RATE_BOUND, Math.max(prior / RATE_BOUND, tokens / s)));
      r.stepApart = hits && requests !== undefined && last.requests !== undefined;
    }
  }
  r.prefill = {
    tokens: total,
    prompt: f.finishedPromptTokens,
    seconds: f.prefillSeconds,
    computed,
    requests,
  };
  r.promptUnits = !computed;
}
