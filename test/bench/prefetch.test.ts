/**
 * The prefetch part's simulation: the real router with `prefetch` on, ticking on the virtual
 * clock after the poller's rounds, loads ahead of requests and never unloads an adapter with a
 * request in the engine.
 */
import { prefetchPolicies, WITH, WITHOUT } from '../../bench/des/prefetch';
import { adapterSequence, fleetCapacity, runPolicy, type Scenario } from '../../bench/des/run';
import { defaultEngineOptions } from '../../sim/engine/engine';
import { burstyWorkload } from '../../sim/workload/bursty';
import { atRate } from '../../sim/workload/workload';

const scenario: Scenario = {
  replicas: 4,
  slots: 4,
  adapters: 60,
  alpha: 1,
  seed: 1,
  loadMs: 300,
  engine: {},
};

describe('prefetch in the simulation', () => {
  it('loads ahead of requests, with no busy unload', async () => {
    const workload = burstyWorkload(200, 1);
    const arrivals = atRate(workload, fleetCapacity(scenario, workload, defaultEngineOptions) * 0.5);
    const adapters = adapterSequence(arrivals.length, scenario);
    const [without, withIt] = await Promise.all(
      [WITHOUT, WITH].map((name) =>
        runPolicy(prefetchPolicies().find((p) => p.name === name)!, scenario, arrivals, adapters),
      ),
    );
    // Prefetch made loads no request asked for (the same requests, the same router otherwise).
    expect(withIt!.loads).toBeGreaterThan(without!.loads);
    expect(withIt!.busyUnloads).toBe(0);
    expect(withIt!.completed + withIt!.errors).toBe(200);
    expect(withIt!.churn!.ops).toBeGreaterThan(0);
  }, 120_000);
});
