import type { Filter } from '../types';

/**
 * Replicas carry a priority (say reserved GPUs 1, spot or burst capacity 0). The highest
 * pool that is not saturated as a whole (some member below saturation 1) takes the request;
 * when every pool is saturated, all candidates stay.
 */
export const poolPriority: Filter = {
  name: 'pool-priority',
  filter(_req, candidates) {
    // One pool (the usual fleet): nothing to choose, nothing to allocate.
    if (candidates.every((c) => c.priority === candidates[0]!.priority)) return { kept: candidates };
    const levels = [...new Set(candidates.map((c) => c.priority))].sort((a, b) => b - a);
    if (levels.length < 2) return { kept: candidates };
    for (const p of levels) {
      const pool = candidates.filter((c) => c.priority === p);
      if (pool.some((c) => c.saturation < 1)) return { kept: pool };
    }
    return { kept: candidates };
  },
};
