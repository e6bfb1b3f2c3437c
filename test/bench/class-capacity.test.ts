import { beladyMisses } from '../../bench/des/belady';
import { lfuMissFlags, lruMissFlags } from '../../bench/des/class-capacity';

/**
 * The online caches the classes' capacity diagnosis (bench/des/class-capacity.ts) sets beside
 * Belady's minimum: one cache of the fleet's slots, least recently or least frequently used going.
 */
describe('class capacity: online cache references', () => {
  it('least recently used: the adapter unused longest goes', () => {
    // Two slots, a b a c b: c evicts b (a was used after it), so b loads again.
    expect(lruMissFlags(['a', 'b', 'a', 'c', 'b'], 2)).toEqual([true, true, false, true, true]);
  });

  it('least frequently used: the adapter asked for least goes, the least recent among equals', () => {
    // Two slots, a a b c a b: c evicts b (asked for once, a twice); then b, asked for twice now,
    // evicts c (once).
    expect(lfuMissFlags(['a', 'a', 'b', 'c', 'a', 'b'], 2)).toEqual([true, false, true, true, false, true]);
    // Recency alone drops the popular one: a asked for three times, then two new names.
    const seq = ['a', 'a', 'a', 'b', 'c', 'a'];
    expect(lruMissFlags(seq, 2).at(-1)).toBe(true);
    expect(lfuMissFlags(seq, 2).at(-1)).toBe(false);
  });

  it("neither loads fewer than Belady's minimum, and each loads every adapter's first use", () => {
    const seq = ['a', 'b', 'c', 'a', 'd', 'b', 'a', 'c', 'c', 'e', 'a', 'b', 'a', 'f', 'a', 'b'];
    for (const capacity of [1, 2, 3, 5])
      for (const flags of [lruMissFlags(seq, capacity), lfuMissFlags(seq, capacity)]) {
        expect(flags.filter(Boolean).length).toBeGreaterThanOrEqual(beladyMisses(seq, capacity));
        seq.forEach((a, i) => {
          if (seq.indexOf(a) === i) expect(flags[i]).toBe(true);
        });
      }
  });
});
