import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { chartFile, goals25Section, sloCharts } from '../des/slo-goals-25';
import type { BenchResults } from '../goals';
import { peersSection } from '../des/peers-report';
import { SWEEP_LOAD_MS } from '../des/load-sweep';
import { ROUTING_VARIANTS, SLO_LOADS, sloSection, sloSweep } from '../des/slo-sweep';
import { ms } from '../report';
import type { BenchPart } from './context';

/** Routing under bursts and long prompts: SLO attainment on every workload (issues 15 and 25). */
export const sloPart: BenchPart = {
  name: 'slo',
  async run(c) {
    const { full, seeds, scenario, named, v, log, json, md } = c;
    // --requests caps what a workload holds: report the count the points ran with.
    const n = Math.min(full ? 3000 : 1000, v.requests ? Number(v.requests) : Infinity);
    const o = {
      workloads: (v.workloads ?? 'conversation,bursty,long').split(',').map((name) => ({
        name,
        arrivals: named(name).arrivals.slice(0, n),
      })),
      // The goals are defined over every seed and load time: the quick run differs only in requests.
      loadTimes: SWEEP_LOAD_MS,
      loads: SLO_LOADS,
      seeds,
      variants: ROUTING_VARIANTS.slice(0, v.variants ? Number(v.variants) : undefined),
    };
    log(
      `SLO attainment, ${o.workloads.map((w) => w.name).join(' and ')}, load times ${o.loadTimes.map(ms).join(', ')}, loads ${o.loads.map((l) => `${l * 100}%`).join(', ')}, seeds ${o.seeds.join(', ')}, ${n} requests${full ? '' : ' (quick run)'}:`,
    );
    // Points are independent: one worker thread per core.
    const points = await sloSweep(scenario, o, log, availableParallelism());
    json.slo = { requests: n, variants: o.variants.map((x) => x.name), points };
    for (const f of sloFiles(json)) writeFileSync(join(c.out, f.file), f.text);
    md.push(...sloReport(json));
  },
  fromResults: { key: 'slo', section: (r) => sloReport(r), files: (r) => sloFiles(r) },
};

/** Issue 25: SLO attainment against load per policy, one chart per workload and load time. */
function sloFiles(r: BenchResults): { file: string; text: string }[] {
  const x = r.slo!;
  return sloCharts(x.points, x.variants[0]!).map((ch) => ({ file: ch.file, text: ch.svg }));
}

/** The part's sections of bench/results/README.md, from its results (and the overhead part's). */
function sloReport(r: BenchResults): string[] {
  const x = r.slo!;
  const router = x.variants[0]!;
  const charts = [...new Set(x.points.map((p) => chartFile(p.workload, p.loadMs)))];
  // The quick run has at most 1,000 requests a point, the full one 3,000.
  return [
    ...sloSection(x.points, x.variants, x.requests, x.requests >= 3000),
    ...goals25Section(x.points, router, r.overhead, charts),
    ...peersSection(x.points, router),
  ];
}
