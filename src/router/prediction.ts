import type { Resolved } from '../adapters/catalog';
import type { RouterConfig } from '../config/router-schema';
import type { FleetRuntime } from '../runtime';
import type { PrefixIndex } from '../scheduler/prefix-index';
import type { Candidate, SchedulingContext } from '../scheduler/types';
import { loadCost } from '../scheduler/victims';
import { CHARS_PER_TOKEN, type TokenEstimate } from '../work/estimate';
import { predictTtft, scratchPrediction } from '../work/predict';
import { DEFAULT_MAX_TOKENS } from '../work/work-model';

/** One request's inputs to its candidates' predictions, kept in its scheduling context. */
interface PredictionInputs {
  rt: FleetRuntime;
  base: PredictionBase;
  blocks: number[] | undefined;
  tokensPerBlock: number;
  prefixIndex: PrefixIndex;
  out: ReturnType<typeof scratchPrediction>;
  /** With `slo_classes`: the request's class priority; its load's stall on higher classes is counted (`stallsMs`). */
  priority: number | undefined;
}
type PredictionBase = Parameters<typeof predictTtft>[1];

const INPUTS = Symbol('prediction inputs');
type WithInputs = SchedulingContext & { [INPUTS]?: PredictionInputs };

/**
 * `saturation_mode: predicted`: sets `ctx.predict`, each candidate's predicted TTFT for this
 * request (src/work/predict.ts), its prefix credit from the router's prefix index. `predict` is
 * one function for every request, its inputs in the context: a closure made per request and
 * stored there held the request's objects through the next young-generation collection, which
 * promoted them (test/kong/young-promotion.test.ts; src/runtime.ts `contextOf`).
 */
export function predictFor(
  rt: FleetRuntime,
  ctx: SchedulingContext,
  t: TokenEstimate,
  resolved: Resolved,
  prompt: string | undefined,
  adapterName: string | undefined,
  prefixIndex: PrefixIndex,
  config: Pick<RouterConfig, 'max_loaded_adapters' | 'queue_timeout_ms'>,
  /** With `slo_classes`, the request's class priority (see `stallsMs`); undefined without classes. */
  priority?: number,
): void {
  const adapter = resolved.kind === 'on-demand' ? resolved.adapter.name : undefined;
  (ctx as WithInputs)[INPUTS] = {
    rt,
    base: {
      promptTokens: t.promptTokens,
      maxTokens: t.maxTokens ?? DEFAULT_MAX_TOKENS,
      adapter,
      maxLoadedAdapters: config.max_loaded_adapters,
      queueTimeoutMs: config.queue_timeout_ms,
    },
    // The prompt's blocks in the prefix index (hashed once: the scorer reads the same).
    blocks: prompt === undefined ? undefined : prefixIndex.blocks(prompt, adapterName),
    tokensPerBlock: prefixIndex.o.blockChars / CHARS_PER_TOKEN,
    prefixIndex,
    out: scratchPrediction(),
    priority,
  };
  ctx.predict = predictCandidate;
}

function predictCandidate(c: Candidate, ctx: SchedulingContext): void {
  const i = (ctx as WithInputs)[INPUTS]!;
  c.prefixTokens = i.blocks ? i.prefixIndex.held(i.blocks, c.url) * i.tokensPerBlock : 0;
  const p = predictTtft(
    c,
    i.base,
    ctx.now,
    i.rt.work,
    i.rt.loadTimes,
    // Residents are read once a cold decision weighs victims: then it is known whether a load can start now.
    c.holder || c.residents === undefined ? undefined : loadCost(c, ctx) !== undefined,
    i.out,
  );
  c.ttftMs = p.totalMs;
  c.loadMs = p.loadMs;
  c.fixedMs = p.fixedMs;
  c.ownMs = p.ownMs;
  c.cachedTokens = p.cachedTokens;
}

/**
 * With `slo_classes`, the stall a load on the decided candidate `c` adds to higher classes
 * (`stallsMs` below); undefined without classes or a prediction. Asked for the decided candidate
 * only: it is read by the hold alone (room-wait.ts), not by the choice of replica.
 */
export function stallsOf(c: Candidate, ctx: SchedulingContext): number | undefined {
  const i = (ctx as WithInputs)[INPUTS];
  return i?.priority === undefined ? undefined : stallsMs(c, i.rt, ctx.now, i.priority);
}

/**
 * What a load on `c` adds to the TTFT of the requests of priority above `priority` waiting
 * there for their first token: the load once per request. A load runs between engine steps and
 * no step runs meanwhile (EngineCore.run_busy_loop, vllm/v1/engine/core.py at vLLM v0.11.0), so a
 * request whose own load just ended, or whose prefill is queued, waits for the whole of the next.
 * Issue 34, two classes, conversation trace, 1 s loads, 50% load, seed 3: of 48 interactive
 * requests late, 20 waited for their own load and then for another adapter's load there, and 11
 * were stopped by a load a batch request asked for. Only requests of classes above the one
 * deciding are counted: a batch request's 30 s objective takes a load, and charged to interactive
 * loads too (in the choice of replica) the stall lost interactive requests (room-wait.ts).
 */
function stallsMs(c: Candidate, rt: FleetRuntime, now: number, priority: number): number {
  if (c.holder || c.fixedMs <= 0) return 0;
  return c.fixedMs * rt.work.awaitingFirstToken(c.url, now, priority);
}
