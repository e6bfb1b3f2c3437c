/**
 * Prefetching in a share of the seeds (router config `prefetch`, src/prefetch/), from a stream of
 * its own so the seeds without it keep their worlds and schedules (dst/schedule.ts). Its settings
 * make it act within a schedule's few seconds: a tick on every poll round or every other one
 * (the poller's round drives it, src/runtime.ts), demand that halves within seconds, and a budget
 * from one load a minute to plenty (never past a quarter of `cold_loads_per_minute`:
 * src/prefetch/prefetcher.ts `prefetchLimit`, so a budget of 3 allows none).
 */
import { seededRandom } from '../src/random';
import { int } from './draws';
import type { WorldSettings } from './schedule';

/** A world's prefetch settings, as the router config spells their meaning (docs/configuration.md). */
export interface PrefetchDraw {
  /** prefetch_interval_ms: the schema's least (500, every poll round) up to every other round. */
  intervalMs: number;
  /** prefetch_half_life_ms. */
  halfLifeMs: number;
  /** prefetch_loads_per_minute. */
  loadsPerMinute: number;
  /** prefetch_hysteresis: 0 (a copy whenever the target exceeds the copies) up to the default 1. */
  hysteresis: number;
  /** prefetch_evict_factor: 1 (an idle adapter a little colder is displaced) up to the default 8. */
  evictFactor: number;
}

/** The share of all seeds (quiet ones too) that turn prefetching on. */
export const PREFETCH_SHARE = 0.4;

/** Turns prefetching on in `world` for a share of the seeds. */
export function drawPrefetch(seed: number, world: WorldSettings): void {
  const r = seededRandom(seed * 2654435761 + 14);
  if (r() >= PREFETCH_SHARE) return;
  const pick = <T>(xs: readonly T[]): T => xs[int(r, 0, xs.length - 1)]!;
  world.prefetch = {
    intervalMs: pick([500, 1000, 2000]),
    halfLifeMs: pick([1000, 3000, 10_000]),
    loadsPerMinute: pick([1, 4, 30]),
    hysteresis: pick([0, 0.5, 1]),
    evictFactor: pick([1, 2, 8]),
  };
}

/** The router config's `prefetch_*` fields for `world` (none: prefetching off, the default). */
export function prefetchFields(world: WorldSettings): Record<string, unknown> {
  const p = world.prefetch;
  if (!p) return {};
  return {
    prefetch: true,
    prefetch_interval_ms: p.intervalMs,
    prefetch_half_life_ms: p.halfLifeMs,
    prefetch_loads_per_minute: p.loadsPerMinute,
    prefetch_hysteresis: p.hysteresis,
    prefetch_evict_factor: p.evictFactor,
  };
}
