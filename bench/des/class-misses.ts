/**
 * Where the time of the requests that miss their class's objective goes (issue 34's two-class
 * workload): lora-router with `slo_classes` run with the fleet's loads and each request's timeline
 * recorded. A late request's TTFT is split into parts; it is put down to the largest of the parts
 * a router could shorten (another adapter's load on its engine, the replica's queue, the
 * gateway), or to its own load and prefill when none of those took any time.
 */
import type { VirtualClock } from '../../src/clock';
import { defaultEngineOptions } from '../../sim/engine/engine';
import type { Arrival } from '../../sim/workload/workload';
import { TWO_CLASSES } from '../workloads';
import type { DesFleet } from './fleet';
import type { Policy } from './policies';
import { runPolicy, type PolicyResult, type RunHooks, type Scenario } from './run';

/** The parts of a TTFT, in the order a request meets them. */
export const TTFT_PARTS = ['gateway', 'loadQueue', 'ownLoad', 'otherLoads', 'queue', 'prefill'] as const;
export type TtftPart = (typeof TTFT_PARTS)[number];
/**
 * - gateway: held in the gateway, or waiting for room (an adapter slot, an idle adapter);
 * - loadQueue: its own adapter's load waiting for the engine (another adapter's load before it);
 * - ownLoad: its own adapter's load (or the one under way it joined);
 * - otherLoads: other adapters' loads stopping the engine while it was queued there;
 * - queue: queued in the replica behind other requests (its batch or KV cache full);
 * - prefill: its first engine step (its prefill with the others admitted then).
 */

/** What a late request is put down to: a part a router could shorten, else its own load and prefill. */
export const MISS_CAUSES = ['otherLoads', 'queue', 'gateway', 'ownLoad'] as const;
export type MissCause = (typeof MISS_CAUSES)[number];

/** Each cause in a few words, for the benchmark's reasons. */
export const MISS_CAUSE_TEXT: Record<MissCause, string> = {
  otherLoads: "another adapter's load on its engine",
  queue: "the replica's queue",
  gateway: 'held or waiting for room',
  ownLoad: 'its own load and prefill',
};

/** One class's late requests at one point: how many, their causes, and the ms each part took. */
export interface ClassMisses {
  requests: number;
  /** Served past the objective (refusals are counted apart). */
  late: number;
  refused: number;
  /** Late requests whose own adapter was held by no replica when they arrived. */
  coldAtArrival: number;
  /** Late requests by cause. */
  byCause: Record<MissCause, number>;
  /** Over the late requests, ms spent in each part. */
  msByPart: Record<TtftPart, number>;
  /**
   * Late requests that no placement could have served in time: their own load (at the scenario's
   * load time) and their prefill alone on an idle engine exceed the objective.
   */
  ownLoadAlone: number;
  /** Late requests with at least one batch request running or waiting on their replica when they got there. */
  behindBatch: number;
}

/** An adapter load on one replica: when it was asked for, and the engine time it took. */
export interface LoadSpan {
  url: string;
  adapter: string;
  asked: number;
  start: number;
  end: number;
}

/** A served request's timeline (virtual ms). */
export interface Timeline {
  url: string;
  /** Arrived at the gateway, sent to the replica, scheduled there, first token. */
  at: number;
  routed: number;
  start: number;
  first: number;
  end: number;
  /** The TTFT the router predicted on that replica (ms), if it did. */
  predictedMs?: number;
}

/** A `served` hook that writes each served request's timeline into `timelines` (by arrival index). */
export function recordTimelines(
  timelines: (Timeline | undefined)[],
  arrivals: readonly Arrival[],
): NonNullable<RunHooks['served']> {
  return (url, predictedMs, _ttft, rec, i) => {
    timelines[i] = {
      url,
      at: arrivals[i]!.at,
      routed: rec.arrival,
      start: rec.start!,
      first: rec.firstToken!,
      end: rec.end!,
      ...(predictedMs === undefined ? {} : { predictedMs }),
    };
  };
}

const overlap = (a0: number, a1: number, b0: number, b1: number) =>
  Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));

/** `p` with every engine's adapter loads recorded into `loads`, and whether each request's adapter was held anywhere on arrival. */
export function traced(p: Policy, loads: LoadSpan[], heldOnArrival: Map<Arrival, boolean>): Policy {
  return {
    ...p,
    create(clock: VirtualClock, fleet: DesFleet, seed: number, slots: number) {
      fleet.engines.forEach((e, i) => {
        const load = e.loadWeights.bind(e);
        // The same promise back, recorded beside: an await here would reorder the run's events.
        e.loadWeights = (weights, rank) => {
          const asked = clock.now();
          const done = load(weights, rank);
          done.then(
            () => {
              const end = clock.now();
              loads.push({
                url: fleet.urls[i]!,
                adapter: weights.split('#')[0]!,
                asked,
                start: end - e.loadTime(rank),
                end,
              });
            },
            () => undefined,
          );
          return done;
        };
      });
      const router = p.create(clock, fleet, seed, slots);
      return {
        ...router,
        route: (req) => {
          const held = fleet.urls.some((_, i) => fleet.registeredOn(i).includes(req.adapter));
          heldOnArrival.set(req.arrival, held);
          return router.route(req);
        },
      };
    },
  };
}

/** The parts of one late request's TTFT (ms). */
export function parts(t: Timeline, adapter: string, loads: LoadSpan[]): Record<TtftPart, number> {
  const here = loads.filter((l) => l.url === t.url);
  const own = here.filter((l) => l.adapter === adapter);
  // Its own load (or the one it joined), and that load's wait for the engine (another load or a step).
  const ownLoad = own.reduce((n, l) => n + overlap(t.at, t.routed, l.start, l.end), 0);
  const ownLoadWait = own.reduce((n, l) => n + overlap(t.at, t.routed, l.asked, l.start), 0);
  const stalled = here
    .filter((l) => l.adapter !== adapter)
    .reduce((n, l) => n + overlap(t.routed, t.start, l.start, l.end), 0);
  return {
    gateway: Math.max(0, t.routed - t.at - ownLoad - ownLoadWait),
    loadQueue: ownLoadWait,
    ownLoad,
    otherLoads: stalled,
    queue: Math.max(0, t.start - t.routed - stalled),
    prefill: t.first - t.start,
  };
}

const zero = <K extends string>(keys: readonly K[]): Record<K, number> =>
  Object.fromEntries(keys.map((c) => [c, 0])) as Record<K, number>;

/** The cause of a late request whose TTFT took `p`. */
function causeOf(p: Record<TtftPart, number>): MissCause {
  const shortenable = { otherLoads: p.loadQueue + p.otherLoads, queue: p.queue, gateway: p.gateway };
  const [top, ms] = Object.entries(shortenable).reduce((a, b) => (b[1] > a[1] ? b : a));
  return ms > 0 ? (top as MissCause) : 'ownLoad';
}

/**
 * Runs `policy` (lora-router with the classes) on the point's requests and puts each late
 * request of each class down to a cause.
 */
export async function classMisses(
  policy: Policy,
  s: Scenario,
  arrivals: Arrival[],
  adapters: string[],
  classes: readonly string[],
  /** Filled with the run's adapter loads (for diagnosis scripts). */
  loads: LoadSpan[] = [],
): Promise<{
  result: PolicyResult;
  misses: Record<string, ClassMisses>;
  /** Per request: its timeline if served, and its cause if late. */
  timelines: (Timeline | undefined)[];
  causes: (MissCause | undefined)[];
}> {
  const heldOnArrival = new Map<Arrival, boolean>();
  const timelines = new Array<Timeline | undefined>(arrivals.length);
  const result = await runPolicy(traced(policy, loads, heldOnArrival), s, arrivals, adapters, {
    classes,
    served: recordTimelines(timelines, arrivals),
  });
  const out: Record<string, ClassMisses> = {};
  const causes = new Array<MissCause | undefined>(arrivals.length);
  for (const c of TWO_CLASSES.classes) {
    const m: ClassMisses = {
      requests: 0,
      late: 0,
      refused: 0,
      coldAtArrival: 0,
      byCause: zero(MISS_CAUSES),
      msByPart: zero(TTFT_PARTS),
      ownLoadAlone: 0,
      behindBatch: 0,
    };
    arrivals.forEach((a, i) => {
      if (classes[i] !== c.name) return;
      m.requests++;
      const t = timelines[i];
      if (!t) return void m.refused++;
      if (t.first - t.at <= c.ttft_ms) return;
      m.late++;
      if (!heldOnArrival.get(a)) m.coldAtArrival++;
      const p = parts(t, adapters[i]!, loads);
      for (const k of TTFT_PARTS) m.msByPart[k] += p[k];
      const e = { ...defaultEngineOptions, ...s.engine };
      const alone = a.promptTokens * e.prefillMsPerToken + e.decodeMsPerStep;
      if (p.ownLoad > 0 && (s.loadMs ?? 0) + alone > c.ttft_ms) m.ownLoadAlone++;
      causes[i] = causeOf(p);
      m.byCause[causes[i]]++;
      // Batch requests on its replica (running or waiting) when it got there.
      const batchThere = timelines.some(
        (u, j) =>
          u &&
          j !== i &&
          classes[j] === 'batch' &&
          u.url === t.url &&
          u.routed <= t.routed &&
          u.end > t.routed,
      );
      if (batchThere) m.behindBatch++;
    });
    out[c.name] = m;
  }
  return { result, misses: out, timelines, causes };
}
