import type { Filter } from '../types';
import { keep } from './keep';

/**
 * Keeps the candidates whose predicted TTFT is within `ttft_tolerance_ms` of the best, so the
 * placement minimises it while the scorers and the picker still spread among near-equals
 * (two idle replicas are not told apart by a millisecond of prediction).
 */
export const nearBestTtft: Filter = {
  name: 'near-best-ttft',
  filter(_req, candidates, ctx) {
    let best = Infinity;
    for (let i = 0; i < candidates.length; i++)
      if (candidates[i]!.ttftMs < best) best = candidates[i]!.ttftMs;
    if (best === Infinity) return { kept: candidates };
    const limit = best + (ctx.policy.ttftToleranceMs ?? 0);
    return { kept: keep(candidates, (c) => c.ttftMs <= limit) };
  },
};
