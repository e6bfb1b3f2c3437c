import { defineScorer, type Scorer } from '../types';

/**
 * Among holders, prefer the one that used the adapter most recently: traffic concentrates on one
 * copy while it is not saturated, and the other copies go idle and become cheap victims,
 * instead of every copy staying warm.
 */
export const consolidate: Scorer = {
  name: 'consolidate',
  score(_req, candidates) {
    const used = candidates.map((c) => (c.holder ? (c.adapter?.lastUsed ?? 0) : -Infinity));
    const max = Math.max(...used);
    return used.map((u) => (u === -Infinity ? 0 : u === max ? 1 : 0.5));
  },
};

export const consolidateDescriptor = defineScorer({
  name: 'consolidate',
  configKey: 'consolidate',
  defaultWeight: 0,
  tendency: 'affinity',
  scoresHigher: 'among holders, the one that used the adapter most recently',
  reads: '`holder`, `adapter.lastUsed`',
  experimental: true,
  create: () => consolidate,
});
