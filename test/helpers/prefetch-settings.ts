import type { PrefetchSettings } from '../../src/prefetch/prefetcher';

/** Prefetching on for unit tests: a plan a second, ten loads a minute, no fleet cold-load budget. */
export const prefetchSettings = (over: Partial<PrefetchSettings> = {}): PrefetchSettings => ({
  enabled: true,
  halfLifeMs: 60_000,
  intervalMs: 1000,
  hysteresis: 0.5,
  evictFactor: 2,
  loadsPerMinute: 10,
  coldLoadsPerMinute: 0,
  staleAfterMs: 10_000,
  ...over,
});
