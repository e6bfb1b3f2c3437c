import { LRUCache } from 'lru-cache';
import { Lru } from '../../src/lru';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { seededRandom } from '../../src/random';

// Lru replaced lru-cache's LRUCache where the bound is large (a pure performance change): the
// same operations give the same answers and leave the same entries, whatever the sequence.
describe('Lru answers as lru-cache does', () => {
  it.each([1, 2, 3, 8, 64])('with max %i, over random get/peek/has/set/delete sequences', (max) => {
    for (let seed = 1; seed <= 50; seed++) {
      const r = seededRandom(seed);
      const ours = new Lru<number, number>(max);
      const theirs = new LRUCache<number, number>({ max });
      // Each step's answer and size, from both: compared once per seed (cheap, and the first
      // difference shows its step).
      const a: unknown[] = [];
      const b: unknown[] = [];
      // Past 400 steps with a large bound: the map rehashes under the evicting iterator.
      for (let i = 0; i < 400 + max * 40; i++) {
        const k = Math.floor(r() * (max * 2 + 1));
        const op = Math.floor(r() * 5);
        const answer = (x: unknown, y: unknown) => {
          a.push(x);
          b.push(y);
        };
        if (op === 0) answer(ours.get(k), theirs.get(k));
        else if (op === 1) answer(ours.peek(k), theirs.peek(k));
        else if (op === 2) answer(ours.has(k), theirs.has(k));
        else if (op === 3) answer(ours.set(k, i).size, theirs.set(k, i).size);
        else answer(ours.delete(k), theirs.delete(k));
        a.push(`step ${i} op ${op} key ${k} size ${ours.size}`);
        b.push(`step ${i} op ${op} key ${k} size ${theirs.size}`);
      }
      expect(a).toEqual(b);
      for (let k = 0; k <= max * 2; k++) expect(ours.peek(k)).toBe(theirs.peek(k));
      // Listed in the same order (the most recently used first).
      expect(ours.entries()).toEqual([...theirs.entries()]);
      expect(ours.values()).toEqual([...theirs.values()]);
    }
  });

  // The prefix index's use on every request: the same few prompt blocks renewed, far below its
  // bound. Each renewal was a Map delete + set, and a Map rehashes as the deleted slots fill; a
  // held iterator kept every table the Map had rehashed into since (measured: 16 MB after these
  // renewals, about 160 bytes a request in the plugin server, reclaimed never).
  it('holds what it holds, not a history: renewals below the bound leave the heap as it was', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as (o?: { type: 'major' }) => void;
    const lru = new Lru<number, string>(131072);
    for (let k = 0; k < 3; k++) lru.set(0x9e3779b9 + k, 'http://replica-a:8000');
    gc({ type: 'major' });
    const before = getHeapStatistics().used_heap_size;
    for (let i = 0; i < 200_000; i++) lru.set(0x9e3779b9 + (i % 3), 'http://replica-a:8000');
    gc({ type: 'major' });
    const grown = getHeapStatistics().used_heap_size - before;
    expect(lru.size).toBe(3);
    expect(grown).toBeLessThan(1 << 20);
  });

  it('refuses a bound below one', () => {
    expect(() => new Lru(0)).toThrow(/at least 1/);
  });
});
