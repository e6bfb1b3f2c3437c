/**
 * Kong's own 502 or 504 from a replica (no attempt got a response: refused, reset, timed out) marks
 * it down in the store of the node whose log phase saw it (src/router/log-phase.ts `proxyFailed`),
 * at once, whatever its polls said: the next requests go elsewhere. It must hold until a poll that
 * began after the 502 answers (one begun before may have read the replica before it failed), in
 * both stores, a Redis outage and its recovery included. So, judged when a request is proxied: a
 * request that came after the marking ended, decided on the runtime it marked, goes to the replica
 * only if a poll begun after the 502 has answered since (the node's own, deciding alone; any node's
 * on its shared state, sharing), or no other replica is up as the node can see (the health filter
 * fails open; a marking of another replica counts there until a poll begun after it reached the
 * store has answered, seed 2237878: HealthReads.kongMarkMayHold).
 *
 * Not judged: a request decided on another runtime (a record change since: its state never heard
 * of the 502, nor of the polls before it), nor, sharing, one after the shared state was emptied or
 * switched to a replica that missed writes since the 502 (the marking may be gone with them, as
 * every poll before).
 */
import type { KongMark } from './health-reads';

export const KONG_MARK_INVARIANT =
  'a replica Kong could not reach gets no new request until a poll sees it up';

/** A request proxied to a replica, and what its deciding runtime knew of Kong's marking there. */
export interface MarkedRouting {
  /** The marking on the deciding runtime no poll begun after its 502 has answered (HealthReads.kongMarkStanding). */
  mark: KongMark | undefined;
  /** When the request came (the world's time). */
  began: number;
  /** The runtime decides alone (its local store). */
  alone: boolean;
  /** When the shared state of the mark was emptied or lost writes (RedisModel.resets). */
  resets: readonly number[];
  /** Another replica is up as the node can see it: the health filter had somewhere else to go. */
  otherUp: boolean;
}

/** Why routing `r` to the marked replica breaks the invariant, if it does. */
export function kongMarkUnheeded(r: MarkedRouting): string | undefined {
  const m = r.mark;
  if (!m || r.began <= m.markedAt || !r.otherUp) return undefined;
  if (!r.alone && r.resets.some((t) => t >= m.failedAt)) return undefined;
  return (
    `Kong answered ${m.status} for request ${m.request} at ${Math.round(m.failedAt)} ms (marked on ${m.by} by ` +
    `${Math.round(m.markedAt)} ms); a request that came at ${Math.round(r.began)} ms went there` +
    `${r.alone ? ' deciding alone' : ''}, no poll begun since having answered`
  );
}
