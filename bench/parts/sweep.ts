import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { atRate } from '../../sim/workload/workload';
import { runPoint } from '../des/point';
import * as P from '../des/policies';
import type { PolicyResult } from '../des/run';
import { byName, mean, type SweepPoint } from '../goals';
import { fmtNum, fmtRatio, lineChart, ms, table } from '../report';
import { ACCOUNTING, type BenchPart, POLICIES } from './context';

/** Every policy across fleet loads, with the two charts. */
export const sweepPart: BenchPart = {
  name: 'sweep',
  async run(c) {
    const { full, seeds, scenario, capacity, workload, log, json, md, out } = c;
    const loads = full ? [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9] : [0.3, 0.5, 0.7, 0.9];
    const sweepSeeds = full ? seeds : [seeds[0]!];
    log(`load sweep ${loads.map((l) => `${l * 100}%`).join(', ')} (seed ${sweepSeeds.join(', ')}):`);
    const sweep: SweepPoint[] = [];
    const sweepWorkload = full ? workload : workload.slice(0, 2000);
    for (const load of loads) {
      for (const seed of sweepSeeds) {
        const arrivals = atRate(sweepWorkload, capacity * load);
        const { belady, results } = await runPoint(POLICIES, { ...scenario, seed }, arrivals);
        sweep.push({ load, seed, belady, results });
        log(`  ${load * 100}%: ${results.map((r) => `${r.policy} p99 ${ms(r.ttftP99)}`).join(' · ')}`);
      }
    }
    json.sweep = sweep;
    const series = (metric: (r: PolicyResult) => number) =>
      POLICIES.map((p) => ({
        name: p.name,
        points: loads.map((l) => {
          const rs = sweep.filter((x) => x.load === l).map((x) => byName(x.results, p.name));
          return [l * 100, mean(rs.map(metric))] as [number, number];
        }),
      }));
    writeFileSync(
      join(out, 'ttft-p99-vs-load.svg'),
      lineChart({
        title: 'TTFT p99 vs fleet load',
        xLabel: 'fleet load (%)',
        yLabel: 'TTFT p99 (log scale)',
        series: series((r) => r.ttftP99),
        logY: true,
      }),
    );
    writeFileSync(
      join(out, 'loads-vs-load.svg'),
      lineChart({
        title: 'Adapter loads vs fleet load',
        xLabel: 'fleet load (%)',
        yLabel: 'loads',
        series: [
          ...series((r) => r.loads).filter((s) => s.name !== P.oracle.name),
          {
            name: "Belady's bound (all requests)",
            points: loads.map(
              (l) =>
                [l * 100, mean(sweep.filter((x) => x.load === l).map((x) => x.belady))] as [number, number],
            ),
          },
        ],
      }),
    );
    md.push(...sweepSection(sweep, loads, sweepWorkload.length));
  },
};

function sweepSection(sweep: SweepPoint[], loads: number[], n: number): string[] {
  const names = sweep[0]!.results.map((r) => r.policy);
  const at = (l: number, name: string, f: (r: PolicyResult) => number) =>
    mean(sweep.filter((x) => x.load === l).map((x) => f(byName(x.results, name))));
  const perLoad = (label: string, f: (r: PolicyResult) => number, fmt: (v: number) => string, skip = '') => [
    `${label}:`,
    '',
    table(
      ['policy', ...loads.map((l) => `${l * 100}%`)],
      names.filter((name) => name !== skip).map((name) => [name, ...loads.map((l) => fmt(at(l, name, f)))]),
    ),
    '',
  ];
  return [
    '## Load sweep',
    '',
    `${n.toLocaleString('en-US')} requests per point, seed${new Set(sweep.map((x) => x.seed)).size > 1 ? 's' : ''} ${[...new Set(sweep.map((x) => x.seed))].join(', ')}; same scenario as above. ${ACCOUNTING}`,
    '',
    '![TTFT p99 vs load](ttft-p99-vs-load.svg)',
    '![loads vs load](loads-vs-load.svg)',
    '',
    ...perLoad('TTFT p99 (refused = never answered)', (r) => r.ttftP99, ms),
    ...perLoad('Served TTFT p99', (r) => r.ttftP99Served, ms),
    ...perLoad('Refused', (r) => r.errors, fmtNum),
    ...perLoad('Adapter loads', (r) => r.loads, fmtNum, P.oracle.name),
    ...perLoad(
      'Loads ÷ Belady over the same served requests',
      (r) => r.loads / r.belady!,
      fmtRatio,
      P.oracle.name,
    ),
  ];
}
