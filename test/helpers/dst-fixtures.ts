import type { Limits, WorldView } from '../../dst/invariants';

/** The limits of a three-node simulated world, as the log checks' tests give them (dst/invariants.ts). */
export function dstLimits(maxLoadedAdapters: number, coldLoadsPerMinute = 100): Limits {
  return { maxLoadedAdapters, nodes: 3, coldLoadsPerMinute, excessGraceMs: 5000, quietAfterMs: 4000 };
}

/** A world with no fault, no node deciding alone and no reset: nothing excuses a break. */
export const QUIET: WorldView = { now: 10_000, step: 1, degraded: false, lastFaultAt: -Infinity, resets: [] };
