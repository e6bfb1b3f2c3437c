import type { Limits, WorldView } from '../../dst/invariants';
import type { AdapterLogEntry } from '../../sim/http/replica';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { EngineLoads } from '../../src/work/engine-loads';

/** The limits of a three-node simulated world, as the log checks' tests give them (dst/invariants.ts). */
export function dstLimits(maxLoadedAdapters: number, coldLoadsPerMinute = 100): Limits {
  return { maxLoadedAdapters, nodes: 3, coldLoadsPerMinute, excessGraceMs: 5000, quietAfterMs: 4000 };
}

/** A world with no fault, no node deciding alone and no reset: nothing excuses a break. */
export const QUIET: WorldView = { now: 10_000, step: 1, degraded: false, lastFaultAt: -Infinity, resets: [] };

/** A load the replica answered 200 at `at`, leaving `loaded` in its registry. */
export const loadEntry = (at: number, name: string, loaded: number): AdapterLogEntry => ({
  at,
  op: 'load',
  name,
  status: 200,
  ms: 100,
  loaded,
});

/** An unload the replica answered 200 at `at` with nothing in flight, leaving `loaded`. */
export const unloadEntry = (
  at: number,
  name: string,
  loaded: number,
  extra: Partial<AdapterLogEntry> = {},
): AdapterLogEntry => ({
  at,
  op: 'unload',
  name,
  status: 200,
  ms: 5,
  inFlight: 0,
  running: 0,
  waiting: 0,
  loaded,
  ...extra,
});

/**
 * Sets aside two changes (2026-12-06) that moved the simulation's schedules, neither of them what
 * a planted-bug replay plants: loads under way counted across nodes (EngineLoads.count read as
 * unbounded: no other node's load is counted) and a node's own registration after an emptied
 * state taking its leases back (FailoverFleetStore's override). A seed found breaking a plant
 * before them replays as found, as the 10241 case sets aside the batch `retake`. Returns the undo.
 */
export function setAsideScheduleMoves(): () => void {
  const count = Object.getOwnPropertyDescriptor(EngineLoads.prototype, 'count')!;
  const upsert = Object.getOwnPropertyDescriptor(FailoverFleetStore.prototype, 'upsertReplica')!;
  EngineLoads.prototype.count = () => Infinity;
  Reflect.deleteProperty(FailoverFleetStore.prototype, 'upsertReplica');
  return () => {
    Object.defineProperty(EngineLoads.prototype, 'count', count);
    Object.defineProperty(FailoverFleetStore.prototype, 'upsertReplica', upsert);
  };
}
