import { VirtualClock } from '../../src/clock';
import { DesFleet } from '../../bench/des/fleet';
import type { DesRouter, Policy } from '../../bench/des/policies';
import type { Arrival } from '../../sim/workload/workload';

/** A DES fleet of `replicas` x `slots` in virtual time with `policy`'s router over it (seed 1). */
export function desSetup(policy: Policy, replicas = 4, slots = 2, loadMs?: number) {
  const clock = new VirtualClock();
  const fleet = new DesFleet(clock, { replicas, slots, mode: policy.mode, loadMs });
  const router = policy.create(clock, fleet, 1, slots);
  return { clock, fleet, router };
}

export const arrival = (promptTokens: number, outputTokens = 10): Arrival => ({
  at: 0,
  promptTokens,
  outputTokens,
});

/** Routes one request of `adapter`; a refusal fails the test. */
export async function routeOk(r: DesRouter, adapter: string, a = arrival(100)) {
  const x = await r.route({ adapter, arrival: a });
  if ('error' in x) throw new Error(`refused ${x.error}`);
  return x;
}
