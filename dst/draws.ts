/** Draws from a seeded stream the schedule's shapes share (dst/schedule.ts, dst/overload.ts). */
import type { Random } from '../src/random';

/** An integer in [lo, hi]. */
export function int(r: Random, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

/**
 * A fault's duration in [lo, hi], most of them short (the mean a third of the range's): every
 * length stays reachable (a partition past the node TTL, a load past its timeout), while the
 * world spends less simulated time healing after the span.
 */
export function dur(r: Random, lo: number, hi: number): number {
  const x = r();
  return lo + Math.floor(x * x * (hi - lo + 1));
}
