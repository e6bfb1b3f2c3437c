import type { Arrival } from '../../sim/workload/workload';
import { ORACLE } from '../goals';
import { beladyMisses, pinnedBeladyMisses, setServedBounds } from './belady';
import type { Policy } from './policies';
import { adapterSequence, runPolicy, type PolicyResult, type Scenario } from './run';

/** Every policy at one point, on the same requests, with Belady's bounds over all of them. */
export interface Point {
  adapters: string[];
  /** Belady's bound over all requests (what a policy serving every request can reach). */
  belady: number;
  /** The same with in-flight pinning, on the oracle's service intervals. */
  pinned: number;
  /** Each policy's result, with its bounds over what it served (intervals dropped). */
  results: PolicyResult[];
}

/**
 * Runs `policies` (the oracle among them: its intervals give the pinned bound) on the same
 * requests, then sets each result's bounds over what it served. `log` sees each result as it
 * comes; results `lruFor` names also get the online reference (LRU with the same pins).
 */
export async function runPoint(
  policies: Policy[],
  s: Scenario,
  arrivals: Arrival[],
  o: { log?: (r: PolicyResult) => void; lruFor?: (policy: string) => boolean } = {},
): Promise<Point> {
  const adapters = adapterSequence(arrivals.length, s);
  const results: PolicyResult[] = [];
  for (const p of policies) {
    const r = await runPolicy(p, s, arrivals, adapters);
    results.push(r);
    o.log?.(r);
  }
  const slots = s.replicas * s.slots;
  const oracle = results.find((r) => r.policy === ORACLE);
  if (!oracle) throw new Error('runPoint: the oracle must be among the policies');
  const belady = beladyMisses(adapters, slots);
  const pinned = pinnedBeladyMisses(adapters, oracle.intervals!.start, oracle.intervals!.end, slots);
  setServedBounds(results, oracle, adapters, slots, { belady, pinned }, o.lruFor);
  return { adapters, belady, pinned, results };
}
