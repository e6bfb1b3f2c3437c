import { atRate } from '../../sim/workload/workload';
import { loadSweep, loadSweepSection } from '../des/load-sweep';
import { type BenchPart, POLICIES } from './context';

/** The adapter load time sweep (issue 14). */
export const loadtimePart: BenchPart = {
  name: 'loadtime',
  async run(c) {
    const { full, seeds, scenario, mainLoad, capacity, workload, log, json, md } = c;
    const n = full ? workload.length : 1500;
    const sweepSeeds = full ? seeds : [seeds[0]!];
    log(
      `adapter load time sweep at ${mainLoad * 100}% load (${n} requests, seeds ${sweepSeeds.join(', ')}):`,
    );
    const arrivals = atRate(workload.slice(0, n), capacity * mainLoad);
    const points = await loadSweep(POLICIES, scenario, arrivals, sweepSeeds, log);
    json.loadTimeSweep = { requests: n, points };
    md.push(...loadSweepSection(points, n, full));
  },
};
