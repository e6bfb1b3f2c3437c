import type { Candidate, Filter } from '../types';
import { keep } from './keep';

/**
 * The routing rule. Holders of the adapter (loaded or loading) while one is not saturated, those
 * whose reported residency holds the weights first;
 * failing that, replicas with a free adapter slot that are not saturated; failing that, all.
 * Strict, because a miss costs a load; yet it yields to load, which is how a hot adapter
 * spreads to a second replica. Base-model and static-adapter requests skip it.
 */
export const adapterAffinity: Filter = {
  name: 'adapter-affinity',
  filter(req, candidates, ctx) {
    if (req.kind !== 'on-demand') return { kept: candidates, stage: req.kind };
    const holders = keep(candidates, (c) => c.holder && c.saturation < 1);
    // Residency a replica reports beats its registry: holders that really hold the weights first.
    const warm = keep(holders, holdsWeights);
    if (warm.length > 0) return { kept: warm, stage: 'holder' };
    if (holders.length > 0) return { kept: holders, stage: 'holder' };
    const max = ctx.policy.maxLoadedAdapters;
    const free = keep(candidates, (c) => !c.holder && c.residentCount < max && c.saturation < 1);
    if (free.length > 0) return { kept: free, stage: 'free' };
    return { kept: candidates, stage: 'any' };
  },
};

/** Its reported residency holds the weights (not evicted to CPU memory). */
export const holdsWeights = (c: Candidate) => !c.adapter?.evicted;
