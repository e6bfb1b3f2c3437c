import { PrefixIndex, type PrefixOptions } from '../prefix-index';
import { defineScorer, type Scorer } from '../types';

export type { PrefixOptions } from '../prefix-index';

/**
 * Approximate prefix-cache affinity over the pipeline's prefix index (src/scheduler/prefix-index.ts):
 * a replica scores the share of the prompt's leading `scoredBlocks` blocks it served last.
 */
export function prefixScorer(options: Partial<PrefixOptions> = {}, index = new PrefixIndex(options)): Scorer {
  return {
    name: 'prefix',
    score(req, candidates) {
      if (!req.prompt) return candidates.map(() => 0);
      const hs = index.blocks(req.prompt, req.adapter?.name);
      const k = Math.min(hs.length, index.o.scoredBlocks);
      if (k === 0) return candidates.map(() => 0);
      return candidates.map((c) => index.held(hs, c.url, k) / k);
    },
    observe(req, chosen) {
      if (!req.prompt) return;
      index.record(index.blocks(req.prompt, req.adapter?.name), chosen.url);
    },
  };
}

export const prefixDescriptor = defineScorer({
  name: 'prefix',
  configKey: 'prefix',
  defaultWeight: 1,
  tendency: 'affinity',
  scoresHigher: "served the prompt's leading blocks last (approximate prefix cache)",
  reads: 'request `prompt`, `url`; learns from each decision',
  create: (shared) => prefixScorer({}, shared?.prefixIndex),
});
