import { VirtualClock } from '../../src/clock';
import { seededRandom } from '../../src/random';
import type { EngineOptions, RequestRecord } from '../../sim/engine/engine';
import type { UnloadMode } from '../../sim/http/replica';
import type { Arrival } from '../../sim/workload/workload';
import { percentile as pct } from '../../sim/workload/percentile';
import { zipfSampler } from '../../sim/workload/zipf';
import { DesFleet } from './fleet';
import type { Policy } from './policies';

export interface Scenario {
  replicas: number;
  slots: number;
  /** Load time of a rank-16 adapter; absent: the engine's load model (local NVMe). */
  loadMs?: number;
  /** What an unload frees on the replicas (default: the released vLLM behaviour). */
  unload?: UnloadMode;
  adapters: number;
  /** Zipf exponent; 0 = uniform popularity. */
  alpha: number;
  seed: number;
  engine: Partial<EngineOptions>;
  /** The replicas export vLLM's computed-token families (DesFleetOptions.computedTokens). */
  computedTokens?: boolean;
}

/** What a run may add per request: its KV blocks for the prefix cache, and what was predicted against what came. */
export interface RunHooks {
  /** The run's fleet, once made (bench/des/churn-breakdown.ts reads its counters). */
  fleet?: (fleet: DesFleet) => void;
  /** Per request, the SLO class it names (llm-d's objective header), if any. */
  classes?: readonly string[];
  /** Request `i`'s blocks (`EngineRequest.blocks`); absent: its prompt shares nothing. */
  blocks?: (i: number) => readonly string[] | undefined;
  /** A served request: the replica, the TTFT the router predicted there (if it did), the TTFT it got, its record, its index. */
  served?: (
    url: string,
    predictedMs: number | undefined,
    ttftMs: number,
    rec: RequestRecord,
    i: number,
  ) => void;
}

/** TTFT objectives (ms) SLO attainment is reported at; the first is the default. */
export const SLOS_MS = [5000, 2000, 10000];

/** Share of `ttft` (refused: Infinity) within `sloMs`. */
export function sloAttainment(ttft: readonly number[], sloMs: number): number {
  return ttft.length === 0 ? NaN : ttft.filter((t) => t <= sloMs).length / ttft.length;
}

export interface PolicyResult {
  policy: string;
  requests: number;
  /** Requests served (answered 200); `errors` were refused. */
  completed: number;
  errors: number;
  /** The same as `errors`, under the name results.json readers look for. */
  refused: number;
  /**
   * Of `errors`, requests the replica refused as longer than its context (vLLM's 400): no
   * policy can serve them. Absent in results from before issue 25.
   */
  overContext?: number;
  /** Share of requests answered with TTFT within the default SLO (5 s); refused = missed. */
  sloAttainment: number;
  /** SLO attainment at each SLO (ms). */
  slo: Record<string, number>;
  loads: number;
  unloads: number;
  /**
   * 1 - loads / served requests. A refused request never loads, so counting it as a hit would
   * flatter a policy that refuses; every policy is measured over what it served.
   */
  hitRate: number;
  ttftP50: number;
  /** With refused requests counted as never answered (Infinity). */
  ttftP99: number;
  /** Over the requests that were served. */
  ttftP99Served: number;
  e2eP99: number;
  /** Completed requests per second of virtual time. */
  throughput: number;
  /** Unloads of an adapter with requests in the engine (must be 0). */
  busyUnloads: number;
  /** Of `loads`, reloads inside the engine loop after the host cache pushed the weights out. */
  engineReloads: number;
  /** Wall-clock seconds the simulation took. */
  wallS: number;
  /** Belady's bound over the requests this policy served (set by the benchmark). */
  belady?: number;
  /** The same with in-flight pinning (set by the benchmark). */
  pinnedBelady?: number;
  /** That demand paging with LRU instead of foresight: what an online cache needs (set by the benchmark). */
  pinnedLru?: number;
  /**
   * Churn as Dynamo measures it (issue 34): adapter loads and unloads (through the API and inside
   * the engines) counted per `tickMs` interval from the first arrival until the last request
   * ended; `quiet` intervals had none. Absent in results from before issue 34.
   */
  churn?: { tickMs: number; ticks: number; ops: number; quiet: number };
  /** Per request: arrival and end (virtual ms; Infinity: refused), for bounds that need them. */
  intervals?: { start: number[]; end: number[] };
  /** Per request, with `classes` given: its TTFT (Infinity: refused), for per-class goals. */
  ttftOf?: number[];
}

/** The adapter of each request: Zipf(alpha) over `adapters` names, seeded. */
export function adapterSequence(n: number, s: Pick<Scenario, 'adapters' | 'alpha' | 'seed'>): string[] {
  const pick = zipfSampler(s.adapters, s.alpha, seededRandom(s.seed * 7919 + 17));
  // Popularity rank -> a name; shuffled so rank does not follow name order (hashing sees no pattern).
  const names = Array.from({ length: s.adapters }, (_, i) => `adapter-${String(i).padStart(4, '0')}`);
  const r = seededRandom(s.seed);
  for (let i = names.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [names[i], names[j]] = [names[j]!, names[i]!];
  }
  return Array.from({ length: n }, () => names[pick()]!);
}

/** Runs one policy on the workload in virtual time and measures it. */
export async function runPolicy(
  policy: Policy,
  scenario: Scenario,
  arrivals: Arrival[],
  adapters: string[],
  hooks: RunHooks = {},
): Promise<PolicyResult> {
  const started = Date.now();
  const clock = new VirtualClock();
  const fleet = new DesFleet(clock, {
    replicas: scenario.replicas,
    slots: scenario.slots,
    loadMs: policy.loadMs ?? scenario.loadMs,
    unload: scenario.unload,
    mode: policy.mode,
    engine: scenario.engine,
    computedTokens: scenario.computedTokens,
  });
  hooks.fleet?.(fleet);
  const router = policy.create(clock, fleet, scenario.seed, scenario.slots);
  const ttft: number[] = [];
  const e2e: number[] = [];
  let errors = 0;
  let overContext = 0;
  let finished = 0;
  let lastEnd = 0;
  const ends = new Array<number>(arrivals.length).fill(Infinity);
  const ttftOf = new Array<number>(arrivals.length).fill(Infinity);
  arrivals.forEach((a, i) => {
    clock.after(a.at, () => {
      void (async () => {
        const t0 = clock.now();
        try {
          const r = await router.route({ adapter: adapters[i]!, arrival: a, sloClass: hooks.classes?.[i] });
          if ('error' in r) {
            // A refused request counts as never answered: it must not flatter the percentiles.
            errors++;
            ttft.push(Infinity);
            e2e.push(Infinity);
            return;
          }
          const rec = await fleet.submit(
            r.url,
            adapters[i]!,
            a.promptTokens,
            a.outputTokens,
            hooks.blocks?.(i),
            r.priority,
          );
          if ('status' in rec) {
            // Longer than the replica's context: vLLM's 400, a miss for every policy alike.
            await router.done(r.url, r.token, { status: rec.status });
            errors++;
            overContext++;
            ttft.push(Infinity);
            e2e.push(Infinity);
            return;
          }
          await router.done(r.url, r.token, { status: 200, ttftMs: rec.firstToken! - t0 });
          hooks.served?.(r.url, r.predictedMs, rec.firstToken! - t0, rec, i);
          ttft.push(rec.firstToken! - t0);
          e2e.push(rec.end! - t0);
          lastEnd = Math.max(lastEnd, rec.end!);
          ends[i] = rec.end!;
          ttftOf[i] = rec.firstToken! - t0;
        } finally {
          finished++;
        }
      })();
    });
  });
  const churn = churnCounter(clock, fleet, arrivals[0]!.at, () => finished === arrivals.length);
  // Pollers tick forever: advance in slices until every request has finished.
  const step = 60_000;
  while (finished < arrivals.length) {
    await clock.run(clock.now() + step);
    if (clock.now() > arrivals.at(-1)!.at + 3_600_000)
      throw new Error(`${policy.name}: requests still running an hour after the last arrival`);
  }
  router.stop();
  churn.stop();
  const span = (lastEnd - arrivals[0]!.at) / 1000;
  const loads = fleet.totalLoads();
  const served = ttft.length - errors;
  // Every adapter resident with free loads: its loads are no placement's doing.
  const free = policy.mode === 'oracle' || policy.mode === 'pooled';
  return {
    policy: policy.name,
    requests: arrivals.length,
    completed: served,
    errors,
    refused: errors,
    overContext,
    sloAttainment: sloAttainment(ttft, SLOS_MS[0]!),
    slo: Object.fromEntries(SLOS_MS.map((t) => [String(t), sloAttainment(ttft, t)])),
    loads: free ? 0 : loads,
    unloads: free ? 0 : fleet.totalUnloads(),
    hitRate: free ? 1 : served === 0 ? NaN : 1 - loads / served,
    ttftP50: pct(ttft, 0.5),
    ttftP99: pct(ttft, 0.99),
    ttftP99Served: pct(
      ttft.filter((x) => x !== Infinity),
      0.99,
    ),
    e2eP99: pct(e2e, 0.99),
    throughput: served / span,
    busyUnloads: fleet.busyUnloads,
    engineReloads: free ? 0 : fleet.engineReloads(),
    // Every adapter resident: the engines' reloads at no cost are no churn.
    churn: free ? { ...churn.result(), ops: 0, quiet: churn.result().ticks } : churn.result(),
    wallS: (Date.now() - started) / 1000,
    intervals: { start: arrivals.map((a) => a.at), end: ends },
    ...(hooks.classes ? { ttftOf } : {}),
  };
}

/** Dynamo's controller timestep (lib/llm/src/lora/config.rs `timestep_secs`, 3 s): churn's interval. */
export const CHURN_TICK_MS = 3000;

/**
 * Counts the fleet's loads and unloads per CHURN_TICK_MS from `from` until `done()` (the last
 * request ended), as Dynamo's churn gauges do per controller tick.
 */
function churnCounter(clock: VirtualClock, fleet: DesFleet, from: number, done: () => boolean) {
  const ops = () => fleet.totalLoads() + fleet.totalUnloads();
  let last = ops();
  let ticks = 0;
  let quiet = 0;
  let total = 0;
  let cancel = clock.after(from + CHURN_TICK_MS - clock.now(), function tick() {
    const now = ops();
    ticks++;
    total += now - last;
    if (now === last) quiet++;
    last = now;
    if (!done()) cancel = clock.after(CHURN_TICK_MS, tick);
  });
  return {
    stop: () => cancel(),
    result: () => ({ tickMs: CHURN_TICK_MS, ticks, ops: total, quiet }),
  };
}

/**
 * Requests per second the fleet serves at full batch for this workload's token mix: 100% load
 * on every workload. Over the requests a replica can take (prompt + answer within its context,
 * the engine's KV capacity), with their mean prompt P and answer O tokens:
 * - a replica runs b = min(maxNumSeqs, kvCapacityTokens / (P + O)) sequences at once: the engine
 *   reserves each request's prompt and answer in the KV cache when it admits it, so long prompts
 *   bound the batch by KV capacity before the slot count does;
 * - a request costs its prefill, P x prefillMsPerToken (a step prefills while everyone waits),
 *   plus its share of the decode steps, O x stepMs(b) / b, where a step of b sequences takes
 *   decodeMsPerStep x (1 + decodeSlowdownPerSeq x (b - 1));
 * - the fleet serves replicas x 1000 / that many ms requests per second.
 * Arrival rates are set as a fraction of this.
 */
export function fleetCapacity(s: Scenario, arrivals: Arrival[], engine: EngineOptions): number {
  const fits = arrivals.filter((a) => a.promptTokens + a.outputTokens <= engine.kvCapacityTokens);
  const meanOut = fits.reduce((n, a) => n + a.outputTokens, 0) / fits.length;
  const meanPrompt = fits.reduce((n, a) => n + a.promptTokens, 0) / fits.length;
  const b = Math.max(1, Math.min(engine.maxNumSeqs, engine.kvCapacityTokens / (meanPrompt + meanOut)));
  const stepMs = engine.decodeMsPerStep * (1 + engine.decodeSlowdownPerSeq * (b - 1));
  const msPerRequest = (meanOut * stepMs) / b + meanPrompt * engine.prefillMsPerToken;
  return (s.replicas * 1000) / msPerRequest;
}
