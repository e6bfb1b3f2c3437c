/**
 * A least-recently-used map of at most `max` entries. The same answers as lru-cache's LRUCache
 * for the calls here (`get` renews an entry, `peek` and `has` do not, `set` renews or adds and
 * then drops the least recently used past `max`, `entries` and `values` list the most recently
 * used first; test/core/lru.test.ts runs both on the same operations), but it costs what it
 * holds, not its bound: LRUCache fills arrays of `max` slots when made (29 ms for the prefix
 * index's 131,072), paid by every runtime, router and store made, used or not.
 *
 * Recency is a doubly linked list of slots in parallel arrays, the Map only finding a key's slot:
 * a renewal moves a slot and writes nothing to the Map. It was the Map's own insertion order
 * (a renewal a delete and a set) evicting through one held iterator, and that iterator kept every
 * table the Map had rehashed into since it was made (deleted slots fill a table, then it
 * rehashes): below the bound nothing advances it, so the prefix index, renewing a prompt's
 * blocks on every request, kept about 160 bytes a request for good, and each collection of the
 * young generation copied them (test/core/lru.test.ts, "holds what it holds").
 */
export class Lru<K, V> {
  /** Each key's slot. */
  private readonly slotOf = new Map<K, number>();
  private readonly keys: (K | undefined)[] = [];
  private readonly vals: (V | undefined)[] = [];
  /** Per slot, the next more recently used slot (-1: none, the newest). */
  private newer = new Int32Array(8);
  /** Per slot, the next less recently used slot (-1: none, the oldest). */
  private older = new Int32Array(8);
  private newest = -1;
  private oldest = -1;
  /** Slots a delete emptied, for the next keys. */
  private readonly free: number[] = [];

  constructor(readonly max: number) {
    if (!(max >= 1)) throw new Error(`Lru max must be at least 1, got ${max}`);
  }

  get size(): number {
    return this.slotOf.size;
  }

  /** The value, made the most recently used. */
  get(key: K): V | undefined {
    const s = this.slotOf.get(key);
    if (s === undefined) return undefined;
    this.renew(s);
    return this.vals[s];
  }

  /** The value, its recency unchanged. */
  peek(key: K): V | undefined {
    const s = this.slotOf.get(key);
    return s === undefined ? undefined : this.vals[s];
  }

  has(key: K): boolean {
    return this.slotOf.has(key);
  }

  /** Sets `key` as the most recently used; the least recently used goes past `max`. */
  set(key: K, value: V): this {
    let s = this.slotOf.get(key);
    if (s !== undefined) {
      this.vals[s] = value;
      this.renew(s);
      return this;
    }
    if (this.slotOf.size >= this.max) {
      // Full: the least recently used goes, and its slot takes the new key.
      s = this.oldest;
      this.unlink(s);
      this.slotOf.delete(this.keys[s] as K);
    } else s = this.free.pop() ?? this.newSlot();
    this.keys[s] = key;
    this.vals[s] = value;
    this.slotOf.set(key, s);
    this.linkNewest(s);
    return this;
  }

  delete(key: K): boolean {
    const s = this.slotOf.get(key);
    if (s === undefined) return false;
    this.slotOf.delete(key);
    this.unlink(s);
    // Emptied, so that the slot holds nothing of the key or its value.
    this.keys[s] = undefined;
    this.vals[s] = undefined;
    this.free.push(s);
    return true;
  }

  /** Key and value pairs, the most recently used first (as LRUCache's `entries`). */
  entries(): [K, V][] {
    const out: [K, V][] = [];
    for (let s = this.newest; s !== -1; s = this.older[s]!) out.push([this.keys[s] as K, this.vals[s] as V]);
    return out;
  }

  /** The values, the most recently used first (as LRUCache's `values`). */
  values(): V[] {
    const out: V[] = [];
    for (let s = this.newest; s !== -1; s = this.older[s]!) out.push(this.vals[s] as V);
    return out;
  }

  private newSlot(): number {
    const s = this.keys.length;
    this.keys.push(undefined);
    this.vals.push(undefined);
    if (s >= this.newer.length) {
      const grow = (a: Int32Array) => {
        const b = new Int32Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.newer = grow(this.newer);
      this.older = grow(this.older);
    }
    return s;
  }

  private renew(s: number): void {
    if (s === this.newest) return;
    this.unlink(s);
    this.linkNewest(s);
  }

  private unlink(s: number): void {
    const n = this.newer[s]!;
    const o = this.older[s]!;
    if (n === -1) this.newest = o;
    else this.older[n] = o;
    if (o === -1) this.oldest = n;
    else this.newer[o] = n;
  }

  private linkNewest(s: number): void {
    this.older[s] = this.newest;
    this.newer[s] = -1;
    if (this.newest === -1) this.oldest = s;
    else this.newer[this.newest] = s;
    this.newest = s;
  }
}
