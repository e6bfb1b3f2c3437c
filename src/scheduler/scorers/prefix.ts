import { LRUCache } from 'lru-cache';
import { defineScorer, type SchedulingRequest, type Scorer } from '../types';

export interface PrefixOptions {
  /** Characters per block (about 64 tokens). */
  blockChars: number;
  /** Leading blocks considered. */
  maxBlocks: number;
  /** Blocks remembered; least recently used forgotten first. */
  capacity: number;
}

/**
 * Approximate prefix-cache affinity: hashes the prompt's leading blocks (chained, so a block
 * hash names its whole prefix, and seeded with the adapter, whose KV differs) and remembers
 * which replica served each recently. A replica scores the share of leading blocks it served
 * last. The index is bounded: an LRU of `capacity` block hashes.
 */
export function prefixScorer(options: Partial<PrefixOptions> = {}): Scorer {
  const o: PrefixOptions = { blockChars: 256, maxBlocks: 16, capacity: 65536, ...options };
  const owner = new LRUCache<number, string>({ max: o.capacity });
  // score() and observe() see the same request in one decision: hash its prompt once.
  let last: { req: SchedulingRequest; hashes: number[] } | null = null;

  const blocks = (req: SchedulingRequest & { prompt: string }): number[] => {
    if (last?.req === req) return last.hashes;
    const prompt = req.prompt;
    const hashes: number[] = [];
    let h = fnv1a(0x811c9dc5, req.adapter?.name ?? '', 0, (req.adapter?.name ?? '').length);
    for (let i = 0; i + o.blockChars <= prompt.length && hashes.length < o.maxBlocks; i += o.blockChars) {
      h = fnv1a(h, prompt, i, i + o.blockChars);
      hashes.push(h);
    }
    last = { req, hashes };
    return hashes;
  };

  return {
    name: 'prefix',
    score(req, candidates) {
      if (!req.prompt) return candidates.map(() => 0);
      const hs = blocks(req as SchedulingRequest & { prompt: string });
      if (hs.length === 0) return candidates.map(() => 0);
      return candidates.map((c) => {
        let n = 0;
        // Leading blocks only: a cache hit needs the whole prefix before it.
        // peek: scoring is no use; only the replica that served the block renews it.
        while (n < hs.length && owner.peek(hs[n]!) === c.url) n++;
        return n / hs.length;
      });
    },
    observe(req, chosen) {
      if (!req.prompt) return;
      for (const h of blocks(req as SchedulingRequest & { prompt: string })) owner.set(h, chosen.url);
    },
  };
}

/** FNV-1a over `s[from, to)`, continuing from `seed`. */
function fnv1a(seed: number, s: string, from: number, to: number): number {
  let h = seed >>> 0;
  for (let i = from; i < to; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

export const prefixDescriptor = defineScorer({
  name: 'prefix',
  configKey: 'prefix',
  defaultWeight: 1,
  tendency: 'affinity',
  scoresHigher: "served the prompt's leading blocks last (approximate prefix cache)",
  reads: 'request `prompt`, `url`; learns from each decision',
  create: () => prefixScorer(),
});
