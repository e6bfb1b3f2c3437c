/**
 * Issue 15's routing goals: every policy and lora-router variant on each workload, at each
 * adapter load time and fleet load, with SLO attainment (TTFT within the SLO; a refusal is a
 * miss) beside refusals, latency and loads over the served requests.
 */
import type { Arrival } from '../../sim/workload/workload';
import { atRate } from '../../sim/workload/workload';
import { defaultEngineOptions } from '../../sim/engine/engine';
import { BASELINES, mean, ORACLE } from '../goals';
import { fmtCount, fmtNum, fmtRatio, ms, table } from '../report';
import { setServedBounds, pinnedBeladyMisses } from './belady';
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

export async function sloSweep(
  scenario: Scenario,
  o: SloSweepOptions,
  log: (s: string) => void,
): Promise<SloPoint[]> {
  const others = [P.roundRobin, P.leastRequest, P.consistentHash, P.llmdSoftAffinity, P.oracle];
  const policies = [...o.variants.map((v) => P.loraRouter(v.name, v.config)), ...others];
  const out: SloPoint[] = [];
  for (const w of o.workloads) {
    const capacity = fleetCapacity(scenario, w.arrivals, defaultEngineOptions);
    for (const loadMs of o.loadTimes) {
      for (const load of o.loads) {
        for (const seed of o.seeds) {
          const s = { ...scenario, seed, loadMs };
          const arrivals = atRate(w.arrivals, capacity * load);
          const adapters = adapterSequence(arrivals.length, s);
          const results: PolicyResult[] = [];
          for (const p of policies) results.push(await runPolicy(p, s, arrivals, adapters));
          const slots = s.replicas * s.slots;
          const oracle = results.find((r) => r.policy === ORACLE)!;
          const pinned = pinnedBeladyMisses(adapters, oracle.intervals!.start, oracle.intervals!.end, slots);
          setServedBounds(results, oracle, adapters, slots);
          out.push({ workload: w.name, loadMs, load, seed, pinned, results });
          const best = bestSlo(results);
          log(
            `  ${w.name} load ${ms(loadMs)} at ${load * 100}% seed ${seed}: ${o.variants
              .map((v) => {
                const r = results.find((x) => x.policy === v.name)!;
                return `${v.name}: SLO ${pct(r.sloAttainment)} refused ${r.errors} p99 ${ms(r.ttftP99)}`;
              })
              .join(
                ' · ',
              )} | best baseline SLO ${pct(best.sloAttainment)} (${best.policy}), oracle ${pct(oracle.sloAttainment)}`,
          );
        }
      }
    }
  }
  return out;
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** The baseline with the highest SLO attainment. */
function bestSlo(results: PolicyResult[]): PolicyResult {
  return results
    .filter((r) => BASELINES.includes(r.policy))
    .reduce((a, b) => (b.sloAttainment > a.sloAttainment ? b : a));
}

/** A goal at one point: the figure, its bound, and whether it holds. */
export interface Goal {
  value: number;
  bound: number;
  met: boolean;
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
  const goal = (value: number, bound: number, atMost: boolean): Goal => ({
    value,
    bound,
    met: atMost ? value <= bound : value >= bound,
  });
  const refused = Math.max(...points.map((p) => router(p).errors));
  return {
    /** 1: no refusal at or below 50% load. */
    noRefusal: below ? goal(refused, 0, true) : undefined,
    /** 2: SLO attainment no worse than the best baseline's. */
    sloVsBaseline: goal(
      at((p) => router(p).sloAttainment),
      at((p) => bestSlo(p.results).sloAttainment),
      false,
    ),
    /** 3a: below capacity, TTFT p99 (refusals never answered) at most 0.5x the best baseline's. */
    p99VsBaseline: below
      ? goal(
          at((p) => router(p).ttftP99 / bestP99(p)),
          0.5,
          true,
        )
      : undefined,
    /** 3b: below capacity, SLO attainment at least 0.9x the oracle's. */
    sloVsOracle: below
      ? goal(
          at((p) => router(p).sloAttainment / oracle(p).sloAttainment),
          0.9,
          false,
        )
      : undefined,
    /** 4: loads at most 1.2x pinned Belady over the same served requests. */
    loadsVsPinned: goal(
      at((p) => router(p).loads / router(p).pinnedBelady!),
      1.2,
      true,
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
    x ? `${x.met ? 'met' : '**missed**'}: ${f(x)}` : '';
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
    return `${v}: ${t.met} of ${t.of} (no refusal and SLO ≥ best baseline: ${first.met} of ${first.of})`;
  });
  const trade = variantTrade(points, variants);
  return [
    '## Routing under bursts: SLO attainment',
    '',
    `Each workload (the conversation trace, and the bursty prefill-heavy generator: inter-arrival CV about 11, bursts at 25× the mean rate, prompts 1-8k tokens, answers 5-50) at each adapter load time and fleet load; ${n.toLocaleString('en-US')} requests per point, seed${seeds.length > 1 ? 's' : ''} ${seeds.join(', ')} (${full ? 'full run' : 'quick run: fewer requests, one seed and two load times; `--full` runs every seed and load time'}). SLO attainment is the share of requests whose TTFT is within the SLO (${SLOS_MS.map((t) => ms(t)).join(', ')}); a refused request is a miss. Goals for lora-router as configured by default (${router}), mean over seeds; "no refusal" holds in every seed.`,
    '',
    table(['workload', 'load time', 'load', ...GOAL_COLUMNS.map(([name]) => name)], goalRows),
    '',
    `Goals met per variant (of the goals that apply at each point): ${tally.join('; ')}. The default is chosen on the first two, the issue's "never worse than the baselines, no refusal below capacity", then on the count.`,
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
  // Saturation, not room: a holder with 2 waiting spreads its adapter (default 4).
  { name: 'escalate, holders saturated at 2 waiting', config: { target_waiting_per_replica: 2 } },
  {
    name: 'wait on the chosen replica, 10 s (old default)',
    config: { room_wait: 'replica', queue_timeout_ms: 10000 },
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
