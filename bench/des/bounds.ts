/**
 * References for lora-router's SLO attainment (issue 34), run on the same requests as the policies:
 * - the pooled bound: the fleet pooled into one engine with the same total capacity and every
 *   adapter resident: no loads, no placement, perfect balance (DesFleet's `pooled` mode);
 * - the free-loads bound: the fleet's replicas and slots with loads that take no time, the better
 *   of lora-router and least request there (what placement alone leaves, with no load time).
 * Neither is a proof of optimality: they are what the simulator's engine gives without the costs
 * a router cannot remove, so a policy well above one says the reference is wrong.
 */
import type { PolicyResult } from './run';
import { byName } from '../goals';
import { counting, leastRequest, loraRouter, type Policy } from './policies';

export const POOLED = 'bound: fleet pooled in one engine';

export const pooledBound: Policy = {
  name: POOLED,
  mode: 'pooled',
  create: (_clock, fleet, seed) => counting(fleet, () => 0, seed),
};

/** The suffix naming a policy run with loads that take no time. */
export const FREE_LOADS = ', loads free';

/** `p` on a fleet whose adapter loads take no time. */
export const freeLoads = (p: Policy): Policy => ({ ...p, name: `${p.name}${FREE_LOADS}`, loadMs: 0 });

/** The policies the free-loads bound is the best of, for lora-router configured as `config`. */
export function freeLoadPolicies(name: string, config: Record<string, unknown>): Policy[] {
  return [freeLoads(loraRouter(name, config)), freeLoads(leastRequest)];
}

/** The free-loads bound at one point: the best SLO attainment among the free-load runs. */
export function freeLoadsBound(results: PolicyResult[]): number {
  return Math.max(...results.filter((r) => r.policy.endsWith(FREE_LOADS)).map((r) => r.sloAttainment));
}

/** The pooled bound at one point. */
export const pooledSlo = (results: PolicyResult[]) => byName(results, POOLED).sloAttainment;
