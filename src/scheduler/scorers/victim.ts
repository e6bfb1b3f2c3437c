import { defineScorer, type Scorer } from '../types';
import { loadCost } from '../victims';
import { lowerIsBetter } from './min-max';

/**
 * Where a cold adapter should go: holders and free slots score 1; otherwise the cheaper the
 * replica's cheapest idle victim (by the eviction policy's cost), the higher. With several
 * replicas full, this sends the load where the least valuable adapter is, so the fleet's
 * slots behave like one cache rather than R separate ones.
 */
export const victim: Scorer = {
  name: 'victim',
  score(req, candidates, ctx) {
    if (req.kind !== 'on-demand') return candidates.map(() => 1);
    const costs = candidates.map((c) => loadCost(c, ctx));
    const finite = costs.filter((x): x is number => x !== undefined && x !== -Infinity);
    const ranked = lowerIsBetter(finite);
    let k = 0;
    return costs.map((x) => (x === -Infinity ? 1 : x === undefined ? 0 : ranked[k++]!));
  },
};

export const victimDescriptor = defineScorer({
  name: 'victim',
  configKey: 'victim',
  defaultWeight: 0,
  tendency: 'affinity',
  scoresHigher:
    'a cold load there evicts a cheaper adapter (by the eviction policy); holders and free slots 1',
  reads: '`holder`, `residentCount`, `residents`, `victimCost`, `isStatic`',
  experimental: true,
  create: () => victim,
});
