import { defineScorer, type Scorer } from '../types';

/** Free KV cache scores higher. llama.cpp reports none: it scores a neutral 0.5. */
export const kvCache: Scorer = {
  name: 'kv-cache',
  score: (_req, candidates) => candidates.map((c) => (c.kvUsage === undefined ? 0.5 : 1 - c.kvUsage)),
};

export const kvCacheDescriptor = defineScorer({
  name: 'kv-cache',
  configKey: 'kv_cache',
  defaultWeight: 2,
  tendency: 'distribution',
  scoresHigher: 'more free KV cache (llama.cpp: neutral 0.5)',
  reads: '`kvUsage` (replica metrics)',
  create: () => kvCache,
});
