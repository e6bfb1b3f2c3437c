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
import { BASELINE_POLICIES, bestBaseline, byName, mean, ORACLE } from '../goals';
import { fmtCount, fmtNum, fmtPct, fmtRatio, ms, table } from '../report';
import { runPoint } from './point';
import * as P from './policies';
import { fleetCapacity, SLOS_MS, type PolicyResult, type Scenario } from './run';
import { freeLoadPolicies, pooledBound } from './bounds';
import { freeLoadsWhy, goal3Applies } from './slo-goals-25';

export const SLO_LOADS = [0.3, 0.5, 0.7, 0.9];

/** One workload, load time, fleet load and seed: every policy's result on the same requests. */
export interface SloPoint {
  workload: string;
  loadMs: number;
  load: number;
  seed: number;
  /** Pinned Belady over all requests (a policy's own figure is over what it served). */
  pinned: number;
  /**
   * The fewest loads (pinned Belady) times the load time, over the replicas' time from the first
   * arrival to the last: how much of the arrival window those loads stop the engine loops. Near
   * or past 1 the point is overloaded whatever its token load.
   */
  blocked: number;
  /**
   * Where goal 3 applies (issue 25: at or below 50% load, loads up to 0.3 s): the default
   * variant's SLO attainment on the same requests and slots with loads that take no time, which
   * tells the time the loads stop the engines from the placement itself (issue 26).
   */
  freeLoads?: number;
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
  const s = { ...scenario, seed: t.seed, loadMs: t.loadMs };
  const arrivals = atRate(t.arrivals, t.capacity * t.load);
  const names = new Set(variants.map((v) => v.name));
  const first = variants[0]!;
  // The bounds (issue 34) run beside the policies: the fleet pooled in one engine, and the fleet
  // with loads that take no time (the default variant and least request there).
  const frees = freeLoadPolicies(first.name, first.config);
  const { pinned, results } = await runPoint(
    [
      ...variants.map((v) => P.loraRouter(v.name, v.config)),
      ...BASELINE_POLICIES,
      P.oracle,
      pooledBound,
      ...frees,
    ],
    s,
    arrivals,
    { lruFor: (policy) => names.has(policy) },
  );
  const blocked = (pinned * t.loadMs) / (s.replicas * (arrivals.at(-1)!.at - arrivals[0]!.at));
  // Where goal 3 compares with the oracle (which never loads): the default variant with loads
  // that take no time, to tell the loads' time from the placement (issue 26).
  const freeLoads =
    goal3Applies(t.loadMs, t.load) && t.loadMs > 0
      ? byName(results, frees[0]!.name).sloAttainment
      : undefined;
  return {
    workload: t.workload,
    loadMs: t.loadMs,
    load: t.load,
    seed: t.seed,
    pinned,
    blocked,
    ...(freeLoads === undefined ? {} : { freeLoads }),
    results,
  };
}

/** The sweep's points in report order: workload, load time, load, seed. */
function sloTasks(scenario: Scenario, o: SloSweepOptions): SloTask[] {
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
function describePoint(p: SloPoint, variants: string[]): string {
  const best = bestBaseline(p.results, 'slo');
  const oracle = byName(p.results, ORACLE);
  const mine = variants.map((name) => {
    const r = byName(p.results, name);
    return `${name}: SLO ${fmtPct(r.sloAttainment)} refused ${r.errors} p99 ${ms(r.ttftP99)}`;
  });
  return `  ${p.workload} load ${ms(p.loadMs)} at ${p.load * 100}% seed ${p.seed}: ${mine.join(' · ')} | best baseline SLO ${fmtPct(best.sloAttainment)} (${best.policy}), oracle ${fmtPct(oracle.sloAttainment)}`;
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

/** What a worker posts back: the point, or why it failed. */
export type SloReply = { point: SloPoint } | { error: string };

/**
 * A worker thread running points of the sweep (bench/des/slo-worker.ts), one at a time. A point
 * that throws, or a worker that dies, fails the sweep naming the point, rather than hanging it.
 */
function sloWorker(scenario: Scenario, variants: SloSweepOptions['variants']) {
  const worker = new Worker(join(__dirname, 'slo-worker.js'), { workerData: { scenario, variants } });
  let pending: { task: SloTask; resolve: (p: SloPoint) => void; reject: (e: Error) => void } | undefined;
  const fail = (why: string) => {
    const p = pending;
    pending = undefined;
    p?.reject(new Error(`SLO sweep, ${describeTask(p.task)}: ${why}`));
  };
  worker.on('message', (reply: SloReply) => {
    const p = pending;
    pending = undefined;
    if ('point' in reply) p?.resolve(reply.point);
    else p?.reject(new Error(`SLO sweep, ${p && describeTask(p.task)}: ${reply.error}`));
  });
  worker.on('error', (err) => fail(err.message));
  worker.on('exit', (code) => fail(`worker exited (code ${code})`));
  return {
    run: (task: SloTask) =>
      new Promise<SloPoint>((resolve, reject) => {
        pending = { task, resolve, reject };
        worker.postMessage(task);
      }),
    stop: () => worker.terminate(),
  };
}

const describeTask = (t: SloTask) =>
  `${t.workload} at ${ms(t.loadMs)} loads, ${t.load * 100}% load, seed ${t.seed}`;

/** From this share of the arrival window blocked by the fewest loads, loads alone explain a miss. */
const BLOCKED_MUCH = 0.25;

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
  const router = (p: SloPoint) => byName(p.results, variant);
  const oracle = (p: SloPoint) => byName(p.results, ORACLE);
  const bestP99 = (p: SloPoint) => bestBaseline(p.results).ttftP99;
  const load = points[0]!.load;
  const below = load <= 0.5;
  const goal = (value: number, bound: number, atMost: boolean, why?: () => string): Goal => {
    const met = atMost ? value <= bound : value >= bound;
    return { value, bound, met, why: met ? undefined : why?.() };
  };
  /**
   * How much of the arrival window the fewest loads possible stop the engines: from a quarter on,
   * loads alone crowd out the work the point's token load names; below, they do not explain a miss.
   */
  const blockedWhy = () => {
    const b = at((p) => p.blocked);
    return b >= BLOCKED_MUCH
      ? `the fewest loads possible stop the engines ${fmtPct(b)} of the arrival window`
      : `reachable: the fewest loads possible stop the engines only ${fmtPct(b)} of the arrival window`;
  };
  const oracleP99 = () => at((p) => oracle(p).ttftP99 / bestP99(p));
  // A replica's context-length 400 is no router's refusal (issue 25).
  const refused = Math.max(...points.map((p) => router(p).errors - (router(p).overContext ?? 0)));
  return {
    /** 1: no refusal at or below 50% load. */
    noRefusal: below ? goal(refused, 0, true, blockedWhy) : undefined,
    /** 2: SLO attainment no worse than the best baseline's. */
    sloVsBaseline: goal(
      at((p) => router(p).sloAttainment),
      at((p) => bestBaseline(p.results, 'slo').sloAttainment),
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
              : `${oracleP99() > 0.5 ? 'even ' : ''}the oracle, which never loads, is at ${fmtRatio(oracleP99())}`,
        )
      : undefined,
    /** 3b: below capacity, SLO attainment at least 0.9x the oracle's. */
    sloVsOracle: below
      ? goal(
          at((p) => router(p).sloAttainment / oracle(p).sloAttainment),
          0.9,
          false,
          () => {
            // The same router with free loads says what the window share cannot: bursts are short,
            // so a small share of the arrival window can be much of the time the work arrives in.
            const free = freeLoadsWhy(points, variant);
            return free
              ? `the fewest loads possible stop the engines ${fmtPct(at((p) => p.blocked))} of the arrival window; ${free}`
              : blockedWhy();
          },
        )
      : undefined,
    /** 4: loads at most 1.2x pinned Belady over the same served requests. */
    loadsVsPinned: goal(
      at((p) => router(p).loads / router(p).pinnedBelady!),
      1.2,
      true,
      () => {
        const lru = at((p) => router(p).pinnedLru! / router(p).pinnedBelady!);
        return `${lru <= 1.2 ? 'reachable online' : 'beyond LRU'}: LRU on one cache of every slot, same pins, needs ${fmtRatio(lru)}`;
      },
    ),
  };
}

type Goals = ReturnType<typeof sloGoals>;
const GOAL_COLUMNS: [string, (g: Goals) => Goal | undefined, (x: Goal) => string][] = [
  ['no refusal ≤ 50%', (g) => g.noRefusal, (x) => `${fmtCount(x.value)} refused`],
  ['SLO ≥ best baseline', (g) => g.sloVsBaseline, (x) => `${fmtPct(x.value)} vs ${fmtPct(x.bound)}`],
  ['p99 ≤ 0.5× best baseline', (g) => g.p99VsBaseline, (x) => fmtRatio(x.value)],
  ['SLO ≥ 0.9× oracle', (g) => g.sloVsOracle, (x) => fmtRatio(x.value)],
  ['loads ≤ 1.2× pinned Belady', (g) => g.loadsVsPinned, (x) => fmtRatio(x.value)],
];

/** Groups points by workload, load time and load (seeds together), in sweep order. */
function sloGroups(points: SloPoint[]): SloPoint[][] {
  const groups = new Map<string, SloPoint[]>();
  for (const p of points) {
    const k = `${p.workload}|${p.loadMs}|${p.load}`;
    groups.set(k, [...(groups.get(k) ?? []), p]);
  }
  return [...groups.values()];
}

/**
 * TTFT p99 over the best baseline's at or below 50% load, per variant: the geometric mean over the
 * points where every variant's p99 is answered (refusals past 1% make one infinite, and count in
 * goal 1), so every variant is ranked on the same points. NaN if there is none.
 */
export function p99Below(points: SloPoint[], variants: string[]): Map<string, number> {
  // Per point below capacity, each variant's ratio (undefined above 50% load).
  const ratios = sloGroups(points).map((g) => variants.map((v) => sloGoals(g, v).p99VsBaseline?.value));
  const common = ratios.filter((rs) => rs.every((x) => x !== undefined && Number.isFinite(x)));
  return new Map(
    variants.map((v, i) => [v, Math.exp(common.reduce((n, rs) => n + Math.log(rs[i]!), 0) / common.length)]),
  );
}

/** Issue 15's goals met over every point, for one variant. */
export function sloTally(points: SloPoint[], variant: string): { met: number; of: number } {
  return allMet(points, variant);
}

/** Goals met over every point, for one variant (the first `columns` goals only, if given). */
function allMet(
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
      const rs = g.map((p) => byName(p.results, name));
      const p = g[0]!;
      return [
        i === 0 ? `${p.workload}, ${ms(p.loadMs)}, ${p.load * 100}%` : '',
        name,
        ...SLOS_MS.map((t) => fmtPct(mean(rs.map((r) => r.slo[String(t)]!)))),
        fmtNum(mean(rs.map((r) => r.errors))),
        ms(mean(rs.map((r) => r.ttftP99))),
        name === ORACLE ? '' : fmtNum(mean(rs.map((r) => r.loads / r.completed))),
        name === ORACLE ? '' : fmtRatio(mean(rs.map((r) => r.loads / r.pinnedBelady!))),
      ];
    }),
  );
  const p99 = p99Below(points, variants);
  const tally = variants.map((v) => {
    const t = allMet(points, v);
    const first = allMet(points, v, 2);
    return `${v}: ${t.met} of ${t.of} (no refusal and SLO ≥ best baseline: ${first.met} of ${first.of}; p99 ÷ best baseline at or below 50% load: ${fmtRatio(p99.get(v)!)})`;
  });
  const trade = variantTrade(points, variants);
  return [
    '## Routing under bursts: SLO attainment',
    '',
    `Each workload (the conversation trace; the bursty prefill-heavy generator: inter-arrival CV about 11, bursts at 25× the mean rate, prompts 1-8k tokens, answers 5-50; the long-context generator: prompts median ~7k and mean ~11k tokens with a p99 near the replicas' 65,536-token KV capacity, most opening with one of 8 shared system prompts, answers ~350 tokens, arrivals in batches of ~4) at each adapter load time and fleet load. 100% load is the fleet's capacity for that workload's token mix (\`fleetCapacity\`, bench/des/run.ts): over the requests a replica can take, with mean prompt P and answer O tokens, a replica runs b = min(max_num_seqs, KV capacity ÷ (P + O)) sequences at once (the engine reserves prompt and answer at admission, so long prompts bound the batch by KV capacity first), and a request costs P × the prefill time per token plus O × a b-sequence decode step ÷ b; the fleet serves replicas ÷ that many requests per second. A request longer than a replica's context gets vLLM's 400 under every policy: a miss, but not counted as the router's refusal; ${n.toLocaleString('en-US')} requests per point, seed${seeds.length > 1 ? 's' : ''} ${seeds.join(', ')} (${full ? 'full run' : 'quick run; `--full` runs 3,000 requests per point'}). SLO attainment is the share of requests whose TTFT is within the SLO (${SLOS_MS.map((t) => ms(t)).join(', ')}); a refused request is a miss. Goals for lora-router as configured by default (${router}), mean over seeds; "no refusal" holds in every seed. A missed goal says what stands in the way, from figures of the same run: the oracle's p99 ("even the oracle" when it misses the bound too); how much of the arrival window the fewest loads possible (pinned Belady, each stopping its replica's engine loop for the load time) take, which from a quarter on explains a miss (past 100% the point is overloaded whatever its token load) and below it does not ("reachable"); what LRU on one cache of every slot, with the same pins, needs against pinned Belady, which sees the future ("reachable online" when LRU meets 1.2×, "beyond LRU" when not); and, where SLO ≥ 0.9× the oracle is missed, the default router's SLO attainment on the same requests and slots with loads that take no time, which replaces "reachable": near the oracle, the time the loads stop the engines is the gap (a burst's work arrives in a small part of the arrival window, so the window's share understates it); far from it, the placement is.`,
    '',
    table(['workload', 'load time', 'load', ...GOAL_COLUMNS.map(([name]) => name)], goalRows),
    '',
    `Goals met per variant (of the goals that apply at each point): ${tally.join('; ')}. The default is chosen on the first two, the issue's "never worse than the baselines, no refusal below capacity"; then on how far below the baselines its p99 is below capacity, the third goal's figure (geometric mean over the points at or below 50% load where every variant's p99 is answered); then on the count.`,
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
 * lora-router configurations A/B'd on the routing goals (the first is the default): where and how
 * long a cold request waits for room (src/router/room-wait.ts), and when a holder counts as
 * saturated so its adapter spreads: by counts, or by predicted time to first token (src/work/).
 * The original default changes both.
 */
export const ROUTING_VARIANTS: { name: string; config: Record<string, unknown> }[] = [
  { name: 'lora-router', config: {} },
  // What the hold in the gateway past the TTFT objective buys (src/router/room-wait.ts `holds`).
  { name: 'predicted, no TTFT objective (ttft_slo_ms: 0)', config: { ttft_slo_ms: 0 } },
  { name: 'count thresholds (saturation_mode: count)', config: { saturation_mode: 'count' } },
  {
    name: 'count, escalate after 2 s on the chosen replica',
    config: { saturation_mode: 'count', replica_wait_ms: 2000 },
  },
  {
    name: 'count, holders saturated at 4 waiting',
    config: { saturation_mode: 'count', target_waiting_per_replica: 4 },
  },
  {
    name: 'count, wait on the chosen replica, 10 s, 4 waiting (the original default)',
    config: {
      saturation_mode: 'count',
      room_wait: 'replica',
      queue_timeout_ms: 10000,
      target_waiting_per_replica: 4,
    },
  },
  {
    name: 'predicted, wait for room anywhere, 10 s',
    config: { room_wait: 'anywhere', queue_timeout_ms: 10000 },
  },
];

/**
 * How each variant trades refusals, SLO attainment, latency and loads: means over the points at
 * or below 50% load and above it, both workloads and every load time.
 */
function variantTrade(points: SloPoint[], variants: string[]): string[] {
  const rows = variants.flatMap((v) =>
    (['≤ 50%', '> 50%'] as const).map((band, i) => {
      const rs = points.filter((p) => p.load <= 0.5 === (band === '≤ 50%')).map((p) => byName(p.results, v));
      return [
        i === 0 ? v : '',
        band,
        fmtNum(mean(rs.map((r) => r.errors / r.requests)) * 100) + '%',
        fmtPct(mean(rs.map((r) => r.sloAttainment))),
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
