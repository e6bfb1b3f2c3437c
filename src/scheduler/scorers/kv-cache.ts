import type { Scorer } from '../types';

/** Free KV cache scores higher. llama.cpp reports none: it scores a neutral 0.5. */
export const kvCache: Scorer = {
  name: 'kv-cache',
  kind: 'distribution',
  score: (_req, candidates) => candidates.map((c) => (c.kvUsage === undefined ? 0.5 : 1 - c.kvUsage)),
};
