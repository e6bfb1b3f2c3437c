import type { ReplicaLoad } from '../metrics/replica-load';
import { Ewma } from './ewma';

/** Output tokens assumed for the KV a request holds when the client sets no limit. */
export const DEFAULT_MAX_TOKENS = 256;
/** Prompt tokens assumed per waiting request a replica reports before anything is known. */
const PRIOR_PROMPT_TOKENS = 512;
/** A learned rate stays within this factor of the prior: one odd interval cannot zero it. */
const RATE_BOUND = 20;
const RATE_ALPHA = 0.2;

export interface WorkOptions {
  /** Prior prefill rate of a replica, tokens per second, until it is measured. */
  prefillTokensPerS: number;
  /**
   * Prior decode time per output token of one request, ms (KV room frees as requests end), until
   * the replicas' decode histograms say it.
   */
  decodeMsPerToken?: number;
}

export interface Admission {
  id: string;
  url: string;
  promptTokens: number;
  maxTokens: number;
  at: number;
  /** Predicted wait before its prefill could start (a load, KV room): 0 when none. */
  startMs?: number;
  /** Of `promptTokens`, a prefix credited as cached there (`prefixCredit`): no prefill queued for it. */
  cachedTokens?: number;
}

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

export interface ReplicaWork {
  /** Requests this router admitted and has not seen logged. */
  inFlight: number;
  /** Prompt tokens not yet prefilled: max of the router's own view and the replica-implied one. */
  queuedPrefillTokens: number;
  /** Of `inFlight`, those past their prefill (decoding). */
  decodeInFlight: number;
  /** KV the in-flight requests reserve (prompt + max tokens). */
  kvReservedTokens: number;
  prefillTokensPerS: number;
}

interface Entry {
  id: string;
  url: string;
  /** Its prefill: the prompt past a credited prefix. */
  prompt: number;
  /** The KV it reserves: its whole prompt (a cached prefix included) and max tokens. */
  kv: number;
  maxTokens: number;
  at: number;
  /** Cumulative admitted prompt tokens on its replica once this one's prefill ends (FIFO). */
  end: number;
  /** When its prefill was predicted to end, at admission. */
  prefillEndAt: number;
}

class Replica {
  rate: Ewma;
  admitted = 0;
  drained = 0;
  drainedAt = 0;
  kvReserved = 0;
  readonly entries = new Map<string, Entry>();
  implied: { tokens: number; at: number } | null = null;
  impliedKv = 0;
  kvCapacity: number | undefined;
  /** Requests the last scrape reported waiting, and ours admitted (+1) or ended (-1) since. */
  scrapedWaiting = 0;
  scrapedRunning = 0;
  sinceScrape = 0;
  /**
   * The last scrape's prefill histogram sums of finished requests: tokens (computed ones where
   * the replica exports them, else prompt tokens), seconds.
   */
  prefill: { tokens: number; prompt: number; seconds: number; computed: boolean; requests?: number } | null =
    null;
  /** Its last rate sample had each request's last prefill step taken out (`prefillStepMs`). */
  stepApart = false;
  /** Its rate was learned from prompt tokens, prefix-cache hits included: a cached prefix is priced in already. */
  promptUnits = false;
  /** And its decode histogram sums: generated tokens, requests, seconds. */
  decode: { tokens: number; requests: number; seconds: number } | null = null;
  constructor(prior: number) {
    this.rate = new Ewma(prior, RATE_ALPHA);
  }
}

/** What a prediction reads of one replica (`WorkModel.outlook`). */
export interface Outlook {
  /** The wait for KV room or a running slot, whichever is longer (`kvWaitMs`, `slotWaitMs`). */
  waitMs: number;
  /** Prefill tokens a second (`prefillRate`). */
  rate: number;
  /** Prompt tokens queued ahead (`queuedPrefill`). */
  queuedTokens: number;
  /** `prefillStepMs`. */
  stepMs: number;
  /** `creditsPrefix`. */
  creditsPrefix: boolean;
}

/**
 * Per replica, the work this router put there and the replica's own figures: prefill tokens
 * queued (drained at the replica's learned prefill rate, FIFO as vLLM schedules), requests
 * decoding, KV reserved. Fresher than any scrape, since it moves with every admission; the
 * scrape corrects it upward when another gateway shares the replica (its waiting requests
 * times their mean prompt), and clears it when the replica reports itself idle.
 */
export class WorkModel {
  private readonly replicas = new Map<string, Replica>();
  private readonly byId = new Map<string, Entry>();
  private readonly meanPrompt = new Ewma(PRIOR_PROMPT_TOKENS, 0.05);
  private readonly meanMaxTokens = new Ewma(DEFAULT_MAX_TOKENS, 0.05);
  private readonly decodeMs: Ewma;
  private readonly scratch: Outlook = { waitMs: 0, rate: 0, queuedTokens: 0, stepMs: 0, creditsPrefix: true };

  constructor(private o: WorkOptions) {
    this.decodeMs = new Ewma(o.decodeMsPerToken ?? 25, 0.1);
  }

  /** A router configuration's prior: replicas not measured yet take it (the last configured wins). */
  configure(prefillTokensPerS: number): void {
    if (prefillTokensPerS === this.o.prefillTokensPerS) return;
    this.o = { ...this.o, prefillTokensPerS };
    for (const r of this.replicas.values())
      if (r.rate.count === 0) r.rate = new Ewma(prefillTokensPerS, RATE_ALPHA);
  }

  private replica(url: string): Replica {
    let r = this.replicas.get(url);
    if (!r) this.replicas.set(url, (r = new Replica(this.o.prefillTokensPerS)));
    return r;
  }

  private advance(r: Replica, now: number): void {
    if (now > r.drainedAt && r.admitted > r.drained)
      r.drained = Math.min(r.admitted, r.drained + (r.rate.value * (now - r.drainedAt)) / 1000);
    if (now > r.drainedAt) r.drainedAt = now;
  }

  admit(a: Admission): void {
    const r = this.replica(a.url);
    this.advance(r, a.at);
    const ahead = r.admitted - r.drained;
    // A request that waits for KV room (or a load) measures that wait, not the prefill rate.
    const startMs = (a.startMs ?? 0) + this.kvWaitMs(a.url, a.at, a.promptTokens + a.maxTokens);
    // Its queued prefill: the prompt past a prefix credited as cached there.
    const prefill = Math.max(0, a.promptTokens - (a.cachedTokens ?? 0));
    r.admitted += prefill;
    const e: Entry = {
      id: a.id,
      url: a.url,
      prompt: prefill,
      kv: a.promptTokens + a.maxTokens,
      maxTokens: a.maxTokens,
      at: a.at,
      end: r.admitted,
      prefillEndAt: a.at + startMs + ((ahead + prefill) / r.rate.value) * 1000,
    };
    r.entries.set(a.id, e);
    this.byId.set(a.id, e);
    r.kvReserved += e.kv;
    r.sinceScrape++;
    this.meanPrompt.observe(a.promptTokens);
    this.meanMaxTokens.observe(a.maxTokens);
  }

  /**
   * The log phase (or a failed admission): the request ended. Only a completed one (2xx) says
   * its prefill, and every one admitted before it on the replica, is done (FIFO); a failure (a
   * load error, no room, a 4xx, a 499) drops what is left of its own prefill and its KV only.
   */
  release(id: string, now: number, completed = false): void {
    const e = this.byId.get(id);
    if (!e) return;
    this.byId.delete(id);
    const r = this.replica(e.url);
    this.advance(r, now);
    if (completed) r.drained = Math.max(r.drained, e.end);
    else {
      const left = Math.min(e.prompt, Math.max(0, e.end - r.drained));
      if (left > 0) {
        r.admitted -= left;
        // Those admitted after it no longer queue behind its prefill (rare: failures only).
        let after = false;
        for (const x of r.entries.values()) {
          if (after) x.end -= left;
          else if (x === e) after = true;
        }
      }
    }
    r.entries.delete(id);
    r.kvReserved -= e.kv;
    r.sinceScrape--;
    if (r.entries.size === 0) {
      // Nothing of ours left: start the next admission from a clean slate (no drift).
      r.admitted = r.drained = 0;
      r.kvReserved = 0;
    }
  }

  private observeRate(r: Replica, sample: number): void {
    const prior = this.o.prefillTokensPerS;
    r.rate.observe(Math.min(prior * RATE_BOUND, Math.max(prior / RATE_BOUND, sample)));
  }

  /**
   * A scrape of the replica at `at` (begun at `startedAt`): its queue times the mean prompt
   * (from its own counters when it has them) overrides a smaller own view. The prefill rate is
   * learned from vLLM's per-request histograms, which PrometheusStatLogger observes together
   * when a request finishes (`histogram_num_prompt_tokens_request` and
   * `histogram_prefill_time_request`, vllm/v1/metrics/loggers.py `record`, vLLM v0.11.0):
   * over a poll interval both sums describe the same requests, so their ratio is the tokens a
   * second their prefill ran at, decodes sharing the steps included. `vllm:prompt_tokens_total`
   * is not a rate: it moves when a request is scheduled, and a queue waiting for KV room (long
   * prompts) is scheduled only as running requests end, at the decode pace (measured in the DES:
   * it taught rates 20x too low and predictions tens of seconds too long).
   */
  observeReplica(url: string, f: ReplicaFigures, at: number, startedAt = at): void {
    const r = this.replica(url);
    this.advance(r, at);
    if (f.kvCapacityTokens !== undefined && f.kvCapacityTokens > 0) r.kvCapacity = f.kvCapacityTokens;
    // Its mean computed prompt where it exports computed tokens: a waiting request's cached prefix queues no prefill.
    const queued = f.computedTokensTotal ?? f.promptTokensTotal;
    const mean =
      queued !== undefined && f.firstTokensTotal !== undefined && f.firstTokensTotal > 0
        ? queued / f.firstTokensTotal
        : this.meanPrompt.value;
    r.implied = { tokens: f.waiting * mean, at };
    r.scrapedWaiting = f.waiting;
    r.scrapedRunning = f.running;
    r.sinceScrape = 0;
    r.impliedKv = f.kvUsage !== undefined && r.kvCapacity !== undefined ? f.kvUsage * r.kvCapacity : 0;
    this.learnPrefill(r, f);
    if (
      f.generationTokens !== undefined &&
      f.finishedRequests !== undefined &&
      f.decodeSeconds !== undefined
    ) {
      const last = r.decode;
      if (last) {
        // A request's first token is its prefill's: the decode phase made the rest.
        const tokens = f.generationTokens - last.tokens - (f.finishedRequests - last.requests);
        const s = f.decodeSeconds - last.seconds;
        if (tokens > 0 && s > 0) this.decodeMs.observe((s * 1000) / tokens);
      }
      r.decode = { tokens: f.generationTokens, requests: f.finishedRequests, seconds: f.decodeSeconds };
    }
    if (f.waiting === 0 && f.running === 0) {
      // Idle when scraped: whatever we admitted before the scrape began has been prefilled.
      for (const e of r.entries.values()) {
        if (e.at > startedAt) break;
        if (e.end > r.drained) r.drained = e.end;
      }
    }
  }

  /**
   * The prefill rate from the prefill histograms' growth since the last scrape: computed tokens
   * over prefill seconds where the replica exports them (`finishedComputedTokens`); prompt tokens
   * only where it does not. Prefix caching is on by default in vLLM's V1 engine, and a cache hit
   * costs no prefill: over prompt tokens, a replica serving repeated system prompts learns a rate
   * far above its real one and predicts an uncached prompt too fast.
   */
  private learnPrefill(r: Replica, f: ReplicaFigures): void {
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
        const steps = ((requests - last.requests) * this.decodeMs.value) / 1000;
        s = s - steps >= s / 4 ? s - steps : 0;
      }
      // Nothing finished (or the replica restarted and its sums fell): no sample.
      if (tokens > 0 && s > 0) {
        this.observeRate(r, tokens / s);
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

  /**
   * What a request's prefill costs on `url` beyond its computed tokens over the rate: one engine
   * step, where the rate was learned without it (computed tokens and the decode figures); 0 where
   * the rate has it in (prompt tokens, or the prior).
   */
  prefillStepMs(url: string): number {
    return this.replicas.get(url)?.stepApart ? this.decodeMs.value : 0;
  }

  /**
   * Whether a prefix cached on `url` shortens a prediction there: not where its rate was learned
   * from prompt tokens, which prices the replica's usual cache hits in already (crediting them
   * again would count them twice). The configured prior is a rate of computed tokens.
   */
  creditsPrefix(url: string): boolean {
    return this.replicas.get(url)?.promptUnits !== true;
  }

  /** Decode time per output token (ms), learned from the replicas' decode histograms. */
  decodeMsPerToken(): number {
    return this.decodeMs.value;
  }

  setKvCapacity(url: string, tokens: number): void {
    this.replica(url).kvCapacity = tokens;
  }

  prefillRate(url: string): number {
    return this.replicas.get(url)?.rate.value ?? this.o.prefillTokensPerS;
  }

  /**
   * Everything a prediction reads of `url` (src/work/predict.ts), for a request needing `need`
   * KV tokens: one lookup, not one per figure, as this runs per replica per decision. The same figures as `kvWaitMs`, `slotWaitMs`, `prefillRate`, `queuedPrefill`,
   * `prefillStepMs` and `creditsPrefix` called at `now`. Valid until the next call: one object
   * is reused (a decision over 64 replicas would otherwise make one per replica).
   */
  outlook(url: string, now: number, need: number): Readonly<Outlook> {
    const o = this.scratch;
    const r = this.replicas.get(url);
    if (!r) {
      o.waitMs = o.queuedTokens = o.stepMs = 0;
      o.rate = this.o.prefillTokensPerS;
      o.creditsPrefix = true;
      return o;
    }
    o.waitMs = Math.max(this.kvWait(r, now, need), this.slotWait(r, now));
    o.rate = r.rate.value;
    this.advance(r, now);
    o.queuedTokens = this.queued(r, now);
    o.stepMs = r.stepApart ? this.decodeMs.value : 0;
    o.creditsPrefix = !r.promptUnits;
    return o;
  }

  /** Prompt tokens queued ahead of a request sent to `url` now. */
  queuedPrefill(url: string, now: number): number {
    const r = this.replicas.get(url);
    if (!r) return 0;
    this.advance(r, now);
    return this.queued(r, now);
  }

  /** `queuedPrefill` on a replica advanced to `now`. */
  private queued(r: Replica, now: number): number {
    const own = r.admitted - r.drained;
    const imp = r.implied;
    const implied = imp ? imp.tokens - (r.rate.value * Math.max(0, now - imp.at)) / 1000 : 0;
    return Math.max(own, implied, 0);
  }

  /**
   * How long a request needing `need` KV tokens waits for room on `url`: until enough of the
   * requests there end (prefill, then their max tokens at the decode rate), taken in admission
   * order (FIFO: no sort per candidate, which a decision over 64 replicas cannot afford). 0 when
   * it fits or the capacity is unknown.
   */
  kvWaitMs(url: string, now: number, need: number): number {
    const r = this.replicas.get(url);
    return r ? this.kvWait(r, now, need) : 0;
  }

  private kvWait(r: Replica, now: number, need: number): number {
    const cap = r.kvCapacity;
    if (cap === undefined || need > cap) return 0;
    let toFree = Math.max(r.kvReserved, r.impliedKv) + need - cap;
    if (toFree <= 0) return 0;
    this.advance(r, now);
    let last = now;
    for (const e of r.entries.values()) {
      last = Math.max(last, this.endAt(r, e, now));
      toFree -= e.kv;
      if (toFree <= 0) break;
    }
    return last - now;
  }

  /**
   * When a request of ours on `r` is predicted to end: its prefill (still queued: at the
   * replica's rate from now; done: when it was predicted to end) plus its max tokens at the
   * decode rate. The replica's clock, not ours, says when decoding began: a request whose
   * prefill ended seconds ago has that much less to decode.
   */
  private endAt(r: Replica, e: Entry, now: number): number {
    const prefillEnd = e.end > r.drained ? now + ((e.end - r.drained) / r.rate.value) * 1000 : e.prefillEndAt;
    return prefillEnd + e.maxTokens * this.decodeMs.value;
  }

  /**
   * How long a request sent to `url` now waits for a running slot: when the last scrape reported
   * a queue (slots, KV or the adapters a batch may mix are full), the requests waiting then, plus
   * ours admitted since (less ours ended), go first; it starts when that many and one more of
   * the requests there have ended, taken in admission order as `kvWaitMs` does. The prefill and
   * KV figures miss this wait when decodes hold every slot (short prompts, long answers: vLLM's
   * `max_num_seqs`). Past the requests of ours (another gateway's queue), each further one
   * is a typical request's decode over the slots the replica reported running. 0 when the
   * replica reported no queue.
   */
  slotWaitMs(url: string, now: number): number {
    const r = this.replicas.get(url);
    return r ? this.slotWait(r, now) : 0;
  }

  private slotWait(r: Replica, now: number): number {
    if (r.scrapedWaiting <= 0) return 0;
    this.advance(r, now);
    let k = Math.max(1, r.scrapedWaiting + r.sinceScrape + 1);
    let end = now;
    for (const e of r.entries.values()) {
      end = Math.max(now, this.endAt(r, e, now));
      if (--k === 0) return end - now;
    }
    const perRequest = (this.meanMaxTokens.value * this.decodeMs.value) / Math.max(1, r.scrapedRunning);
    return end + k * perRequest - now;
  }

  view(url: string, now: number): ReplicaWork {
    const r = this.replicas.get(url);
    const queuedPrefillTokens = this.queuedPrefill(url, now);
    let decodeInFlight = 0;
    if (r) for (const e of r.entries.values()) if (e.end <= r.drained) decodeInFlight++;
    return {
      inFlight: r?.entries.size ?? 0,
      queuedPrefillTokens,
      decodeInFlight,
      kvReservedTokens: r?.kvReserved ?? 0,
      prefillTokensPerS: this.prefillRate(url),
    };
  }

  /** Forgets requests admitted before `now - maxAgeMs`: their log phase never came (the lease expired). */
  purge(now: number, maxAgeMs: number): void {
    // `byId` is in admission order: the first young entry ends the walk (it runs every poll).
    for (const e of this.byId.values()) {
      if (now - e.at <= maxAgeMs) break;
      this.release(e.id, now);
    }
  }
}
