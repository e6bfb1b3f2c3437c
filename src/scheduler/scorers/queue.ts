import type { Scorer } from '../types';
import { lowerIsBetter } from './min-max';

/** Shorter waiting queue (from the replica's metrics) scores higher. */
export const queue: Scorer = {
  name: 'queue',
  kind: 'distribution',
  score: (_req, candidates) => lowerIsBetter(candidates.map((c) => c.waiting)),
};
