import type { Scorer } from '../types';
import { lowerIsBetter } from './min-max';

/**
 * Fewer requests this router has in flight there scores higher. Fresher than any scrape: it
 * moves with every decision, so a burst between two polls still spreads.
 */
export const inFlight: Scorer = {
  name: 'in-flight',
  kind: 'distribution',
  score: (_req, candidates) => lowerIsBetter(candidates.map((c) => c.inFlight)),
};
