/**
 * Dynamo's LoRA demand sizing, shared by its two placements (bench/des/baselines-2026.ts, HRW
 * sets; ./dynamo-mcf.ts, the min-cost-flow solver): ai-dynamo/dynamo lib/llm/src/lora/controller.rs
 * 0a8cd5a4b8 (`compute_active_replica_counts`, `apply_hysteresis`), load_estimator.rs 20c307dd86,
 * config.rs 32381ac605.
 */
import type { Clock } from '../../../src/clock';
import type { DesFleet } from '../fleet';
import { seededRandom } from '../../../src/random';
import { counting, fnv, leastIndex, type DesRequest, type DesRouter } from '../policies';

/** The controller's period (`timestep_secs`). */
export const DYNAMO_TICK_MS = 3000;
/** Arrivals are counted over 3 s x `rate_window_multiplier` 30. */
const WINDOW_S = 90;
/** The load estimator's EMA. */
const ALPHA = 0.3;
/** `scale_down_cooldown_ticks`. */
const COOLDOWN = 3;

/** Adapter names in an engine's host cache: the DES registers copies as `name#n`. */
export const nameOf = (weights: string) => weights.replace(/#\d+$/, '');

/** Workers in rendezvous-hash (HRW) order for `adapter`, best first (routing/hrw.rs). */
export function hrwRanked(adapter: string, urls: string[]): number[] {
  return urls
    .map((u, i) => [fnv(`${adapter}\0${u}`), i] as const)
    .sort((a, b) => b[0] - a[0] || a[1] - b[1])
    .map(([, i]) => i);
}

/** Adapters whose weights replica `i` holds (its host cache). */
export const loadedOn = (fleet: DesFleet, i: number) =>
  new Set(fleet.engines[i]!.stats().cachedAdapters.map(nameOf));

/**
 * The load estimator and the proportional sizing: each arrival counted, and per tick the desired
 * replicas of every active adapter: ceil(its share of the load x total slots), at least 1 and at
 * most the worker count, scaled down to the slot budget (largest remainder) when over it.
 */
export function dynamoDemand(clock: Clock, workers: number, slots: number) {
  const arrivals = new Map<string, number[]>(); // arrival times (ms) in the window
  const ema = new Map<string, number>();
  return {
    arrive(adapter: string): void {
      const ts = arrivals.get(adapter) ?? [];
      ts.push(clock.now());
      arrivals.set(adapter, ts);
    },
    desired(): Map<string, number> {
      const now = clock.now();
      const loads = new Map<string, number>();
      for (const [a, ts] of arrivals) {
        while (ts.length && ts[0]! < now - WINDOW_S * 1000) ts.shift();
        const smoothed = ALPHA * ts.length + (1 - ALPHA) * (ema.get(a) ?? ts.length);
        ema.set(a, smoothed);
        loads.set(a, Math.round(smoothed));
        if (ts.length === 0 && smoothed < 0.5) arrivals.delete(a);
      }
      const active = [...loads]
        .filter(([, l]) => l > 0)
        .sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1));
      const totalSlots = workers * slots;
      const kept = active.slice(0, totalSlots);
      const total = kept.reduce((s, [, l]) => s + l, 0);
      let raw = kept.map(
        ([a, l]) => [a, Math.min(workers, Math.max(1, Math.ceil((l / total) * totalSlots)))] as const,
      );
      const sum = raw.reduce((s, [, c]) => s + c, 0);
      if (sum > totalSlots) {
        const scale = totalSlots / sum;
        const floored = raw.map(([a, c]) => {
          const x = Math.max(1, c * scale);
          return [a, Math.max(1, Math.floor(x)), x - Math.floor(x)] as [string, number, number];
        });
        let left = totalSlots - floored.reduce((s, [, f]) => s + f, 0);
        floored.sort((x, y) => y[2] - x[2] || (x[0] < y[0] ? -1 : 1));
        for (const f of floored)
          if (left > 0 && f[1] < workers) {
            f[1]++;
            left--;
          }
        raw = floored.map(([a, f]) => [a, Math.min(workers, f)] as const);
      }
      return new Map(raw);
    },
  };
}

/**
 * `apply_hysteresis`: a growth or a steady size applies at once (and clears the cooldown); a shrink
 * is deferred until it has been wanted for COOLDOWN ticks since the last one applied.
 */
export function hysteresis(
  want: number,
  current: number,
  lastScaleDown: number | undefined,
  tick: number,
): { replicas: number; lastScaleDown?: number } {
  if (want >= current) return { replicas: want };
  if (lastScaleDown === undefined) return { replicas: current, lastScaleDown: tick };
  if (tick - lastScaleDown < COOLDOWN) return { replicas: current, lastScaleDown };
  return { replicas: want, lastScaleDown: tick };
}

/** Tokens a request occupies on a replica until it ends: its prompt and its answer. */
export const tokensOf = (req: DesRequest) => req.arrival.promptTokens + req.arrival.outputTokens;

/**
 * Dynamo's request path for a LoRA: the adapter's replica set from the controller's table (its HRW
 * top-1 while it has none), within it the worker with the least outstanding tokens (the KV
 * router's new prefill plus active decode blocks, without prefix overlap); every arrival counted
 * by the load estimator.
 */
export function dynamoRouter(
  fleet: DesFleet,
  seed: number,
  setOf: (adapter: string) => number[] | undefined,
  demand: { arrive(adapter: string): void },
): DesRouter {
  const outstanding = fleet.urls.map(() => 0);
  const random = seededRandom(seed);
  return counting(
    fleet,
    (adapter) => {
      const set = setOf(adapter) ?? [hrwRanked(adapter, fleet.urls)[0]!];
      return set[
        leastIndex(
          set.map((i) => outstanding[i]!),
          random,
        )
      ]!;
    },
    seed,
    {
      routed: (i, req) => {
        outstanding[i]! += tokensOf(req);
        demand.arrive(req.adapter);
      },
      done: (i, req) => void (outstanding[i]! -= tokensOf(req)),
    },
  );
}
