import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { goals25Section, sloCharts } from '../des/slo-goals-25';
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
    md.push(...sloSection(points, json.slo.variants, n, full));
    // Issue 25: SLO attainment against load per policy, one chart per workload and load time.
    const charts = sloCharts(points, json.slo.variants[0]!);
    for (const ch of charts) writeFileSync(join(c.out, ch.file), ch.svg);
    md.push(
      ...goals25Section(
        points,
        json.slo.variants[0]!,
        json.overhead,
        charts.map((ch) => ch.file),
      ),
      ...peersSection(points, json.slo.variants[0]!),
    );
  },
};
