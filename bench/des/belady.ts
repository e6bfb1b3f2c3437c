import type { PolicyResult } from './run';
/**
 * Belady's offline optimum (MIN) for a cache of `capacity` adapters over the request sequence:
 * on a miss with a full cache, evict the adapter used again furthest in the future. The fleet's
 * R x N slots can do no better than one cache of R*N slots, so this bounds the loads any
 * policy needs (copies of a hot adapter on several replicas only add loads).
 */
export function beladyMisses(sequence: readonly string[], capacity: number): number {
  const n = sequence.length;
  const nextUse = nextUses(sequence);
  const cached = new Map<string, number>(); // adapter -> its next use
  // Max-heap of [nextUse, adapter]; stale entries (next use changed) are skipped on pop.
  const heap: [number, string][] = [];
  const push = (e: [number, string]) => {
    heap.push(e);
    let i = heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (heap[p]![0] >= heap[i]![0]) break;
      [heap[p], heap[i]] = [heap[i]!, heap[p]!];
      i = p;
    }
  };
  const pop = (): [number, string] => {
    const top = heap[0]!;
    const end = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = end;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && heap[l]![0] > heap[m]![0]) m = l;
        if (r < heap.length && heap[r]![0] > heap[m]![0]) m = r;
        if (m === i) break;
        [heap[m], heap[i]] = [heap[i]!, heap[m]!];
        i = m;
      }
    }
    return top;
  };
  let misses = 0;
  for (let i = 0; i < n; i++) {
    const a = sequence[i]!;
    if (!cached.has(a)) {
      misses++;
      if (cached.size >= capacity) {
        for (;;) {
          const [use, victim] = pop();
          if (cached.get(victim) === use) {
            cached.delete(victim);
            break;
          }
        }
      }
    }
    cached.set(a, nextUse[i]!);
    push([nextUse[i]!, a]);
  }
  return misses;
}

/**
 * Belady's MIN when an adapter cannot be unloaded while it has requests in flight, as on a
 * real replica: request i holds its adapter from `start[i]` to `end[i]` (the oracle's service
 * intervals, the shortest any policy gets). On a miss with every slot pinned the request waits
 * until the first pin ends, and the requests behind it wait too, so the cache never holds more
 * than `capacity` and the requests are served in their order: this is one demand-paging run of
 * the sequence, so it can never be below plain Belady. A reference, not a proven bound:
 * furthest-next-use is optimal without pinning; with it, it is a strong heuristic.
 */
export function pinnedBeladyMisses(
  sequence: readonly string[],
  start: readonly number[],
  end: readonly number[],
  capacity: number,
): number {
  return pinnedMisses(sequence, start, end, capacity, nextUses(sequence));
}

/**
 * The same demand-paging run with an online choice: the least recently used unpinned adapter
 * goes. What a cache that cannot see the future needs on the same pinned slots, as one cache.
 */
export function pinnedLruMisses(
  sequence: readonly string[],
  start: readonly number[],
  end: readonly number[],
  capacity: number,
): number {
  // The victim has the highest key: the lowest index of last use.
  return pinnedMisses(
    sequence,
    start,
    end,
    capacity,
    sequence.map((_, i) => -i),
  );
}

/** Demand paging with pinning: on a miss the unpinned adapter with the highest `key` (as of its last use) goes. */
function pinnedMisses(
  sequence: readonly string[],
  start: readonly number[],
  end: readonly number[],
  capacity: number,
  key: readonly number[],
): number {
  const n = sequence.length;
  const cached = new Map<string, number>(); // adapter -> its eviction key, as of its last use
  const pins = new Map<string, number>();
  // Pins taken, sorted by end time descending (the next to end is last).
  const ending: [number, string][] = [];
  const releaseUntil = (t: number) => {
    while (ending.length > 0 && ending.at(-1)![0] <= t) {
      const a = ending.pop()![1];
      pins.set(a, pins.get(a)! - 1);
    }
  };
  let misses = 0;
  let now = -Infinity;
  for (let i = 0; i < n; i++) {
    const a = sequence[i]!;
    now = Math.max(now, start[i]!);
    releaseUntil(now);
    if (!cached.has(a)) {
      misses++;
      while (cached.size >= capacity) {
        let victim: string | undefined;
        let highest = -Infinity;
        for (const [name, k] of cached) {
          if ((pins.get(name) ?? 0) > 0) continue;
          if (victim === undefined || k > highest) {
            highest = k;
            victim = name;
          }
        }
        if (victim !== undefined) {
          cached.delete(victim);
          break;
        }
        // Every slot pinned: wait for the first request in flight to end.
        now = ending.at(-1)![0];
        releaseUntil(now);
      }
    }
    cached.set(a, key[i]!);
    // Served from `now`: a request whose interval ended while it waited pins nothing.
    if (end[i]! > now) {
      pins.set(a, (pins.get(a) ?? 0) + 1);
      const e = end[i]!;
      let lo = 0;
      let hi = ending.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (ending[mid]![0] > e) lo = mid + 1;
        else hi = mid;
      }
      ending.splice(lo, 0, [e, a]);
    }
  }
  return misses;
}

/** For each request, the index of the next request for the same adapter (Infinity: none). */
function nextUses(sequence: readonly string[]): number[] {
  const next = new Array<number>(sequence.length);
  const last = new Map<string, number>();
  for (let i = sequence.length - 1; i >= 0; i--) {
    next[i] = last.get(sequence[i]!) ?? Infinity;
    last.set(sequence[i]!, i);
  }
  return next;
}

/** Keeps the requests a policy served (`end[i]` finite), with the oracle's intervals for them. */
function served(
  sequence: readonly string[],
  end: readonly number[],
  oracle: { start: readonly number[]; end: readonly number[] },
) {
  const keep = (_: unknown, i: number) => Number.isFinite(end[i]!);
  return { seq: sequence.filter(keep), start: oracle.start.filter(keep), end: oracle.end.filter(keep) };
}

/**
 * Belady's bounds over the requests one policy served, so that a policy refusing requests is
 * compared with the optimum for the same requests, not for all of them. `oracle` gives the
 * service intervals for the pinned variant (it serves every request).
 */
function boundsOnServed(
  sequence: readonly string[],
  end: readonly number[],
  oracle: { start: readonly number[]; end: readonly number[] },
  capacity: number,
): { belady: number; pinned: number } {
  const s = served(sequence, end, oracle);
  return {
    belady: beladyMisses(s.seq, capacity),
    pinned: pinnedBeladyMisses(s.seq, s.start, s.end, capacity),
  };
}

/** The online reference (LRU with the same pins) over the requests a policy served. */
function lruOnServed(
  sequence: readonly string[],
  end: readonly number[],
  oracle: { start: readonly number[]; end: readonly number[] },
  capacity: number,
): number {
  const s = served(sequence, end, oracle);
  return pinnedLruMisses(s.seq, s.start, s.end, capacity);
}

/**
 * Sets each result's Belady bounds over the requests it served, then drops its intervals. A
 * policy that refused nothing served every request: `all` (the bounds over all requests) is its.
 * Results `lruFor` names also get the online reference.
 */
export function setServedBounds(
  results: PolicyResult[],
  oracle: PolicyResult,
  adapters: string[],
  slots: number,
  all?: { belady: number; pinned: number },
  lruFor?: (policy: string) => boolean,
): void {
  for (const r of results) {
    if (r !== oracle) {
      const b =
        all && r.errors === 0 ? all : boundsOnServed(adapters, r.intervals!.end, oracle.intervals!, slots);
      r.belady = b.belady;
      r.pinnedBelady = b.pinned;
      if (lruFor?.(r.policy)) r.pinnedLru = lruOnServed(adapters, r.intervals!.end, oracle.intervals!, slots);
    }
  }
  for (const r of results) delete r.intervals;
}
