/**
 * Unit test of one replica's residency table (src/fleet/residency-table.ts), written against the
 * survivors of its mutation run (docs/reliability/mutation-testing.md): the slot-level reads give
 * each slot's own last use; an entry's copy carries a fence and an unload's `for` only while
 * stored, never as a field left undefined; a fence cleared by a set without one is gone.
 */
import { ResidencyTable } from '../../src/fleet/residency-table';

describe('ResidencyTable', () => {
  it("reads each slot's own since and last use", () => {
    const t = new ResidencyTable();
    t.set('a', { state: 'loaded', since: 10, lastUsed: 11 });
    t.set('b', { state: 'loading', since: 20, lastUsed: 21 });
    t.set('c', { state: 'static', since: 30, lastUsed: 31 });
    const reads = ['a', 'b', 'c'].map((n) => {
      const s = t.slotOf(n)!;
      return [t.stateAt(s), t.sinceAt(s), t.lastUsedAt(s)];
    });
    expect(reads).toEqual([
      ['loaded', 10, 11],
      ['loading', 20, 21],
      ['static', 30, 31],
    ]);
  });

  it('copies carry a fence and `for` only while stored', () => {
    const t = new ResidencyTable();
    t.set('a', { state: 'unloading', since: 1, lastUsed: 2, fence: 7, for: 'b' });
    expect(t.get('a')).toStrictEqual({ state: 'unloading', since: 1, lastUsed: 2, fence: 7, for: 'b' });
    t.set('a', { state: 'loading', since: 3, lastUsed: 3, fence: 8 });
    expect(t.get('a')).toStrictEqual({ state: 'loading', since: 3, lastUsed: 3, fence: 8 });
    expect('for' in t.get('a')!).toBe(false);
    t.set('a', { state: 'loaded', since: 4, lastUsed: 4 });
    expect(t.get('a')).toStrictEqual({ state: 'loaded', since: 4, lastUsed: 4 });
    expect('fence' in t.get('a')!).toBe(false);
  });
});
