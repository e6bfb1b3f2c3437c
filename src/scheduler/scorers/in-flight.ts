import { defineScorer, type Scorer } from '../types';
import { lowerIsBetterBy } from './min-max';

/**
 * Fewer requests this router has in flight there scores higher. Fresher than any scrape: it
 * moves with every decision, so a burst between two polls still spreads.
 */
export const inFlight: Scorer = {
  name: 'in-flight',
  score: (_req, candidates) => lowerIsBetterBy(candidates, (c) => c.inFlight),
};

export const inFlightDescriptor = defineScorer({
  name: 'in-flight',
  configKey: 'in_flight',
  defaultWeight: 2,
  tendency: 'distribution',
  scoresHigher: 'fewer requests this router has in flight there',
  reads: "`inFlight` (this fleet's leases)",
  create: () => inFlight,
});
