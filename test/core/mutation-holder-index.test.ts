/**
 * Unit test of the holder index (src/fleet/holder-index.ts, with the residency tables it marks),
 * written against the survivors of its mutation run (docs/reliability/mutation-testing.md): every
 * table holding an adapter is marked with its slot, the second and later holders too; a table
 * removed is marked no more, the others are, whichever position it had; removing a table that
 * does not hold the adapter, or an adapter no table holds, changes nothing.
 */
import { HolderIndex } from '../../src/fleet/holder-index';
import { ResidencyTable } from '../../src/fleet/residency-table';

const loaded = { state: 'loaded' as const, since: 1, lastUsed: 1 };

/** Tables `n` of them on one index, and the slot each table's mark gives for `name`. */
function fleet(n: number) {
  const index = new HolderIndex();
  const tables = Array.from({ length: n }, () => new ResidencyTable(index));
  const holders = (name: string) => {
    const mark = index.mark(name);
    return tables.map((t) => t.markedSlot(mark));
  };
  return { index, tables, holders };
}

describe('HolderIndex', () => {
  it('marks every table holding the adapter, with its slot there, and no other', () => {
    const { tables, holders } = fleet(3);
    tables[0]!.set('other', loaded);
    tables[0]!.set('x', loaded);
    tables[1]!.set('x', loaded);
    tables[2]!.set('y', loaded);
    expect(holders('x')).toEqual([1, 0, undefined]);
    expect(holders('y')).toEqual([undefined, undefined, 0]);
    expect(holders('z')).toEqual([undefined, undefined, undefined]);
  });

  it('a table removed is marked no more; the others still are, from any position', () => {
    for (const gone of [0, 1, 2]) {
      const { tables, holders } = fleet(3);
      for (const t of tables) t.set('x', loaded);
      tables[gone]!.delete('x');
      const want: (number | undefined)[] = [0, 0, 0];
      want[gone] = undefined;
      expect([gone, ...holders('x')]).toEqual([gone, ...want]);
      tables[gone]!.set('x', loaded);
      expect(holders('x')).toEqual([0, 0, 0]);
    }
  });

  it('the last holder removed, then added again, is marked', () => {
    const { tables, holders } = fleet(2);
    tables[1]!.set('x', loaded);
    tables[1]!.delete('x');
    expect(holders('x')).toEqual([undefined, undefined]);
    tables[0]!.set('x', loaded);
    expect(holders('x')).toEqual([0, undefined]);
  });

  it('removing a table that does not hold the adapter, or an unknown adapter, changes nothing', () => {
    const { index, tables, holders } = fleet(3);
    tables[0]!.set('x', loaded);
    tables[1]!.set('x', loaded);
    index.remove('x', tables[2]!);
    index.remove('nobody', tables[0]!);
    expect(holders('x')).toEqual([0, 0, undefined]);
  });

  it('each mark is new: an old mark finds nothing', () => {
    const { index, tables } = fleet(1);
    tables[0]!.set('x', loaded);
    const first = index.mark('x');
    const second = index.mark('y');
    expect(second).not.toBe(first);
    expect(tables[0]!.markedSlot(first)).toBe(0);
    expect(tables[0]!.markedSlot(second)).toBeUndefined();
  });
});
