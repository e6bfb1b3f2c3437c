import { Lru } from '../lru';

export interface PrefixOptions {
  /** Characters per block (about 64 tokens). */
  blockChars: number;
  /** Leading blocks indexed (what the TTFT prediction can credit). */
  maxBlocks: number;
  /** Of those, the leading blocks the prefix scorer ranks by. */
  scoredBlocks: number;
  /** Blocks remembered; least recently used forgotten first. */
  capacity: number;
}

/**
 * Which replica served each recently seen prompt block: the prompt's leading blocks hashed
 * (chained, so a block hash names its whole prefix, and seeded with the adapter, whose KV
 * differs), each remembered with the replica it went to last. An LRU of `capacity` hashes.
 * The prefix scorer ranks by it; the TTFT prediction credits the prefix a replica holds.
 */
export class PrefixIndex {
  readonly o: PrefixOptions;
  private readonly owner: Lru<number, string>;
  // score(), observe() and the prediction see the same prompt in one decision: hash it once.
  private last: { prompt: string; adapter: string; hashes: number[] } | null = null;

  constructor(options: Partial<PrefixOptions> = {}) {
    // 32 blocks of 256 characters: about 2,048 tokens of prefix (a system prompt and a few turns),
    // the first 16 scored as before; hashing them costs about twice what 16 did.
    this.o = { blockChars: 256, maxBlocks: 32, scoredBlocks: 16, capacity: 131072, ...options };
    this.owner = new Lru<number, string>(this.o.capacity);
  }

  /** The chained hashes of `prompt`'s leading full blocks. */
  blocks(prompt: string, adapter = ''): number[] {
    const l = this.last;
    if (l && l.prompt === prompt && l.adapter === adapter) return l.hashes;
    const { blockChars, maxBlocks } = this.o;
    const hashes: number[] = [];
    let h = fnv1a(0x811c9dc5, adapter, 0, adapter.length);
    for (let i = 0; i + blockChars <= prompt.length && hashes.length < maxBlocks; i += blockChars) {
      h = fnv1a(h, prompt, i, i + blockChars);
      hashes.push(h);
    }
    this.last = { prompt, adapter, hashes };
    return hashes;
  }

  /**
   * How many of `hashes`' leading blocks `url` served last: a cache hit needs the whole prefix
   * before it. `peek`: looking is no use; only the replica that served a block renews it.
   */
  held(hashes: readonly number[], url: string, max = hashes.length): number {
    let n = 0;
    while (n < max && n < hashes.length && this.owner.peek(hashes[n]!) === url) n++;
    return n;
  }

  /** The request went to `url`: its blocks are (about to be) cached there. */
  record(hashes: readonly number[], url: string): void {
    for (const h of hashes) this.owner.set(h, url);
  }
}

/** FNV-1a over `s[from, to)`, continuing from `seed`. */
export function fnv1a(seed: number, s: string, from: number, to: number): number {
  let h = seed >>> 0;
  for (let i = from; i < to; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}
