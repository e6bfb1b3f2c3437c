import { evictable } from '../adapters/eviction';
import type { Candidate, SchedulingContext } from './types';

/**
 * What a cold load costs on a candidate: -Infinity with a free slot (or for a holder: nothing to load),
 * the cheapest idle victim's cost otherwise, undefined when nothing can be evicted now.
 */
export function loadCost(c: Candidate, ctx: SchedulingContext): number | undefined {
  if (c.holder) return -Infinity;
  // Slots beyond the limit this load (and any pending claims) would take: that many evictions.
  const needed = c.residentCount + 1 - ctx.policy.maxLoadedAdapters;
  if (needed <= 0) return -Infinity;
  if (!c.residents) return undefined;
  const cost = ctx.victimCost ?? ((v) => v.lastUsed);
  const idle = evictable(c.residents, ctx.isStatic ?? (() => false))
    .map(cost)
    .sort((a, b) => a - b);
  return idle.length >= needed ? idle[needed - 1] : undefined;
}
