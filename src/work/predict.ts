import type { AdapterPresence } from '../fleet/types';
import type { LoadTimes } from './load-times';
import type { WorkModel } from './work-model';

/** What a prediction reads of a candidate replica. */
export interface PredictCandidate {
  url: string;
  residentCount: number;
  /** Loads under way there begun by any router sharing the store, and when the oldest began (ReplicaView). */
  loadsUnderWay?: number;
  loadsSince?: number;
  holder: boolean;
  adapter?: Pick<AdapterPresence, 'state'> & Partial<Pick<AdapterPresence, 'evicted'>>;
  /**
   * Of the prompt, the leading tokens the router knows this replica caches (its prefix index:
   * the replica served them last): they cost no prefill there.
   */
  prefixTokens?: number;
}

export interface PredictRequest {
  promptTokens: number;
  maxTokens: number;
  /** The on-demand adapter asked for; absent: base model or a static adapter. */
  adapter?: string;
  maxLoadedAdapters: number;
  /** How long a load may wait for an idle adapter to unload (queue_timeout_ms). */
  queueTimeoutMs: number;
}

export interface Prediction {
  /** Before its prefill can start: a load (and an unload to make room) after the loads under way there, KV room. */
  startMs: number;
  /** Of `startMs`, the load (an unload, the wait for an idle adapter). */
  loadMs: number;
  /**
   * Of `loadMs`, what no wait in the gateway shortens: the adapter's load there (its own, which
   * starts only once the request goes, or one under way that it would join) and the unload
   * making room. The rest of the wait (queued work, KV room, a slot or an idle adapter freeing)
   * shrinks as requests end: only that is worth holding a request for.
   */
  fixedMs: number;
  /** The prefill queued ahead of it, at the replica's rate. */
  aheadMs: number;
  /** Its own prefill: its computed tokens at the replica's rate (and the step ending it, `WorkModel.prefillStepMs`). */
  ownMs: number;
  /** Of its prompt, the prefix credited as cached there (no prefill). */
  cachedTokens: number;
  totalMs: number;
}

/**
 * Predicted time to first token on one replica: the wait for a slot or a load (learned load
 * time, plus an unload when the replica is full, plus the queue timeout when no adapter there
 * is idle; not held there: after the loads under way there, which stop its engine), the KV wait, the prefill ahead over the replica's rate, and its own prefill. The KV
 * wait and the prefill ahead overlap (queued requests wait for the same room), so the larger counts.
 *
 * `roomNow` is known only once residents are read: whether a load could start now (a free slot
 * or an idle victim). `now` and `roomNow` are arguments, not request fields: this runs per
 * replica per decision, where building an object per call costs more than the prediction; for
 * the same reason `out`, when given, is filled and returned instead of a new object (whether
 * the optimiser removed that object depended on what else it inlined).
 */
export function predictTtft(
  c: PredictCandidate,
  req: PredictRequest,
  now: number,
  work: WorkModel,
  loads: LoadTimes,
  roomNow?: boolean,
  out?: Prediction,
): Prediction {
  let fixedMs = 0;
  let roomMs = 0;
  if (req.adapter !== undefined) {
    if (c.holder) {
      const state = c.adapter?.state;
      // Loading (or placed, or registered but its weights evicted): about a load from now.
      if ((state !== 'loaded' && state !== 'static') || c.adapter?.evicted) fixedMs = loads.load(req.adapter);
    } else {
      fixedMs = loads.load(req.adapter);
      // With no limit set (0) the router never unloads.
      if (req.maxLoadedAdapters > 0 && c.residentCount >= req.maxLoadedAdapters) fixedMs += loads.unload();
      if (roomNow === false) roomMs = req.queueTimeoutMs;
    }
  }
  const w = work.outlook(c.url, now, req.promptTokens + req.maxTokens);
  // Loads under way there stop the engine: a load of its own starts only after them. Not counted
  // for a holder: a stall of a load or two would spread a hot adapter to a replica where its own
  // load stalls others (bursty workload, 1 s loads, 30% load, seeds 1-8: counted for holders too,
  // 2 points fewer requests within 5 s than without the count; for cold requests only, 4.7 more).
  const stallMs = c.holder ? 0 : Math.max(w.stallMs, othersStallMs(c, w.ownLoads, now, loads));
  const slotMs = fixedMs + roomMs;
  // A slot and KV room are waited for together (the queue is admitted as both free): the larger counts.
  const kvMs = w.waitMs;
  const rate = w.rate;
  const aheadMs = (w.queuedTokens / rate) * 1000;
  const cachedTokens = prefixCredit(c.prefixTokens, req.promptTokens, w.creditsPrefix);
  const ownMs = ((req.promptTokens - cachedTokens) / rate) * 1000 + w.stepMs;
  const totalMs = slotMs + stallMs + Math.max(kvMs, aheadMs) + ownMs;
  if (out === undefined)
    return {
      startMs: slotMs + stallMs + kvMs,
      loadMs: slotMs,
      fixedMs,
      aheadMs,
      ownMs,
      cachedTokens,
      totalMs,
    };
  out.startMs = slotMs + stallMs + kvMs;
  out.loadMs = slotMs;
  out.fixedMs = fixedMs;
  out.aheadMs = aheadMs;
  out.ownMs = ownMs;
  out.cachedTokens = cachedTokens;
  out.totalMs = totalMs;
  return out;
}

/**
 * How long the loads under way on a replica keep its engine stopped, counted from the shared
 * residency, when other routers began some of them (more are under way than this router began):
 * they run one after another from when the oldest began, each about the fleet's learned load time.
 * 0 when this router began them all: its own count (`Outlook.stallMs`) knows their adapters'
 * times and when each ended, so a lone router decides as before.
 */
function othersStallMs(c: PredictCandidate, ownLoads: number, now: number, loads: LoadTimes): number {
  const n = c.loadsUnderWay;
  if (n === undefined || n <= ownLoads || c.loadsSince === undefined) return 0;
  return c.loadsSince + n * loads.load(undefined) - now;
}

/** A prediction to fill in place (`predictTtft`'s `out`): a decision reads each one before the next. */
export function scratchPrediction(): Prediction {
  return { startMs: 0, loadMs: 0, fixedMs: 0, aheadMs: 0, ownMs: 0, cachedTokens: 0, totalMs: 0 };
}

/**
 * The prefix of the prompt credited as cached: what the router knows the replica holds (`known`),
 * at most all but the last token (vLLM always computes that one), and none where the replica's
 * rate already prices its cache hits in (`credits` false: `WorkModel.creditsPrefix`).
 */
export function prefixCredit(known = 0, promptTokens: number, credits: boolean): number {
  if (known <= 0 || !credits) return 0;
  return Math.max(0, Math.min(known, promptTokens - 1));
}
