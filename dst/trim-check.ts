/**
 * "A trim takes a replica down to its limit, not below" (docs/reliability.md "A poll trims what
 * got past"), read off the replicas' own logs: every unload a router sends outside any request's
 * decision (the trim after a poll, of an idle excess over `max_loaded_adapters`) leaves the
 * replica's registry at or above the limit. Before the store counted again before granting a trim,
 * two nodes reading a replica one over its limit, or one node on a stale reading, each trimmed an
 * adapter: a slot left empty, a reload later.
 *
 * An unload sent within a request's decision is left out: it makes room for that request's load
 * (the replica full by the store's count; dst/room-check.ts judges it), or is the after-load undo
 * of an excess. Excused: a trim sent by a node deciding alone, or judged while the world is
 * degraded or after a fault began or healed since it was sent (a replica's registry and the store's
 * count may differ then: a replica restart, an emptied store), or sent within `staleMs` of a reset
 * of the shared state; and a slot for each load under way there when it was sent, and one for each
 * other adapter requests are making room for there beside the trim (`roomsMaking`; seed 187013: a replica 2 of 1, the trim
 * granted one, a request waiting for room the other, both right; the request's load, sent after
 * both answered, filled the replica to its limit). An after-load undo beside it makes no room (seed
 * 125407's break stays caught).
 */

import type { LockLife } from './redis-model';
import { grantedAt, roomsMaking, type RoomCalls } from './room-making';

/** An unload call as a runtime's HTTP sent it (dst/calls-seen.ts). */
export interface UnloadCall {
  at: number;
  url: string;
  name: string;
  /** The request whose decision sent it (none: a trim after a poll). */
  request?: number;
  /** Its request's adapter: the load a make-room unload makes room for (undefined: a trim, or not known). */
  for?: string;
  /** Sent by a prefetch tick (src/prefetch/): a victim's unload, room for the adapter `for`. */
  prefetch?: true;
  /** The prefetch's load of `for` it made room for (dst/calls-seen.ts): when it ended. */
  prefetchEnsure?: { endedAt?: number };
  /** The plugin-server process that sent it (`n<node>g<gen>`; undefined: not known). */
  proc?: string;
  /** Its store decided alone (Redis unreachable to it) when it sent the call. */
  alone: boolean;
  /** When its sender asked the store for it and was granted (undefined: not through the shared store). */
  grantedAt?: number;
  /** When its sender had the answer or gave up (undefined: still waiting). */
  endedAt?: number;
  /** Its lock as the shared store held it (undefined: not known, e.g. a hand-made log). */
  lock?: LockLife;
}

/** A replica's answer to an unload (AdapterLogEntry), with its replica. */
export interface UnloadAnswer {
  url: string;
  name: string;
  /** When it answered, and how long the call took there. */
  at: number;
  ms: number;
  /** The registry's runtime-loaded adapters after it. */
  loaded: number;
}

/** What of the world the judgement reads (WorldView's fields). */
export interface NeedScope {
  degraded: boolean;
  lastFaultAt: number;
  /** Times the shared state was emptied or rolled back, and spans of record changes to other state. */
  resets: readonly (number | { from: number; to: number })[];
  /** Of `resets`, those that may bring back state no call backs (undefined: take every reset so). */
  restores?: readonly (number | { from: number; to: number })[];
  /** Whether a fault is under way now (undefined: take `degraded` so). */
  faultOpen?: boolean;
  /** Replica restarts that forgot adapters loaded at run time (undefined: none). */
  registryLost?: readonly RegistryLoss[];
}

/**
 * A replica restart that forgot adapters loaded at run time: until a registry read answers after
 * it (a poll's GET /v1/models), the store still counts them there.
 */
export interface RegistryLoss {
  url: string;
  /** When it restarted. */
  at: number;
  /** When the first registry read after it answered (Infinity: none yet). */
  readAt: number;
}

/** The runtimes' calls (CallSource's fields the judgement reads). */
export type SentCalls = RoomCalls;

/** The last unload call the runtimes sent for the adapter `e` answers there, before the replica answered. */
export function callAnswered(e: UnloadAnswer, unloads: readonly UnloadCall[]): UnloadCall | undefined {
  for (let k = unloads.length - 1; k >= 0; k--) {
    const c = unloads[k]!;
    if (c.url === e.url && c.name === e.name && c.at <= e.at) return c;
  }
  return undefined;
}

/**
 * The trim that took the replica below `max` less the loads under way there when it was sent
 * (undefined: none, or excused). Those loads were counted by the store when it granted the trim,
 * and fill the slots back as they land; one that fails or never lands (a replica hung, seed 990)
 * leaves the slot empty, which the trim could not know. The call judged is the last its runtimes
 * sent for that adapter there before the replica answered.
 */
export function trimmedBelow(
  e: UnloadAnswer,
  max: number,
  calls: SentCalls,
  w: NeedScope,
  /**
   * How long after a reset of the shared state its count may still hold a load no call backs: a
   * load lock brought back by a restart from an older snapshot (or on the other state a record
   * change moves to) lives until its TTL (seed 835: `sql` loading again after its unload, the one
   * adapter there trimmed).
   */
  staleMs = 0,
): string | undefined {
  if (e.loaded >= max) return undefined;
  const call = callAnswered(e, calls.unloads ?? []);
  // A request's unload, or a prefetch's making room for its load (room-check.ts judges both).
  if (!call || call.request !== undefined || call.prefetch) return undefined;
  if (call.alone || w.degraded || w.lastFaultAt >= call.at) return undefined;
  const sent = call.at;
  if (w.resets.some((r) => (typeof r === 'number' ? r : r.to) >= sent - staleMs)) return undefined;
  const under = calls.loads.filter(
    (c) => c.url === e.url && c.at <= sent && !((c.endedAt ?? Infinity) <= sent),
  );
  const loading = under.length;
  // Adapters requests were making room for beside the trim: each is to load into one slot, unless
  // its load was under way already (counted above).
  const rooms = roomsMaking(e.url, grantedAt(call), e.at, calls, new Set(under.map((c) => c.name))).size;
  if (e.loaded + loading + rooms >= max) return undefined;
  return (
    `${e.name} trimmed from ${e.url} (sent at ${Math.round(sent)} ms, for no request) ` +
    `left ${e.loaded} loaded and ${loading} loading (limit ${max})` +
    (rooms > 0 ? `, ${rooms} request(s) making room beside it` : '')
  );
}
