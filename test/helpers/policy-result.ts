import type { PolicyResult } from '../../bench/des/run';

/** A benchmark result with only what the goals read: every request served, few loads. */
export function policyResult(policy: string, r: Partial<PolicyResult>): PolicyResult {
  return {
    policy,
    requests: 100,
    completed: 100,
    errors: 0,
    refused: 0,
    sloAttainment: 1,
    slo: {},
    loads: 10,
    unloads: 0,
    hitRate: 0.9,
    ttftP50: 100,
    ttftP99: 1000,
    ttftP99Served: 1000,
    e2eP99: 1000,
    throughput: 1,
    busyUnloads: 0,
    engineReloads: 0,
    wallS: 0,
    ...r,
  };
}
