import { systemClock, type Clock } from '../../src/clock';
import type { ReplicaSpec, ReplicaView } from '../../src/fleet/types';
import { seededRandom } from '../../src/random';
import type { SchedulingContext } from '../../src/scheduler/types';
import { toCandidate } from '../../src/scheduler/pipeline';

export function view(url: string, over: Partial<ReplicaView> = {}): ReplicaView {
  return {
    url,
    backend: 'vllm',
    priority: 0,
    health: 'up',
    snapshotAt: 1000,
    checkedAt: 1000,
    waiting: 0,
    running: 0,
    kvUsage: 0,
    inFlight: 0,
    residentCount: 0,
    ...over,
  };
}

export function ctx(over: Partial<SchedulingContext['policy']> = {}, seed = 1): SchedulingContext {
  return {
    now: 1500,
    random: seededRandom(seed),
    policy: {
      saturation: { targetWaitingPerReplica: 4, kvCeiling: 0.8 },
      maxLoadedAdapters: 2,
      staleAfterMs: 2000,
      ...over,
    },
  };
}

export const cands = (views: ReplicaView[], c = ctx()) => views.map((v) => toCandidate(v, c));
export const urls = (xs: { url: string }[]) => xs.map((x) => x.url);

/** A successful poll at `at` of a replica whose registry holds adapter `a` (failover tests). */
export const snapshotWithA = (at: number, running = 0) => ({
  at,
  ok: true,
  load: { running, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
  registry: [{ name: 'a', path: '/adapters/a' }],
  managed: () => true,
});

/** A vLLM replica at `url` as a router configuration registers it (failover tests). */
export const vllmSpec = (url: string): ReplicaSpec => ({ url, backend: 'vllm', priority: 0 });

/**
 * Time stepped by hand, `now` and `monotonic` alike, from `t`. A case that stamps some steps with
 * Date.now() and others with `systemClock` mixes two time lines: SystemClock runs on
 * performance.now() from the process's start, which a wall clock stepped or slewed since leaves off
 * Date.now() by any amount (review-62b's start-up adapter, failed in a CI replay). Its timers never
 * fire: for what reads the clock, not what waits on it.
 */
export class HandClock implements Clock {
  constructor(public t: number) {}
  now(): number {
    return this.t;
  }
  monotonic(): number {
    return this.t;
  }
  after(): () => void {
    return () => undefined;
  }
  step(ms: number): number {
    return (this.t += ms);
  }
}

/**
 * True time set by hand from `t`; `now` off it by `skew` (a skew correction or the simulation's skew
 * fault), `monotonic` never. Its timers never fire: for what reads the clock.
 */
export class SteppedClock implements Clock {
  skew = 0;
  constructor(public t = 1000) {}
  now(): number {
    return this.t + this.skew;
  }
  monotonic(): number {
    return this.t;
  }
  after(): () => void {
    return () => undefined;
  }
}

/** The wall clock, its monotonic line `skip`ped ms ahead (a process's monotonic time past a grace). */
export function skippingClock(): Clock & { skip(ms: number): void } {
  let ahead = 0;
  return {
    now: () => systemClock.now(),
    monotonic: () => systemClock.now() + ahead,
    after: (ms, fn) => systemClock.after(ms, fn),
    skip: (ms) => (ahead += ms),
  };
}
