import { CLASS_LOAD_MS, CLASS_LOADS, classSection, classSweep } from '../des/slo-classes';
import { ms } from '../report';
import type { BenchPart } from './context';

/** SLO classes (issue 34): interactive and batch requests on one fleet, per class. */
export const classesPart: BenchPart = {
  name: 'classes',
  async run(c) {
    const { full, seeds, scenario, named, v, log, json, md } = c;
    const n = Math.min(full ? 3000 : 1000, v.requests ? Number(v.requests) : Infinity);
    const name = v.workloads?.split(',')[0] ?? 'conversation';
    const list = (x: string | undefined, d: number[]) => (x === undefined ? d : x.split(',').map(Number));
    const loads = list(v['class-loads'], CLASS_LOADS);
    const o = {
      workload: { name, arrivals: named(name).arrivals.slice(0, n) },
      loadTimes: list(v['class-load-ms'], CLASS_LOAD_MS),
      loads,
      seeds,
      ...(v['batch-share'] === undefined ? {} : { batchShare: Number(v['batch-share']) }),
    };
    log(
      `SLO classes, ${name}, load times ${o.loadTimes.map(ms).join(', ')}, loads ${loads.map((l) => `${l * 100}%`).join(', ')}, seeds ${seeds.join(', ')}, ${n} requests${o.batchShare === undefined ? '' : `, ${o.batchShare * 100}% batch`}:`,
    );
    const points = await classSweep(scenario, o, log);
    json.classes = { requests: n, points };
    md.push(...classSection(points, n));
  },
  fromResults: { key: 'classes', section: (r) => classSection(r.classes!.points, r.classes!.requests) },
};
