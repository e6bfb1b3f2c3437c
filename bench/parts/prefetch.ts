import {
  PREFETCH_CONFIG,
  PREFETCH_LOAD_MS,
  PREFETCH_LOADS,
  PREFETCH_WORKLOADS,
  prefetchSection,
  prefetchSweep,
} from '../des/prefetch';
import { ms } from '../report';
import type { BenchPart } from './context';

/** Placement ahead of demand (issue 34): lora-router with and without `prefetch`, beside Dynamo and the pooled bound. */
export const prefetchPart: BenchPart = {
  name: 'prefetch',
  async run(c) {
    const { seeds, scenario, named, v, log, json, md } = c;
    // 1000 requests a point keeps the part within 15 minutes on 2 busy cores.
    const n = Math.min(1000, v.requests ? Number(v.requests) : Infinity);
    const o = {
      workloads: (v.workloads ?? PREFETCH_WORKLOADS.join(',')).split(',').map((name) => ({
        name,
        arrivals: named(name).arrivals.slice(0, n),
      })),
      loadMs: PREFETCH_LOAD_MS,
      loads: PREFETCH_LOADS,
      seeds,
      config: PREFETCH_CONFIG,
    };
    log(
      `Prefetch, ${o.workloads.map((w) => w.name).join(', ')}, loads ${ms(o.loadMs)}, fleet loads ${o.loads.map((l) => `${l * 100}%`).join(', ')}, seeds ${seeds.join(', ')}, ${n} requests:`,
    );
    const points = await prefetchSweep(scenario, o, log);
    json.prefetch = { requests: n, config: PREFETCH_CONFIG, points };
    md.push(...prefetchSection(json.prefetch));
  },
};
