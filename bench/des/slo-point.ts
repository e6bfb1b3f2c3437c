import { join } from 'node:path';
import { defaultEngineOptions } from '../../sim/engine/engine';
import { atRate, type Arrival } from '../../sim/workload/workload';
import { loadWorkload } from '../workloads';
import { fleetCapacity, type Scenario } from './run';

/**
 * One point of the slo part as a quick `npm run bench` runs it, for the diagnosis scripts: 3,000
 * requests of the workload loaded, the first 1,000 run, 8 replicas x 8 slots, 200 adapters, Zipf(1),
 * arrivals rescaled to `load` of the fleet's capacity for that token mix.
 */
export function sloPoint(
  workload: string,
  load: number,
  trace?: string,
): { base: Arrival[]; scenario: Scenario; arrivals: Arrival[] } {
  const root = join(__dirname, '..', '..', '..');
  const base = loadWorkload(workload, root, trace, 3000).arrivals.slice(0, 1000);
  const scenario: Scenario = { replicas: 8, slots: 8, adapters: 200, alpha: 1, seed: 1, engine: {} };
  const arrivals = atRate(base, fleetCapacity(scenario, base, defaultEngineOptions) * load);
  return { base, scenario, arrivals };
}
