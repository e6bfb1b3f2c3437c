import { defineScorer, type Scorer } from '../types';
import { lowerIsBetterBy } from './min-max';

/** Shorter waiting queue (from the replica's metrics) scores higher. */
export const queue: Scorer = {
  name: 'queue',
  score: (_req, candidates) => lowerIsBetterBy(candidates, (c) => c.waiting),
};

export const queueDescriptor = defineScorer({
  name: 'queue',
  configKey: 'queue',
  defaultWeight: 2,
  tendency: 'distribution',
  scoresHigher: 'fewer waiting requests (min-max over candidates)',
  reads: '`waiting` (replica metrics)',
  create: () => queue,
});
