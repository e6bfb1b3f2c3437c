/**
 * Issue 34's churn goal, taken apart: lora-router and Dynamo's min-cost-flow controller at the
 * points named, each load and unload by kind (DesFleet.churnBreakdown) per served request, as the
 * SLO sweep runs them (1,000 requests, 8 replicas x 8 slots, 200 adapters, Zipf(1)). Usage:
 *   node dist/bench/des/churn-breakdown.js long 100:0.7,300:0.9 1,2,3 [trace.csv]
 */
import { join } from 'node:path';
import { defaultEngineOptions } from '../../sim/engine/engine';
import { atRate } from '../../sim/workload/workload';
import { loadWorkload } from '../workloads';
import { fmtPct, table } from '../report';
import type { ChurnBreakdown, DesFleet } from './fleet';
import { dynamoMcf } from './peers/dynamo-mcf';
import { loraRouter } from './policies';
import { adapterSequence, fleetCapacity, runPolicy, type Scenario } from './run';

async function main(): Promise<void> {
  const [workload = 'long', points = '100:0.9', seeds = '1', trace] = process.argv.slice(2);
  const root = join(__dirname, '..', '..', '..');
  const base = loadWorkload(workload, root, trace, 3000).arrivals.slice(0, 1000);
  const rows: string[][] = [];
  for (const point of points.split(',')) {
    const [loadMs, load] = point.split(':').map(Number) as [number, number];
    for (const seed of seeds.split(',').map(Number)) {
      const s: Scenario = { replicas: 8, slots: 8, loadMs, adapters: 200, alpha: 1, seed, engine: {} };
      const arrivals = atRate(base, fleetCapacity(s, base, defaultEngineOptions) * load);
      const adapters = adapterSequence(arrivals.length, s);
      for (const policy of [loraRouter(), dynamoMcf]) {
        let fleet: DesFleet | undefined;
        const r = await runPolicy(policy, s, arrivals, adapters, { fleet: (f) => (fleet = f) });
        const b = fleet!.churnBreakdown();
        const per = (k: keyof ChurnBreakdown) => (b[k] / Math.max(1, r.completed)).toFixed(3);
        rows.push([
          `${workload} ${loadMs} ms ${load * 100}% seed ${seed}`,
          policy.name,
          fmtPct(r.sloAttainment),
          ((r.loads + r.unloads) / Math.max(1, r.completed)).toFixed(3),
          ...(Object.keys(b) as (keyof ChurnBreakdown)[]).map(per),
        ]);
      }
    }
  }
  const head = ['point', 'policy', 'SLO', 'ops per served', 'API loads', 'resolver loads', 'engine reloads'];
  console.log(
    table([...head, 'API unloads', '… of evicted copies', 'evictions', 'evictions after unload'], rows),
  );
}

void main();
