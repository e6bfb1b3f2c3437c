import type { HolderIndex } from './holder-index';
import type { Fence, Residency, ResidencyState } from './types';

const STATES: readonly ResidencyState[] = ['static', 'loading', 'loaded', 'unloading'];
const CODE: Record<ResidencyState, number> = { static: 0, loading: 1, loaded: 2, unloading: 3 };

/** A stored entry: `fence` while a load or unload is under way, `for` the adapter an unload makes room for. */
export type ResidencyEntry = Residency & { fence?: Fence; for?: string };

/**
 * One replica's residency, adapter name -> {state, since, lastUsed, fence?, for?}, stored flat: the
 * name maps to a slot, and the slot's fields live in typed arrays. An object per entry (plus its
 * two boxed timestamps) cost about 128 bytes; a slot costs the map entry and 17 bytes, which is
 * what kept 64 replicas x 10,000 resident adapters at 42 MB (57 MB with the HolderIndex beside it). Readers get copies, never the
 * stored entry.
 */
export class ResidencyTable {
  private readonly slots = new Map<string, number>();
  /** since, lastUsed per slot. */
  private times = new Float64Array(16);
  private states = new Uint8Array(8);
  /** Fences (and an unload's `for`) exist only while a load or unload is under way: few, so a map. */
  private readonly fences = new Map<number, { fence: Fence; for?: string }>();
  private readonly free: number[] = [];
  /** The last mark of a HolderIndex that found this table holding its adapter, and the slot. */
  private markStamp = 0;
  private markedAt = -1;

  /** `index`: the store-wide holder index this table keeps up to date, if any. */
  constructor(private readonly index?: HolderIndex) {}

  get size(): number {
    return this.slots.size;
  }

  has(name: string): boolean {
    return this.slots.has(name);
  }

  get(name: string): ResidencyEntry | undefined {
    const s = this.slots.get(name);
    if (s === undefined) return undefined;
    const op = this.fences.get(s);
    const res: ResidencyEntry = {
      state: STATES[this.states[s]!]!,
      since: this.times[2 * s]!,
      lastUsed: this.times[2 * s + 1]!,
    };
    if (op !== undefined) {
      res.fence = op.fence;
      if (op.for !== undefined) res.for = op.for;
    }
    return res;
  }

  /** Field reads without a copy (read for every replica on every decision, and every poll). */
  slotOf(name: string): number | undefined {
    return this.slots.get(name);
  }
  stateAt(slot: number): ResidencyState {
    return STATES[this.states[slot]!]!;
  }
  sinceAt(slot: number): number {
    return this.times[2 * slot]!;
  }
  lastUsedAt(slot: number): number {
    return this.times[2 * slot + 1]!;
  }

  /** HolderIndex.mark: this table holds the marked adapter in `slot`. */
  markSlot(stamp: number, slot: number): void {
    this.markStamp = stamp;
    this.markedAt = slot;
  }

  /** The slot of the adapter `stamp` marked (HolderIndex.mark), or undefined: not held here. */
  markedSlot(stamp: number): number | undefined {
    return this.markStamp === stamp ? this.markedAt : undefined;
  }

  names(): IterableIterator<string> {
    return this.slots.keys();
  }

  set(name: string, res: ResidencyEntry): void {
    let s = this.slots.get(name);
    if (s === undefined) {
      s = this.free.pop() ?? this.grow();
      this.slots.set(name, s);
      this.index?.add(name, this, s);
    }
    this.states[s] = CODE[res.state];
    this.times[2 * s] = res.since;
    this.times[2 * s + 1] = res.lastUsed;
    if (res.fence === undefined) this.fences.delete(s);
    else
      this.fences.set(s, res.for === undefined ? { fence: res.fence } : { fence: res.fence, for: res.for });
  }

  delete(name: string): boolean {
    const s = this.slots.get(name);
    if (s === undefined) return false;
    this.slots.delete(name);
    this.index?.remove(name, this);
    this.fences.delete(s);
    this.free.push(s);
    return true;
  }

  /** Moves last use forward (never back). */
  touch(name: string, at: number): void {
    const s = this.slots.get(name);
    if (s !== undefined && this.times[2 * s + 1]! < at) this.times[2 * s + 1] = at;
  }

  /** Copies of every entry; deleting while iterating is safe (Map iteration). */
  *entries(): IterableIterator<[string, ResidencyEntry]> {
    for (const name of this.slots.keys()) yield [name, this.get(name)!];
  }

  *values(): IterableIterator<ResidencyEntry> {
    for (const name of this.slots.keys()) yield this.get(name)!;
  }

  /** The next unused slot, growing the arrays by half when full. */
  private grow(): number {
    const s = this.slots.size + this.free.length;
    if (s >= this.states.length) {
      const cap = Math.ceil(this.states.length * 1.5);
      const states = new Uint8Array(cap);
      states.set(this.states);
      const times = new Float64Array(2 * cap);
      times.set(this.times);
      this.states = states;
      this.times = times;
    }
    return s;
  }
}
