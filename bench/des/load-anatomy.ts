/**
 * What adapter loads cost lora-router against the pooled bound (issue 34's "SLO >= 0.9x the
 * pooled bound" goal), at the slo part's points (8 replicas x 8 slots, 200 adapters, Zipf 1,
 * 1,000 requests). Per seed:
 * - the late requests (TTFT past 5 s) and refusals, each late TTFT split into parts as
 *   bench/des/class-misses.ts splits it, and how many would have been in time without the other
 *   adapters' loads on their engine (stall), without their own load, or without either;
 * - the loads lora-router made against Belady's minimum for the requests it served on one cache of
 *   the fleet's slots (a lower bound on the loads any online router needs), and how they were
 *   placed: a copy of an adapter another replica held, on an engine with requests queued while an
 *   idle replica existed, and the requests each load stalled;
 * - the pooled bound, and lora-router with loads that take no time (the free-loads run).
 *
 *   node dist/bench/des/load-anatomy.js WORKLOAD LOAD_MS LOAD SEEDS [CONFIG_JSON [TRACE]]
 *   e.g. node dist/bench/des/load-anatomy.js bursty 300 0.3 1,2,3
 */
import { sleep, type VirtualClock } from '../../src/clock';
import type { Arrival } from '../../sim/workload/workload';
import { freeLoads, pooledBound } from './bounds';
import { beladyMisses } from './belady';
import { parts, recordTimelines, TTFT_PARTS, type Timeline, type TtftPart } from './class-misses';
import type { DesFleet } from './fleet';
import { loraRouter, type Policy } from './policies';
import { adapterSequence, runPolicy, type Scenario } from './run';
import { sloPoint } from './slo-point';

const SLO_MS = 5000;

/** One load on one replica: where, and when it was asked for, started and ended. */
export interface LoadTimes {
  url: string;
  adapter: string;
  asked: number;
  start: number;
  end: number;
}

/**
 * `p` with every load that lands pushed to `out` as it ends: its times, and `asked`'s snapshot of the
 * fleet taken when it was asked for (engine `i`, `slots` a replica). The same promise goes back, the
 * record beside it: an await here would reorder the run's events.
 */
export function recordedLoads<S>(
  p: Policy,
  out: (LoadTimes & S)[],
  asked: (fleet: DesFleet, i: number, adapter: string, slots: number) => S,
): Policy {
  return {
    ...p,
    create(clock: VirtualClock, fleet: DesFleet, seed: number, slots: number) {
      fleet.engines.forEach((e, i) => {
        const load = e.loadWeights.bind(e);
        e.loadWeights = (weights, rank) => {
          const at = clock.now();
          const adapter = weights.split('#')[0]!;
          const then = asked(fleet, i, adapter, slots);
          const done = load(weights, rank);
          done.then(
            () => {
              const end = clock.now();
              out.push({
                url: fleet.urls[i]!,
                adapter,
                asked: at,
                start: end - e.loadTime(rank),
                end,
                ...then,
              });
            },
            () => undefined,
          );
          return done;
        };
      });
      return p.create(clock, fleet, seed, slots);
    },
  };
}

/** One load on one replica, and the fleet as it stood when it was asked for. */
export interface PlacedLoad extends LoadTimes {
  /** Requests running and waiting on its engine when it was asked for. */
  running: number;
  waiting: number;
  /** Replicas with no request running or waiting then. */
  idleOthers: number;
  /** Another replica had the adapter registered then: the load is a copy. */
  copy: boolean;
}

/** `p` with every load recorded with the fleet's state when it was asked for. */
export function placedLoads(p: Policy, out: PlacedLoad[]): Policy {
  return recordedLoads(p, out, (fleet, i, adapter) => {
    const q = fleet.engines[i]!.queueView();
    const idleOthers = fleet.engines.filter((o, j) => {
      if (j === i) return false;
      const v = o.queueView();
      return v.running.length + v.waiting.length === 0;
    }).length;
    const copy = fleet.urls.some((_, j) => j !== i && fleet.registeredOn(j).includes(adapter));
    return { running: q.running.length, waiting: q.waiting.length, idleOthers, copy };
  });
}

/** What the loads of one run cost its late requests. */
export interface LoadAnatomy {
  requests: number;
  late: number;
  refused: number;
  msByPart: Record<TtftPart, number>;
  /** Late requests in time without the other adapters' loads on their engine (and their own load's wait behind them). */
  savedWithoutStall: number;
  /** ... without their own load. */
  savedWithoutOwnLoad: number;
  /** ... without either. */
  savedWithoutLoads: number;
  loads: number;
  copies: number;
  /** Loads asked for on an engine with requests running or waiting while another replica was idle. */
  busyWhileIdle: number;
  /** Requests queued on the engine while a load of another adapter ran (request x load pairs). */
  stalledRequests: number;
  /** Of those pairs, the request ended up late. */
  stalledLate: number;
}

/** The anatomy of one traced run. */
export function anatomy(
  arrivals: readonly Arrival[],
  adapters: readonly string[],
  timelines: readonly (Timeline | undefined)[],
  loads: readonly PlacedLoad[],
): LoadAnatomy {
  const msByPart = Object.fromEntries(TTFT_PARTS.map((k) => [k, 0])) as Record<TtftPart, number>;
  const a: LoadAnatomy = {
    requests: arrivals.length,
    late: 0,
    refused: 0,
    msByPart,
    savedWithoutStall: 0,
    savedWithoutOwnLoad: 0,
    savedWithoutLoads: 0,
    loads: loads.length,
    copies: loads.filter((l) => l.copy).length,
    busyWhileIdle: loads.filter((l) => l.running + l.waiting > 0 && l.idleOthers > 0).length,
    stalledRequests: 0,
    stalledLate: 0,
  };
  timelines.forEach((t, i) => {
    if (!t) return void a.refused++;
    const ttft = t.first - t.at;
    const late = ttft > SLO_MS;
    // The loads of other adapters that ran while this request was queued on its engine.
    for (const l of loads)
      if (l.url === t.url && l.adapter !== adapters[i] && l.start < t.start && l.end > t.routed) {
        a.stalledRequests++;
        if (late) a.stalledLate++;
      }
    if (!late) return;
    a.late++;
    const p = parts(t, adapters[i]!, [...loads]);
    for (const k of TTFT_PARTS) msByPart[k] += p[k];
    const stall = p.otherLoads + p.loadQueue;
    if (ttft - stall <= SLO_MS) a.savedWithoutStall++;
    if (ttft - p.ownLoad <= SLO_MS) a.savedWithoutOwnLoad++;
    if (ttft - stall - p.ownLoad <= SLO_MS) a.savedWithoutLoads++;
  });
  return a;
}

/**
 * For each request of `sequence`, whether Belady's MIN on one cache of `capacity` adapters loads
 * its adapter (a miss): with a full cache the adapter used again furthest in the future goes.
 */
export function beladyMissFlags(sequence: readonly string[], capacity: number): boolean[] {
  const next = new Array<number>(sequence.length);
  const last = new Map<string, number>();
  for (let i = sequence.length - 1; i >= 0; i--) {
    next[i] = last.get(sequence[i]!) ?? Infinity;
    last.set(sequence[i]!, i);
  }
  const cached = new Map<string, number>(); // adapter -> its next use
  return sequence.map((a, i) => {
    const miss = !cached.has(a);
    if (miss && cached.size >= capacity) {
      let victim = '';
      let furthest = -1;
      for (const [name, use] of cached)
        if (use > furthest) {
          furthest = use;
          victim = name;
        }
      cached.delete(victim);
    }
    cached.set(a, next[i]!);
    return miss;
  });
}

/**
 * The attainable reference: the fleet pooled into one engine (pooledBound) paying Belady's minimum
 * loads (plain MIN on one cache of the fleet's slots, no pinning: the fewest loads, so the kindest
 * count). A miss waits for its own load (`loadMs`) before its prefill and stops the pooled engine
 * for `loadMs / replicas`: the engine time one replica's load takes from the fleet, spread as
 * evenly as the pooled engine spreads everything; a hit never waits, even for a load under way.
 * Below capacity no router on this fleet is expected above it. Not a proof, and not a bound under
 * overload: there the pooled bound itself routes with no hold, and lora-router's hold can beat it.
 */
export function pooledWithBeladyLoads(
  loadMs: number,
  replicas: number,
  arrivals: readonly Arrival[],
  misses: readonly boolean[],
): Policy {
  const index = new Map(arrivals.map((a, i) => [a, i]));
  return {
    ...pooledBound,
    name: `${pooledBound.name}, Belady's loads`,
    create(clock, fleet, seed) {
      const engine = fleet.engines[0]!;
      const stallMs = loadMs / replicas;
      const free = engine.loadTime.bind(engine);
      const inner = pooledBound.create(clock, fleet, seed, 0);
      let copy = 0;
      return {
        ...inner,
        route: async (req) => {
          if (misses[index.get(req.arrival)!]) {
            await sleep(clock, loadMs - stallMs);
            // The pooled engine loads for free (also an adapter's first step there); this load
            // takes one replica's share of the fleet, read by loadWeights as it starts.
            engine.loadTime = () => stallMs;
            const loaded = engine.loadWeights(`${req.adapter}#belady-${copy++}`, 16);
            engine.loadTime = free;
            await loaded;
          }
          return inner.route(req);
        },
      };
    },
  };
}

/** Arrivals split where no request came for `gapMs`: the bursty workload's bursts. */
export function bursts(arrivals: readonly Arrival[], gapMs = 1500): number[][] {
  const out: number[][] = [];
  arrivals.forEach((a, i) => {
    if (i === 0 || a.at - arrivals[i - 1]!.at > gapMs) out.push([]);
    out.at(-1)!.push(i);
  });
  return out;
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

async function main(): Promise<void> {
  const [workload = 'bursty', loadMs = '300', load = '0.3', seeds = '1', config = '{}', trace] =
    process.argv.slice(2);
  const { scenario, arrivals } = sloPoint(workload, Number(load), trace);
  const extra = JSON.parse(config) as Record<string, unknown>;
  const sums = { router: 0, free: 0, pooled: 0, attainable: 0, loads: 0, belady: 0, n: 0 };
  for (const seed of seeds.split(',').map(Number)) {
    const s: Scenario = { ...scenario, seed, loadMs: Number(loadMs) };
    const adapters = adapterSequence(arrivals.length, s);
    const loads: PlacedLoad[] = [];
    const timelines: (Timeline | undefined)[] = [];
    const mine = await runPolicy(
      placedLoads(loraRouter('lora-router', extra), loads),
      s,
      arrivals,
      adapters,
      {
        served: recordTimelines(timelines, arrivals),
      },
    );
    const pooled = await runPolicy(pooledBound, s, arrivals, adapters);
    const free = await runPolicy(freeLoads(loraRouter('lora-router', extra)), s, arrivals, adapters);
    const slots = s.replicas * s.slots;
    const attainable = await runPolicy(
      pooledWithBeladyLoads(s.loadMs!, s.replicas, arrivals, beladyMissFlags(adapters, slots)),
      s,
      arrivals,
      adapters,
    );
    const served = adapters.filter((_, i) => timelines[i] !== undefined);
    const belady = beladyMisses(served, slots);
    const a = anatomy(arrivals, adapters, timelines, loads);
    sums.router += mine.sloAttainment;
    sums.free += free.sloAttainment;
    sums.pooled += pooled.sloAttainment;
    sums.attainable += attainable.sloAttainment;
    sums.loads += a.loads;
    sums.belady += belady;
    sums.n++;
    const ms = (k: TtftPart) => (a.late === 0 ? '0' : (a.msByPart[k] / a.late / 1000).toFixed(2));
    console.log(
      `${workload} ${loadMs} ms ${Number(load) * 100}% seed ${seed}: SLO lora-router ${pct(mine.sloAttainment)}, ` +
        `free loads ${pct(free.sloAttainment)}, pooled ${pct(pooled.sloAttainment)}, ` +
        `pooled with Belady's loads ${pct(attainable.sloAttainment)}; ` +
        `late ${a.late} refused ${a.refused} of ${a.requests}`,
    );
    console.log(
      `  late requests' mean TTFT parts (s): ${TTFT_PARTS.map((k) => `${k} ${ms(k)}`).join(', ')}; ` +
        `in time without: stall ${a.savedWithoutStall}, own load ${a.savedWithoutOwnLoad}, both ${a.savedWithoutLoads}`,
    );
    console.log(
      `  loads ${a.loads} (Belady's minimum on ${s.replicas * s.slots} slots: ${belady}, ${(a.loads / belady).toFixed(2)}x); ` +
        `copies ${a.copies}; on a busy engine while a replica was idle ${a.busyWhileIdle}; ` +
        `requests stalled by another adapter's load ${a.stalledRequests} (${(a.stalledRequests / Math.max(1, a.loads)).toFixed(2)} per load), of them late ${a.stalledLate}`,
    );
    const lateIn = (t: readonly (Timeline | undefined)[], i: number) =>
      !t[i] || t[i].first - t[i].at > SLO_MS;
    for (const g of bursts(arrivals)) {
      if (g.length < 10) continue;
      const from = arrivals[g[0]!]!.at;
      const to = arrivals[g.at(-1)!]!.at;
      const made = loads.filter((l) => l.asked >= from && l.asked <= to + SLO_MS).length;
      const burst = adapters.filter((_, i) => g.includes(i));
      console.log(
        `  burst at ${(from / 1000).toFixed(0)} s, ${((to - from) / 1000).toFixed(1)} s: ${g.length} requests, ` +
          `${new Set(burst).size} adapters; loads ${made}; late ${g.filter((i) => lateIn(timelines, i)).length}`,
      );
    }
  }
  const mean = (x: number) => pct(x / sums.n);
  console.log(
    `${workload} ${loadMs} ms ${Number(load) * 100}%, mean over seeds ${seeds}: SLO lora-router ${mean(sums.router)}, ` +
      `free loads ${mean(sums.free)}, pooled ${mean(sums.pooled)}, pooled with Belady's loads ${mean(sums.attainable)}; ` +
      `loads ${(sums.loads / sums.belady).toFixed(2)}x Belady's`,
  );
}

if (require.main === module) void main();
