import type { Candidate, Filter } from '../types';
import { holdsWeights } from './adapter-affinity';
import { keep } from './keep';

/**
 * The adapter-affinity rule with saturation measured in time (`saturation_mode: predicted`):
 * holders keep the adapter's traffic while one is not saturated, and a holder is saturated when
 * its predicted TTFT exceeds the best non-holder's, load included, by more than
 * `saturation_margin_ms`. Two waiting 10k-token prompts (seconds of prefill) then spread the
 * adapter where a 100 ms load is cheaper, which a count of waiting requests cannot tell.
 * Holders whose reported residency holds the weights first, as in `adapter-affinity`.
 */
export const predictedAffinity: Filter = {
  name: 'predicted-affinity',
  filter(req, candidates, ctx) {
    if (req.kind !== 'on-demand') return { kept: candidates, stage: req.kind };
    const margin = ctx.policy.saturationMarginMs ?? 0;
    let bestOther = Infinity;
    let bestSpread = Infinity;
    for (let i = 0; i < candidates.length; i++) {
      const c = candidates[i]!;
      if (!c.holder) {
        if (c.ttftMs < bestOther) bestOther = c.ttftMs;
        const s = spreadCost(c);
        if (s < bestSpread) bestSpread = s;
      }
    }
    const holders = keep(candidates, (c) => c.holder && c.ttftMs <= bestSpread + margin);
    const warm = keep(holders, holdsWeights);
    if (warm.length > 0) return { kept: warm, stage: 'holder' };
    if (holders.length > 0) return { kept: holders, stage: 'holder' };
    const others = keep(candidates, (c) => !c.holder);
    if (others.length === 0) return { kept: candidates, stage: 'any' };
    // As the count rule's second step: replicas with a free slot, when one is about as fast as
    // the best (a load there evicts no adapter that the next request may want).
    const max = ctx.policy.maxLoadedAdapters;
    const near = bestOther + (ctx.policy.ttftToleranceMs ?? 0);
    const free = keep(others, (c) => c.residentCount < max && c.ttftMs <= near);
    return free.length > 0 ? { kept: free, stage: 'free' } : { kept: others, stage: 'any' };
  },
};

/**
 * What loading the adapter on a non-holder costs: its own predicted TTFT, plus the load once
 * more for each request already there: a load stalls the replica's engine (as the simulator
 * models it, sim/engine/engine.ts `loadWeights`), so every request there waits for it too. An idle
 * replica costs its TTFT alone, so spreading to idle capacity stays cheap.
 */
function spreadCost(c: Candidate): number {
  return c.ttftMs + c.loadMs * Math.max(c.inFlight, c.running + c.waiting);
}
