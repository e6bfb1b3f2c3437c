import { availableParallelism } from 'node:os';
import { SWEEP_LOAD_MS } from '../des/load-sweep';
import { ROUTING_VARIANTS, SLO_LOADS, sloSection, sloSweep } from '../des/slo-sweep';
import { ms } from '../report';
import type { BenchPart } from './context';

/** Routing under bursts: SLO attainment on both workloads (issue 15). */
export const sloPart: BenchPart = {
  name: 'slo',
  async run(c) {
    const { full, seeds, scenario, named, v, log, json, md } = c;
    const n = full ? 3000 : 1000;
    const o = {
      workloads: (v.workloads ?? 'conversation,bursty').split(',').map((name) => ({
        name,
        arrivals: named(name).arrivals.slice(0, n),
      })),
      // The goals are defined over every seed and load time: the quick run differs only in requests.
      loadTimes: SWEEP_LOAD_MS,
      loads: SLO_LOADS,
      seeds,
      variants: ROUTING_VARIANTS,
    };
    log(
      `SLO attainment, ${o.workloads.map((w) => w.name).join(' and ')}, load times ${o.loadTimes.map(ms).join(', ')}, loads ${o.loads.map((l) => `${l * 100}%`).join(', ')}, seeds ${o.seeds.join(', ')}, ${n} requests${full ? '' : ' (quick run)'}:`,
    );
    // Points are independent: one worker thread per core.
    const points = await sloSweep(scenario, o, log, availableParallelism());
    json.slo = { requests: n, variants: o.variants.map((x) => x.name), points };
    md.push(...sloSection(points, json.slo.variants, n, full));
  },
};
