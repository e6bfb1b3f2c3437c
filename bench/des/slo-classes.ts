/**
 * The two-class workload (issue 34): interactive requests (2 s objective) and batch ones (30 s,
 * sheddable) on the same fleet; lora-router with `slo_classes` beside lora-router treating every
 * request alike (`ttft_slo_ms`), on the same requests, per class.
 */
import { join } from 'node:path';
import { defaultEngineOptions, type EngineOptions } from '../../sim/engine/engine';
import { percentile as pct } from '../../sim/workload/percentile';
import { atRate, type Arrival } from '../../sim/workload/workload';
import { classGoal, CLASS_POLICY, CLASS_VARIANT_ONE, type ClassGoal } from '../goals';
import { fmtPct, ms, table } from '../report';
import { loadWorkload, TWO_CLASSES, twoClassSequence } from '../workloads';
import * as P from './policies';
import { classMisses, type ClassMisses } from './class-misses';
import { adapterSequence, fleetCapacity, runPolicy, type PolicyResult, type Scenario } from './run';

export const CLASS_LOADS = [0.3, 0.5, 0.7, 0.9, 1.2];
export const CLASS_LOAD_MS = [100, 300, 1000];

/** The configurations compared: the classes, and one objective for every request (as before). */
export const CLASS_VARIANTS = [
  {
    name: CLASS_POLICY,
    config: { slo_classes: TWO_CLASSES.classes, default_slo_class: 'interactive' },
  },
  { name: CLASS_VARIANT_ONE, config: {} },
];

/** One class's requests under one policy. */
export interface ClassFigures {
  requests: number;
  /** Refused (by the router, or over a replica's context). */
  refused: number;
  /** Share of the class's requests answered within its objective; a refusal is a miss. */
  within: number;
  ttftP50: number;
  /** Over the served requests. */
  ttftP99Served: number;
}

export interface ClassPoint {
  workload: string;
  loadMs: number;
  load: number;
  seed: number;
  policies: { policy: string; byClass: Record<string, ClassFigures> }[];
  /** Share of the requests drawn batch; absent: TWO_CLASSES.batchShare. */
  batchShare?: number;
  /** With the classes (the first policy): each class's late requests by cause; absent in results from before. */
  misses?: Record<string, ClassMisses>;
}

/** One point's requests: the workload at `load` of its capacity, each with its adapter and class. */
export function classRequests(
  s: Scenario,
  w: { arrivals: Arrival[]; capacity: number },
  load: number,
  batchShare = TWO_CLASSES.batchShare,
) {
  const arrivals = atRate(w.arrivals, w.capacity * load);
  return {
    arrivals,
    adapters: adapterSequence(arrivals.length, s),
    classes: twoClassSequence(arrivals.length, s.seed, batchShare),
  };
}

/**
 * A point of the classes part as the diagnosis scripts (class-queue.ts, shed-diagnosis.ts) run it:
 * the conversation trace, the bench's fleet (8 replicas of 8 slots, 200 adapters, Zipf 1).
 */
export function conversationClassPoint(
  loadMs: number,
  load: number,
  seed: number,
  trace: string | undefined,
  engine: Partial<EngineOptions> = {},
) {
  const { arrivals: all } = loadWorkload('conversation', join(__dirname, '..', '..', '..'), trace, 1000);
  const s: Scenario = { replicas: 8, slots: 8, loadMs, adapters: 200, alpha: 1, seed, engine };
  return {
    s,
    ...classRequests(s, { arrivals: all, capacity: fleetCapacity(s, all, defaultEngineOptions) }, load),
  };
}

/** `conversationClassPoint` from a diagnosis script's arguments: LOAD_MS LOAD SEED [TRACE]. */
export function conversationClassPointFromArgs(args: string[]) {
  const [loadMs, load, seed, trace] = args;
  return { load: Number(load), ...conversationClassPoint(Number(loadMs), Number(load), Number(seed), trace) };
}

/** Every variant at one point, on the same requests and classes. */
export async function classPoint(
  scenario: Scenario,
  w: { name: string; arrivals: Arrival[]; capacity: number },
  loadMs: number,
  load: number,
  seed: number,
  batchShare = TWO_CLASSES.batchShare,
): Promise<ClassPoint> {
  const s = { ...scenario, seed, loadMs };
  const { arrivals, adapters, classes } = classRequests(s, w, load, batchShare);
  const policies: ClassPoint['policies'] = [];
  let misses: ClassPoint['misses'];
  for (const v of CLASS_VARIANTS) {
    const policy = P.loraRouter(v.name, v.config);
    let r: PolicyResult;
    // The classes' run also says where the late requests' time went.
    if (v.name === CLASS_POLICY)
      ({ result: r, misses } = await classMisses(policy, s, arrivals, adapters, classes));
    else r = await runPolicy(policy, s, arrivals, adapters, { classes });
    const byClass: Record<string, ClassFigures> = {};
    for (const c of TWO_CLASSES.classes) {
      const ttft = r.ttftOf!.filter((_, i) => classes[i] === c.name);
      const served = ttft.filter((t) => t !== Infinity);
      byClass[c.name] = {
        requests: ttft.length,
        refused: ttft.length - served.length,
        within: ttft.filter((t) => t <= c.ttft_ms).length / ttft.length,
        ttftP50: pct(ttft, 0.5),
        ttftP99Served: pct(served, 0.99),
      };
    }
    policies.push({ policy: v.name, byClass });
  }
  return {
    workload: w.name,
    loadMs,
    load,
    seed,
    policies,
    ...(batchShare !== TWO_CLASSES.batchShare ? { batchShare } : {}),
    ...(misses ? { misses } : {}),
  };
}

/** The sweep, point by point in report order (each point is single-threaded virtual time). */
export async function classSweep(
  scenario: Scenario,
  o: {
    workload: { name: string; arrivals: Arrival[] };
    loadTimes: number[];
    loads: number[];
    seeds: number[];
    /** Share of the requests drawn batch (default TWO_CLASSES.batchShare). */
    batchShare?: number;
  },
  log: (s: string) => void,
): Promise<ClassPoint[]> {
  const capacity = fleetCapacity(scenario, o.workload.arrivals, defaultEngineOptions);
  const w = { ...o.workload, capacity };
  const points: ClassPoint[] = [];
  for (const loadMs of o.loadTimes)
    for (const load of o.loads)
      for (const seed of o.seeds) {
        const p = await classPoint(scenario, w, loadMs, load, seed, o.batchShare);
        points.push(p);
        log(describe(p));
      }
  return points;
}

function describe(p: ClassPoint): string {
  const parts = p.policies.map(
    (x) =>
      `${x.policy}: interactive ${fmtPct(x.byClass.interactive!.within)} in 2 s (${x.byClass.interactive!.refused} refused), batch ${fmtPct(x.byClass.batch!.within)} in 30 s (${x.byClass.batch!.refused} refused)`,
  );
  const why = Object.values(classGoal([p]))
    .map((g) => g.why)
    .filter((x) => x !== undefined);
  return `  ${p.workload} load ${ms(p.loadMs)} at ${Math.round(p.load * 100)}% seed ${p.seed}: ${parts.join(' · ')}${why.length ? ` — missed: ${why.join('; ')}` : ''}`;
}

/** Points of one load time and load (their seeds), in sweep order. */
export function classGroups(points: ClassPoint[]): ClassPoint[][] {
  const out = new Map<string, ClassPoint[]>();
  for (const p of points) out.set(`${p.loadMs}|${p.load}`, [...(out.get(`${p.loadMs}|${p.load}`) ?? []), p]);
  return [...out.values()];
}

/** Goals met of those that apply, per class, over every point. */
export function classTally(points: ClassPoint[]) {
  const gs = classGroups(points).map(classGoal);
  const count = (xs: (ClassGoal | undefined)[]) => {
    const apply = xs.filter((x): x is ClassGoal => x !== undefined);
    return { met: apply.filter((x) => x.met).length, of: apply.length };
  };
  return { interactive: count(gs.map((g) => g.interactive)), batch: count(gs.map((g) => g.batch)) };
}

/** bench/results/README.md's section: the goals per point and class, then each seed under both configurations. */
export function classSection(points: ClassPoint[], requests: number): string[] {
  const cell = (f: ClassFigures) => `${fmtPct(f.within)}${f.refused ? ` (${f.refused} refused)` : ''}`;
  const verdict = (x: ClassGoal | undefined) =>
    x ? (x.met ? `met: ${fmtPct(x.value)}` : `**missed**: ${x.why!}`) : 'n/a';
  const goalRows = classGroups(points).map((g) => {
    const x = classGoal(g);
    return [ms(g[0]!.loadMs), `${Math.round(g[0]!.load * 100)}%`, verdict(x.interactive), verdict(x.batch)];
  });
  const rows = points.map((p) => {
    const [mine, one] = [p.policies[0]!, p.policies[1]!];
    return [
      ms(p.loadMs),
      `${Math.round(p.load * 100)}%`,
      p.seed,
      cell(mine.byClass.interactive!),
      cell(one.byClass.interactive!),
      cell(mine.byClass.batch!),
      cell(one.byClass.batch!),
      ms(mine.byClass.interactive!.ttftP99Served),
    ];
  });
  const t = classTally(points);
  const seeds = [...new Set(points.map((p) => p.seed))];
  return [
    '## SLO classes: interactive and batch on one fleet',
    '',
    `${points[0]?.workload ?? ''} workload, ${requests} requests a point, seeds ${seeds.join(', ')}, ${Math.round((points[0]?.batchShare ?? TWO_CLASSES.batchShare) * 100)}% of them batch (drawn per request with the seed). Interactive: 2 s objective, priority 0; batch: 30 s, priority -1 (sheddable), joining a replica only while fewer than ${TWO_CLASSES.classes[1]!.max_in_flight} of the router's requests are in flight there (\`max_in_flight\`). "Classes" is lora-router with \`slo_classes\`, the request naming its class; "one class" is lora-router treating every request alike (\`ttft_slo_ms\` 5 s). A cell is the share of the class's requests answered within its objective (a refusal is a miss). Goals, for the classes, means over seeds: interactive ≥ 99% within 2 s up to 70% load with loads ≤ 1 s (met at ${t.interactive.met} of ${t.interactive.of} points); batch ≥ 99% within 30 s below capacity, never starved (met at ${t.batch.met} of ${t.batch.of}). A missed goal gives the class's refusals and served p99, the same requests treated alike, and where the late requests' time went (bench/des/class-misses.ts, over the seeds): how many were for an adapter no replica held when they arrived, and what each is put down to: the largest part of its wait that a router could shorten (another adapter's load on its engine, before its own load or while it was queued there; the replica's queue behind other requests; held in the gateway or waiting for room), else its own load and prefill.`,
    '',
    table(['load time', 'load', 'interactive ≥ 99% in 2 s', 'batch ≥ 99% in 30 s'], goalRows),
    '',
    table(
      [
        'load time',
        'load',
        'seed',
        'interactive, classes',
        'interactive, one class',
        'batch, classes',
        'batch, one class',
        'interactive served p99, classes',
      ],
      rows,
    ),
    '',
  ];
}
