import { atRate } from '../../sim/workload/workload';
import { unloadComparison, unloadSection } from '../des/load-sweep';
import { type BenchPart } from './context';

/** vLLM's unload as released vs fixed (issue 14). */
export const unloadPart: BenchPart = {
  name: 'unload',
  async run(c) {
    const { full, seeds, scenario, mainLoad, capacity, workload, log, json, md } = c;
    const n = full ? workload.length : 3000;
    log(`vLLM unload as released vs fixed (${n} requests, seeds ${seeds.join(', ')}):`);
    const arrivals = atRate(workload.slice(0, n), capacity * mainLoad);
    const runs = await unloadComparison(scenario, arrivals, seeds, [scenario.loadMs, 1000], log);
    json.unload = { requests: n, runs };
    md.push(...unloadSection(runs, n, full));
  },
};
