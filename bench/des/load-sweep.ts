import type { Arrival } from '../../sim/workload/workload';
import { runPoint } from './point';
import { byName, mean, qualityGoals, scenarioLoadMs, type QualitySeed } from '../goals';
import * as P from './policies';
import { adapterSequence, runPolicy, type PolicyResult, type Scenario } from './run';
import { fmtNum, fmtRatio, ms, table } from '../report';

/** Load times the benchmark sweeps (a rank-16 adapter of the base model): NVMe to network storage. */
export const SWEEP_LOAD_MS = [100, 300, 1000, 3000];

/** One seed at one load time; Belady's bounds over each policy's served requests as in the main table. */
export interface LoadSweepPoint extends QualitySeed {
  loadMs: number;
}

export interface UnloadRun {
  seed: number;
  loadMs: number;
  /** Per setup (UNLOAD_SETUPS), lora-router's result. */
  results: PolicyResult[];
}

/** The replicas and router settings compared: vLLM as released, two ways around it, the fix. */
const UNLOAD_SETUPS: {
  name: string;
  unload: 'registry' | 'frees';
  cpuExtra: number;
  routerExtra: number;
}[] = [
  { name: 'released, --max-cpu-loras = slots', unload: 'registry', cpuExtra: 0, routerExtra: 0 },
  { name: 'released, --max-cpu-loras = slots + 1', unload: 'registry', cpuExtra: 1, routerExtra: 0 },
  { name: 'released, router bound = slots - 1', unload: 'registry', cpuExtra: 0, routerExtra: -1 },
  { name: 'fixed (unload frees)', unload: 'frees', cpuExtra: 0, routerExtra: 0 },
];

/** Every policy at each load time, on the same requests: how each goal holds as loads get dearer. */
export async function loadSweep(
  policies: P.Policy[],
  scenario: Scenario,
  arrivals: Arrival[],
  seeds: number[],
  log: (s: string) => void,
): Promise<LoadSweepPoint[]> {
  const out: LoadSweepPoint[] = [];
  for (const loadMs of SWEEP_LOAD_MS) {
    for (const seed of seeds) {
      const { belady, pinned, results } = await runPoint(policies, { ...scenario, seed, loadMs }, arrivals);
      out.push({ loadMs, seed, belady, pinned, results });
      log(
        `  load ${ms(loadMs)} seed ${seed}: ${results.map((r) => `${r.policy} p99 ${ms(r.ttftP99)}`).join(' · ')}`,
      );
    }
  }
  return out;
}

/**
 * lora-router on replicas whose unload keeps the weights cached (vLLM as released) and on
 * replicas whose unload frees them (the open fix): what the deregistered copies cost.
 */
export async function unloadComparison(
  scenario: Scenario,
  arrivals: Arrival[],
  seeds: number[],
  loadTimes: (number | undefined)[],
  log: (s: string) => void,
): Promise<UnloadRun[]> {
  const out: UnloadRun[] = [];
  for (const l of loadTimes) {
    for (const seed of seeds) {
      const s = { ...scenario, seed, loadMs: l };
      const adapters = adapterSequence(arrivals.length, s);
      const results: PolicyResult[] = [];
      for (const setup of UNLOAD_SETUPS) {
        const policy = P.loraRouter(setup.name, { max_loaded_adapters: s.slots + setup.routerExtra });
        const engine = { ...s.engine, maxCpuLoras: s.slots + setup.cpuExtra };
        const r = await runPolicy(policy, { ...s, engine, unload: setup.unload }, arrivals, adapters);
        delete r.intervals;
        results.push(r);
      }
      const at = scenarioLoadMs(s);
      out.push({ seed, loadMs: at, results });
      log(
        `  load ${ms(at)} seed ${seed}: ${results.map((r) => `${r.policy}: ${r.loads - r.engineReloads} + ${r.engineReloads} loads, p99 served ${ms(r.ttftP99Served)}, refused ${r.errors}`).join(' · ')}`,
      );
    }
  }
  return out;
}

/** The main table's goals at one load time, over its seeds (means of the per-seed ratios). */
function goals(p: LoadSweepPoint[]) {
  const g = qualityGoals(p);
  return {
    loads: mean(g.loadsRatio),
    pinned: mean(g.pinnedRatio),
    oracle: mean(g.oracleRatio),
    baseline: mean(g.baselineRatio),
    busy: g.busyUnloads,
  };
}

export function loadSweepSection(sweep: LoadSweepPoint[], n: number, full: boolean): string[] {
  const times = [...new Set(sweep.map((x) => x.loadMs))];
  const seeds = [...new Set(sweep.map((x) => x.seed))];
  const names = sweep[0]!.results.map((r) => r.policy);
  const at = (l: number) => sweep.filter((x) => x.loadMs === l);
  const cell = (l: number, name: string, f: (r: PolicyResult) => number) =>
    mean(at(l).map((x) => f(byName(x.results, name))));
  const mark = (v: number, bound: number) => `${fmtRatio(v)} ${v <= bound ? '(met)' : '(missed)'}`;
  const g = new Map(times.map((l) => [l, goals(at(l))]));
  return [
    '## Adapter load time sweep',
    '',
    `The same scenario at four adapter load times (a rank-16 adapter of an 8B model: ~0.1 s from local NVMe, the default load model; ~1 s from network storage; 3 s for large adapters or slow storage). ${n.toLocaleString('en-US')} requests per point, seed${seeds.length > 1 ? 's' : ''} ${seeds.join(', ')} (${full ? 'full run' : 'quick run: fewer requests and one seed; `--full` runs every seed on the whole workload'}).`,
    '',
    table(
      ['goal', ...times.map((l) => ms(l))],
      [
        ['loads ÷ Belady, served (≤ 1.2)', ...times.map((l) => mark(g.get(l)!.loads, 1.2))],
        ['loads ÷ pinned Belady, served', ...times.map((l) => `${g.get(l)!.pinned.toFixed(2)}×`)],
        ['TTFT p99 ÷ oracle (≤ 1.3)', ...times.map((l) => mark(g.get(l)!.oracle, 1.3))],
        ['TTFT p99 ÷ best baseline (≤ 0.5)', ...times.map((l) => mark(g.get(l)!.baseline, 0.5))],
        ['busy unloads (= 0)', ...times.map((l) => fmtNum(g.get(l)!.busy))],
      ],
    ),
    '',
    'TTFT p99 by policy:',
    '',
    table(
      ['policy', ...times.map((l) => ms(l))],
      names.map((name) => [name, ...times.map((l) => ms(cell(l, name, (r) => r.ttftP99)))]),
    ),
    '',
    'Adapter loads by policy (through the API and inside the engine loop):',
    '',
    table(
      ['policy', ...times.map((l) => ms(l))],
      names
        .filter((name) => name !== P.oracle.name)
        .map((name) => [name, ...times.map((l) => fmtNum(cell(l, name, (r) => r.loads)))]),
    ),
    '',
  ];
}

export function unloadSection(runs: UnloadRun[], n: number, full: boolean): string[] {
  const times = [...new Set(runs.map((r) => r.loadMs))];
  const rows = times.flatMap((l) => {
    const at = runs.filter((r) => r.loadMs === l);
    return UNLOAD_SETUPS.map((setup, i) => {
      const f = (g: (r: PolicyResult) => number) => mean(at.map((x) => g(x.results[i]!)));
      return [
        `${ms(l)}, ${setup.name}`,
        fmtNum(f((r) => r.loads - r.engineReloads)),
        fmtNum(f((r) => r.engineReloads)),
        ms(f((r) => r.ttftP50)),
        ms(f((r) => r.ttftP99Served)),
        fmtNum(f((r) => r.errors)),
      ];
    });
  });
  return [
    '## vLLM unload as released',
    '',
    `Released vLLM (through 0.27.x) only deregisters an unloaded adapter: its weights stay in the CPU LRU until pushed out, and a new load of the name is a second copy. lora-router (slots = router \`max_loaded_adapters\` = \`--max-loras\`) on replicas that behave so, against replicas with the fix, on the same requests: ${n.toLocaleString('en-US')} per run (${full ? 'full run' : 'quick run; `--full` takes the whole workload'}), seeds ${[...new Set(runs.map((r) => r.seed))].join(', ')}, mean. A registered adapter the cache pushed out is read again from disk inside the engine loop at its next request: loads the router does not see.`,
    '',
    table(
      [
        'load time, setup',
        'loads by the router',
        'reloads in the engine',
        'TTFT p50',
        'p99 served',
        'refused',
      ],
      rows,
    ),
    '',
  ];
}
