/**
 * Issue 15's routing goals: every policy and lora-router variant on each workload, at each
 * adapter load time and fleet load, with SLO attainment (TTFT within the SLO; a refusal is a
 * miss) beside refusals, latency and loads over the served requests.
 */
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Arrival } from '../../sim/workload/workload';
import { atRate } from '../../sim/workload/workload';
import { defaultEngineOptions } from '../../sim/engine/engine';
import { BASELINES, mean, ORACLE } from '../goals';
import { fmtCount, fmtNum, fmtRatio, ms, table } from '../report';
import { pinnedBeladyMisses, pinnedLruMisses, setServedBounds } from './belady';
import * as P from './policies';
import { adapterSequence, fleetCapacity, runPolicy, SLOS_MS, type PolicyResult, type Scenario } from './run';

export const SLO_LOADS = [0.3, 0.5, 0.7, 0.9];

/** One workload, load time, fleet load and seed: every policy's result on the same requests. */
export interface SloPoint {
  workload: string;
  loadMs: number;
  load: number;
  seed: number;
  /** Pinned Belady over all requests (a policy's own figure is over what it served). */
  pinned: number;
  /** The same demand paging with LRU instead of foresight: what an online cache needs. */
  pinnedLru: number;
  /**
   * Share of the run (first to last arrival) the fewest loads (pinned Belady) block the engines:
   * each load stops its replica's engine loop for the load time. Near or past 1, no policy can
   * answer within the SLO the way the oracle does.
   */
  blocked: number;
  results: PolicyResult[];
}

export interface SloSweepOptions {
  workloads: { name: string; arrivals: Arrival[] }[];
  loadTimes: number[];
  loads: number[];
  seeds: number[];
  /** lora-router configurations compared (the first is the default). */
  variants: { name: string; config: Record<string, unknown> }[];
}

/** One point of the sweep: what a worker thread needs to run it on its own. */
export interface SloTask {
  workload: string;
  arrivals: Arrival[];
  /** The workload's capacity (req/s), from all of its requests. */
  capacity: number;
  loadMs: number;
  load: number;
  seed: number;
}

/** Every policy and variant at one point, on the same requests. */
export async function sloPoint(
  scenario: Scenario,
  t: SloTask,
  variants: SloSweepOptions['variants'],
): Promise<SloPoint> {
  const others = [P.roundRobin, P.leastRequest, P.consistentHash, P.llmdSoftAffinity, P.oracle];
  const policies = [...variants.map((v) => P.loraRouter(v.name, v.config)), ...others];
  const s = { ...scenario, seed: t.seed, loadMs: t.loadMs };
  const arrivals = atRate(t.arrivals, t.capacity * t.load);
  const adapters = adapterSequence(arrivals.length, s);
  const results: PolicyResult[] = [];
  for (const p of policies) results.push(await runPolicy(p, s, arrivals, adapters));
  const slots = s.replicas * s.slots;
  const oracle = results.find((r) => r.policy === ORACLE)!;
  const { start, end } = oracle.intervals!;
  const pinned = pinnedBeladyMisses(adapters, start, end, slots);
  const pinnedLru = pinnedLruMisses(adapters, start, end, slots);
  setServedBounds(results, oracle, adapters, slots);
  const blocked = (pinned * t.loadMs) / (s.replicas * (arrivals.at(-1)!.at - arrivals[0]!.at));
  return {
    workload: t.workload,
    loadMs: t.loadMs,
    load: t.load,
    seed: t.seed,
    pinned,
    pinnedLru,
    blocked,
    results,
  };
}

/** The sweep's points in report order: workload, load time, load, seed. */
export function sloTasks(scenario: Scenario, o: SloSweepOptions): SloTask[] {
  const tasks: SloTask[] = [];
  for (const w of o.workloads) {
    const capacity = fleetCapacity(scenario, w.arrivals, defaultEngineOptions);
    for (const loadMs of o.loadTimes)
      for (const load of o.loads)
        for (const seed of o.seeds)
          tasks.push({ workload: w.name, arrivals: w.arrivals, capacity, loadMs, load, seed });
  }
  return tasks;
}

/** One line per point for the log: each variant beside the best baseline and the oracle. */
export function describePoint(p: SloPoint, variants: string[]): string {
  const best = bestSlo(p.results);
  const oracle = p.results.find((r) => r.policy === ORACLE)!;
  const mine = variants.map((name) => {
    const r = p.results.find((x) => x.policy === name)!;
    return `${name}: SLO ${pct(r.sloAttainment)} refused ${r.errors} p99 ${ms(r.ttftP99)}`;
  });
  return `  ${p.workload} load ${ms(p.loadMs)} at ${p.load * 100}% seed ${p.seed}: ${mine.join(' · ')} | best baseline SLO ${pct(best.sloAttainment)} (${best.policy}), oracle ${pct(oracle.sloAttainment)}`;
}

/**
 * Runs the sweep's points over `threads` worker threads (the points are independent, and each
 * is single-threaded virtual time), in report order.
 */
export async function sloSweep(
  scenario: Scenario,
  o: SloSweepOptions,
  log: (s: string) => void,
  threads = 1,
): Promise<SloPoint[]> {
  const tasks = sloTasks(scenario, o);
  const out: SloPoint[] = new Array(tasks.length);
  const names = o.variants.map((v) => v.name);
  let next = 0;
  const run = async (worker: (t: SloTask) => Promise<SloPoint>) => {
    while (next < tasks.length) {
      const i = next++;
      out[i] = await worker(tasks[i]!);
      log(describePoint(out[i], names));
    }
  };
  if (threads <= 1) await run((t) => sloPoint(scenario, t, o.variants));
  else {
    const pool = Array.from({ length: threads }, () => sloWorker(scenario, o.variants));
    try {
      await Promise.all(pool.map((w) => run(w.run)));
    } finally {
      await Promise.all(pool.map((w) => w.stop()));
    }
  }
  return out;
}

/** A worker thread running points of the sweep (bench/des/slo-worker.ts). */
function sloWorker(scenario: Scenario, variants: SloSweepOptions['variants']) {
  const worker = new Worker(join(__dirname, 'slo-worker.js'), { workerData: { scenario, variants } });
  return {
    run: (t: SloTask) =>
      new Promise<SloPoint>((resolve, reject) => {
        const onError = (err: Error) => reject(err);
        worker.once('error', onError);
        worker.once('message', (p: SloPoint) => {
          worker.off('error', onError);
          resolve(p);
        });
        worker.postMessage(t);
      }),
    stop: () => worker.terminate(),
  };
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** The baseline with the highest SLO attainment. */
function bestSlo(results: PolicyResult[]): PolicyResult {
  return results
    .filter((r) => BASELINES.includes(r.policy))
    .reduce((a, b) => (b.sloAttainment > a.sloAttainment ? b : a));
}

/** A goal at one point: the figure, its bound, whether it holds, and what stands in the way if not. */
export interface Goal {
  value: number;
  bound: number;
  met: boolean;
  why?: string;
}

/**
 * The four goals for one lora-router variant at one (workload, load time, load), over its seeds:
 * means of the per-seed figures, except refusals, which must be none in every seed.
 */
export function sloGoals(points: SloPoint[], variant: string) {
  const at = (f: (p: SloPoint) => number) => mean(points.map(f));
  const router = (p: SloPoint) => p.results.find((r) => r.policy === variant)!;
  const oracle = (p: SloPoint) => p.results.find((r) => r.policy === ORACLE)!;
  const bestP99 = (p: SloPoint) =>
    Math.min(...p.results.filter((r) => BASELINES.includes(r.policy)).map((r) => r.ttftP99));
  const load = points[0]!.load;
  const below = load <= 0.5;
  const goal = (value: number, bound: number, atMost: boolean, why?: () => string): Goal => {
    const met = atMost ? value <= bound : value >= bound;
    return { value, bound, met, why: met ? undefined : why?.() };
  };
  /** Loads stall engines beyond the token load the point is named for: past capacity in fact. */
  const blockedWhy = () => `the fewest loads block the engines ${pct(at((p) => p.blocked))} of the run`;
  const oracleP99 = () => at((p) => oracle(p).ttftP99 / bestP99(p));
  const refused = Math.max(...points.map((p) => router(p).errors));
  return {
    /** 1: no refusal at or below 50% load. */
    noRefusal: below ? goal(refused, 0, true, blockedWhy) : undefined,
    /** 2: SLO attainment no worse than the best baseline's. */
    sloVsBaseline: goal(
      at((p) => router(p).sloAttainment),
      at((p) => bestSlo(p.results).sloAttainment),
      false,
      blockedWhy,
    ),
    /** 3a: below capacity, TTFT p99 (refusals never answered) at most 0.5x the best baseline's. */
    p99VsBaseline: below
      ? goal(
          at((p) => router(p).ttftP99 / bestP99(p)),
          0.5,
          true,
          () =>
            refused > 0 && points.some((p) => router(p).ttftP99 === Infinity)
              ? `over 1% refused: the p99 request is never answered; ${blockedWhy()}`
              : `${oracleP99() > 0.5 ? 'unreachable: ' : ''}the oracle, which never loads, is at ${fmtRatio(oracleP99())}`,
        )
      : undefined,
    /** 3b: below capacity, SLO attainment at least 0.9x the oracle's. */
    sloVsOracle: below
      ? goal(
          at((p) => router(p).sloAttainment / oracle(p).sloAttainment),
          0.9,
          false,
          blockedWhy,
        )
      : undefined,
    /** 4: loads at most 1.2x pinned Belady over the same served requests. */
    loadsVsPinned: goal(
      at((p) => router(p).loads / router(p).pinnedBelady!),
      1.2,
      true,
      () => `an online cache (LRU, same pins): ${fmtRatio(at((p) => p.pinnedLru / p.pinned))}`,
    ),
  };
}

type Goals = ReturnType<typeof sloGoals>;
const GOAL_COLUMNS: [string, (g: Goals) => Goal | undefined, (x: Goal) => string][] = [
  ['no refusal ≤ 50%', (g) => g.noRefusal, (x) => `${fmtCount(x.value)} refused`],
  ['SLO ≥ best baseline', (g) => g.sloVsBaseline, (x) => `${pct(x.value)} vs ${pct(x.bound)}`],
  ['p99 ≤ 0.5× best baseline', (g) => g.p99VsBaseline, (x) => fmtRatio(x.value)],
  ['SLO ≥ 0.9× oracle', (g) => g.sloVsOracle, (x) => fmtRatio(x.value)],
  ['loads ≤ 1.2× pinned Belady', (g) => g.loadsVsPinned, (x) => fmtRatio(x.value)],
];

/** Groups points by workload, load time and load (seeds together), in sweep order. */
export function sloGroups(points: SloPoint[]): SloPoint[][] {
  const groups = new Map<string, SloPoint[]>();
  for (const p of points) {
    const k = `${p.workload}|${p.loadMs}|${p.load}`;
    groups.set(k, [...(groups.get(k) ?? []), p]);
  }
  return [...groups.values()];
}

/**
 * TTFT p99 over the best baseline's at or below 50% load: the geometric mean over the points
 * where the variant's p99 is answered (refusals past 1% make it infinite, and count in goal 1).
 */
export function p99Below(points: SloPoint[], variant: string): number {
  const ratios = sloGroups(points)
    .map((g) => sloGoals(g, variant).p99VsBaseline?.value)
    .filter((x): x is number => x !== undefined && Number.isFinite(x));
  return Math.exp(ratios.reduce((n, x) => n + Math.log(x), 0) / ratios.length);
}

/** Goals met over every point, for one variant (the first `columns` goals only, if given). */
export function allMet(
  points: SloPoint[],
  variant: string,
  columns = GOAL_COLUMNS.length,
): { met: number; of: number } {
  let met = 0;
  let of = 0;
  for (const g of sloGroups(points)) {
    for (const [, pick] of GOAL_COLUMNS.slice(0, columns)) {
      const x = pick(sloGoals(g, variant));
      if (!x) continue;
      of++;
      if (x.met) met++;
    }
  }
  return { met, of };
}

export function sloSection(points: SloPoint[], variants: string[], n: number, full: boolean): string[] {
  const seeds = [...new Set(points.map((p) => p.seed))];
  const router = variants[0]!;
  const cell = (x: Goal | undefined, f: (x: Goal) => string) =>
    x ? `${x.met ? 'met' : '**missed**'}: ${f(x)}${x.why ? ` (${x.why})` : ''}` : '';
  const goalRows = sloGroups(points).map((g) => {
    const p = g[0]!;
    const goals = sloGoals(g, router);
    return [
      p.workload,
      ms(p.loadMs),
      `${p.load * 100}%`,
      ...GOAL_COLUMNS.map(([, pick, f]) => cell(pick(goals), f)),
    ];
  });
  const policies = points[0]!.results.map((r) => r.policy);
  const policyRows = sloGroups(points).flatMap((g) =>
    policies.map((name, i) => {
      const rs = g.map((p) => p.results.find((r) => r.policy === name)!);
      const p = g[0]!;
      return [
        i === 0 ? `${p.workload}, ${ms(p.loadMs)}, ${p.load * 100}%` : '',
        name,
        ...SLOS_MS.map((t) => pct(mean(rs.map((r) => r.slo[String(t)]!)))),
        fmtNum(mean(rs.map((r) => r.errors))),
        ms(mean(rs.map((r) => r.ttftP99))),
        name === ORACLE ? '' : fmtNum(mean(rs.map((r) => r.loads / r.completed))),
        name === ORACLE ? '' : fmtRatio(mean(rs.map((r) => r.loads / r.pinnedBelady!))),
      ];
    }),
  );
  const tally = variants.map((v) => {
    const t = allMet(points, v);
    const first = allMet(points, v, 2);
    return `${v}: ${t.met} of ${t.of} (no refusal and SLO ≥ best baseline: ${first.met} of ${first.of}; p99 ÷ best baseline at or below 50% load: ${fmtRatio(p99Below(points, v))})`;
  });
  const trade = variantTrade(points, variants);
  return [
    '## Routing under bursts: SLO attainment',
    '',
    `Each workload (the conversation trace, and the bursty prefill-heavy generator: inter-arrival CV about 11, bursts at 25× the mean rate, prompts 1-8k tokens, answers 5-50) at each adapter load time and fleet load; ${n.toLocaleString('en-US')} requests per point, seed${seeds.length > 1 ? 's' : ''} ${seeds.join(', ')} (${full ? 'full run' : 'quick run; `--full` runs 3,000 requests per point'}). SLO attainment is the share of requests whose TTFT is within the SLO (${SLOS_MS.map((t) => ms(t)).join(', ')}); a refused request is a miss. Goals for lora-router as configured by default (${router}), mean over seeds; "no refusal" holds in every seed. A missed goal says what stands in the way: the oracle's own figure where even no loads at all would miss it; the share of the run the fewest loads possible (pinned Belady) keep the engines blocked, each load stopping its replica's engine loop for the load time, past which the point is overloaded whatever its token load; or what an online cache (LRU on the same pinned slots, as one cache) needs against pinned Belady, which sees the future.`,
    '',
    table(['workload', 'load time', 'load', ...GOAL_COLUMNS.map(([name]) => name)], goalRows),
    '',
    `Goals met per variant (of the goals that apply at each point): ${tally.join('; ')}. The default is chosen on the first two, the issue's "never worse than the baselines, no refusal below capacity"; then on how far below the baselines its p99 is below capacity (geometric mean over those points, where every p99 is answered), the third goal's figure; then on the count.`,
    '',
    ...trade,
    '',
    table(
      [
        'point',
        'policy',
        ...SLOS_MS.map((t) => `SLO ${ms(t)}`),
        'refused',
        'TTFT p99',
        'loads per served request',
        'loads ÷ pinned Belady (served)',
      ],
      policyRows,
    ),
    '',
  ];
}

/**
 * lora-router configurations A/B'd on the routing goals (the first is the default). Each changes
 * one unit: where and how long a cold request waits for room (src/router/room-wait.ts).
 */
export const ROUTING_VARIANTS: { name: string; config: Record<string, unknown> }[] = [
  { name: 'lora-router', config: {} },
  { name: 'escalate after 2 s on the chosen replica', config: { replica_wait_ms: 2000 } },
  // Saturation, not room: a holder with 4 waiting spreads its adapter (the default is 2).
  {
    name: 'escalate, holders saturated at 4 waiting (previous default)',
    config: { target_waiting_per_replica: 4 },
  },
  {
    name: 'wait on the chosen replica, 10 s (old default)',
    config: { room_wait: 'replica', queue_timeout_ms: 10000, target_waiting_per_replica: 4 },
  },
  { name: 'wait for room anywhere, 10 s', config: { room_wait: 'anywhere', queue_timeout_ms: 10000 } },
];

/**
 * How each variant trades refusals, SLO attainment, latency and loads: means over the points at
 * or below 50% load and above it, both workloads and every load time.
 */
export function variantTrade(points: SloPoint[], variants: string[]): string[] {
  const rows = variants.flatMap((v) =>
    (['≤ 50%', '> 50%'] as const).map((band, i) => {
      const rs = points
        .filter((p) => p.load <= 0.5 === (band === '≤ 50%'))
        .map((p) => p.results.find((r) => r.policy === v)!);
      return [
        i === 0 ? v : '',
        band,
        fmtNum(mean(rs.map((r) => r.errors / r.requests)) * 100) + '%',
        pct(mean(rs.map((r) => r.sloAttainment))),
        ms(mean(rs.map((r) => r.ttftP50))),
        ms(mean(rs.map((r) => r.ttftP99Served))),
        fmtNum(mean(rs.map((r) => r.loads / r.completed))),
        fmtRatio(mean(rs.map((r) => r.loads / r.pinnedBelady!))),
      ];
    }),
  );
  return [
    table(
      [
        'variant',
        'load',
        'refused',
        `SLO ${ms(SLOS_MS[0]!)}`,
        'TTFT p50',
        'served p99',
        'loads per served request',
        'loads ÷ pinned Belady (served)',
      ],
      rows,
    ),
  ];
}
