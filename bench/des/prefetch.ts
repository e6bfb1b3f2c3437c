/**
 * Placement ahead of demand (issue 34, item 4): lora-router with `prefetch` on against the same
 * configuration without it, Dynamo's min-cost-flow controller (which loads ahead of requests too)
 * and the pooled bound, on the same requests. The prefetcher ticks on the virtual clock after the
 * poller's rounds, as it does in Kong. Churn as Dynamo measures it beside SLO attainment.
 */
import { defaultEngineOptions } from '../../sim/engine/engine';
import { atRate, type Arrival } from '../../sim/workload/workload';
import { byName, mean } from '../goals';
import { fmtNum, fmtPct, fmtRatio, ms, table } from '../report';
import { POOLED, pooledBound } from './bounds';
import { dynamoMcf } from './peers/dynamo-mcf';
import { opsPerMinute, opsPerServed, quietShare } from './peers-report';
import { loraRouter } from './policies';
import { adapterSequence, fleetCapacity, runPolicy, type PolicyResult, type Scenario } from './run';

export const PREFETCH_LOAD_MS = 300;
export const PREFETCH_LOADS = [0.3, 0.5, 0.7];
/** Tuned on bursty (the tuning workload), proven on conversation and long. */
export const PREFETCH_WORKLOADS = ['bursty', 'conversation', 'long'];
/** The settings measured (the Schema's defaults but `prefetch`). */
export const PREFETCH_CONFIG: Record<string, unknown> = { prefetch: true };

export const WITHOUT = 'lora-router';
export const WITH = 'lora-router + prefetch';

/** One workload, load and seed: each policy on the same requests. */
export interface PrefetchPoint {
  workload: string;
  loadMs: number;
  load: number;
  seed: number;
  results: PolicyResult[];
}

export interface PrefetchResults {
  requests: number;
  config: Record<string, unknown>;
  points: PrefetchPoint[];
}

/** The policies of a point: without and with prefetch, Dynamo's controller, the pooled bound. */
export function prefetchPolicies(config: Record<string, unknown> = PREFETCH_CONFIG) {
  return [loraRouter(WITHOUT), loraRouter(WITH, config), dynamoMcf, pooledBound];
}

export async function prefetchSweep(
  scenario: Scenario,
  o: {
    workloads: { name: string; arrivals: Arrival[] }[];
    loadMs: number;
    loads: number[];
    seeds: number[];
    config?: Record<string, unknown>;
  },
  log: (s: string) => void,
): Promise<PrefetchPoint[]> {
  const points: PrefetchPoint[] = [];
  for (const w of o.workloads) {
    const capacity = fleetCapacity(scenario, w.arrivals, defaultEngineOptions);
    for (const load of o.loads)
      for (const seed of o.seeds) {
        const s = { ...scenario, seed, loadMs: o.loadMs };
        const arrivals = atRate(w.arrivals, capacity * load);
        const adapters = adapterSequence(arrivals.length, s);
        const results: PolicyResult[] = [];
        // Results only: the per-request intervals are for other bounds and would fill results.json.
        for (const p of prefetchPolicies(o.config))
          results.push({ ...(await runPolicy(p, s, arrivals, adapters)), intervals: undefined });
        const p: PrefetchPoint = { workload: w.name, loadMs: o.loadMs, load, seed, results };
        points.push(p);
        const at = (n: string) => byName(results, n);
        log(
          `  ${w.name} ${ms(o.loadMs)} at ${load * 100}% seed ${seed}: SLO ${fmtPct(at(WITHOUT).sloAttainment)} -> ${fmtPct(at(WITH).sloAttainment)} with prefetch (pooled ${fmtPct(at(POOLED).sloAttainment)}, Dynamo ${fmtPct(at(dynamoMcf.name).sloAttainment)}); ops per served ${fmtNum(opsPerServed(at(WITHOUT)))} -> ${fmtNum(opsPerServed(at(WITH)))} (Dynamo ${fmtNum(opsPerServed(at(dynamoMcf.name)))})`,
        );
      }
  }
  return points;
}

/** Per workload and load, means over seeds: what prefetch changes, against the bound and Dynamo. */
export function prefetchRows(points: PrefetchPoint[]) {
  const keys = [...new Set(points.map((p) => `${p.workload}|${p.load}`))];
  return keys.map((k) => {
    const g = points.filter((p) => `${p.workload}|${p.load}` === k);
    const at = (name: string, f: (r: PolicyResult) => number) =>
      mean(g.map((p) => f(byName(p.results, name))));
    const slo = (r: PolicyResult) => r.sloAttainment;
    const pooled = at(POOLED, slo);
    return {
      workload: g[0]!.workload,
      load: g[0]!.load,
      without: at(WITHOUT, slo),
      with: at(WITH, slo),
      pooled,
      dynamo: at(dynamoMcf.name, slo),
      ops: {
        without: at(WITHOUT, opsPerServed),
        with: at(WITH, opsPerServed),
        dynamo: at(dynamoMcf.name, opsPerServed),
      },
      perMinute: {
        without: at(WITHOUT, opsPerMinute),
        with: at(WITH, opsPerMinute),
        dynamo: at(dynamoMcf.name, opsPerMinute),
      },
      quiet: {
        without: at(WITHOUT, quietShare),
        with: at(WITH, quietShare),
        dynamo: at(dynamoMcf.name, quietShare),
      },
    };
  });
}

/** Whether prefetch is a clear win: SLO no lower at any point (means over seeds). */
export function prefetchVerdict(points: PrefetchPoint[]) {
  const rows = prefetchRows(points);
  const better = rows.filter((r) => r.with > r.without + 1e-12).length;
  const worse = rows.filter((r) => r.with < r.without - 1e-12).length;
  return { better, worse, of: rows.length, winEverywhere: worse === 0 && better > 0 };
}

/** bench/results/README.md's section. */
export function prefetchSection(r: PrefetchResults): string[] {
  const rows = prefetchRows(r.points);
  const v = prefetchVerdict(r.points);
  const seeds = [...new Set(r.points.map((p) => p.seed))];
  return [
    '## Placement ahead of demand (prefetch)',
    '',
    `lora-router with \`prefetch\` on (${JSON.stringify(r.config)}, the other prefetch settings at their defaults) against the same router without it, Dynamo's min-cost-flow controller (loads ahead of requests too) and the pooled bound, ${ms(r.points[0]?.loadMs ?? PREFETCH_LOAD_MS)} loads, ${r.requests} requests a point, seeds ${seeds.join(', ')} (means). Tuned on bursty, proven on conversation and long. Prefetch raises SLO attainment at ${v.better} of ${v.of} points and lowers it at ${v.worse}. Churn as Dynamo measures it: load and unload operations per served request and per minute, and the share of 3-s intervals with none.`,
    '',
    table(
      [
        'workload',
        'load',
        'SLO without',
        'SLO with prefetch',
        'Dynamo MCF SLO',
        'with / pooled bound',
        'ops per served: without, with, Dynamo',
        'ops per minute: without, with, Dynamo',
        'quiet intervals: without, with, Dynamo',
      ],
      rows.map((x) => [
        x.workload,
        `${x.load * 100}%`,
        fmtPct(x.without),
        fmtPct(x.with),
        fmtPct(x.dynamo),
        `${fmtRatio(x.with / x.pooled)} (without ${fmtRatio(x.without / x.pooled)})`,
        `${fmtNum(x.ops.without)}, ${fmtNum(x.ops.with)}, ${fmtNum(x.ops.dynamo)}`,
        `${fmtNum(x.perMinute.without)}, ${fmtNum(x.perMinute.with)}, ${fmtNum(x.perMinute.dynamo)}`,
        `${fmtPct(x.quiet.without)}, ${fmtPct(x.quiet.with)}, ${fmtPct(x.quiet.dynamo)}`,
      ]),
    ),
    '',
  ];
}
