/**
 * A least-recently-used map of at most `max` entries, on a Map's insertion order: the first key
 * is the least recently used. The same answers as lru-cache's LRUCache for the calls here (`get`
 * renews an entry, `peek` and `has` do not, `set` renews or adds and then drops the least
 * recently used past `max`, `entries` and `values` list the most recently used first;
 * test/core/lru.test.ts runs both on the same operations), but it
 * costs what it holds, not its bound: LRUCache fills arrays of `max` slots when made (29 ms for
 * the prefix index's 131,072), paid by every runtime, router and store made, used or not.
 */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  // Held across calls: a Map keeps a deleted entry's slot until it rehashes, and a fresh
  // keys().next() skips every such slot before the first live one, so evicting through a new
  // iterator each time cost O(slots) per set once the map was full (55 µs a set at 131,072, the
  // prefix index's bound). A live iterator passes each slot once: everything before it was
  // evicted through it, so its next live key is the least recently used.
  private oldest: Iterator<K> = this.map.keys();

  constructor(readonly max: number) {
    if (!(max >= 1)) throw new Error(`Lru max must be at least 1, got ${max}`);
  }

  get size(): number {
    return this.map.size;
  }

  /** The value, made the most recently used. */
  get(key: K): V | undefined {
    if (!this.map.has(key)) return undefined;
    const v = this.map.get(key) as V;
    this.map.delete(key);
    this.map.set(key, v);
    return v;
  }

  /** The value, its recency unchanged. */
  peek(key: K): V | undefined {
    return this.map.get(key);
  }

  has(key: K): boolean {
    return this.map.has(key);
  }

  /** Sets `key` as the most recently used; the least recently used goes past `max`. */
  set(key: K, value: V): this {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.max) this.map.delete(this.nextOldest());
    return this;
  }

  delete(key: K): boolean {
    return this.map.delete(key);
  }

  /** Key and value pairs, the most recently used first (as LRUCache's `entries`). */
  entries(): [K, V][] {
    return [...this.map.entries()].reverse();
  }

  /** The values, the most recently used first (as LRUCache's `values`). */
  values(): V[] {
    return [...this.map.values()].reverse();
  }

  private nextOldest(): K {
    // Never done here: it is asked only while the map holds more than `max` >= 1 keys, and
    // every live key lies after it.
    return this.oldest.next().value as K;
  }
}
