import { ResidencyTable } from '../../src/fleet/residency-table';

const T = 1_700_000_000_000;

describe('ResidencyTable (one replica residency, stored flat)', () => {
  it('stores, reads copies, moves last use forward only, and keeps fences', () => {
    const t = new ResidencyTable();
    t.set('a', { state: 'loading', since: T, lastUsed: T, fence: 7 });
    t.set('b', { state: 'static', since: T + 1, lastUsed: T + 1 });
    expect(t.get('a')).toEqual({ state: 'loading', since: T, lastUsed: T, fence: 7 });
    expect(t.get('b')).toEqual({ state: 'static', since: T + 1, lastUsed: T + 1 });
    const copy = t.get('a')!;
    copy.lastUsed = 0;
    expect(t.get('a')!.lastUsed).toBe(T);
    t.touch('a', T + 5);
    t.touch('a', T + 2);
    expect(t.get('a')!.lastUsed).toBe(T + 5);
    t.set('a', { state: 'loaded', since: T + 6, lastUsed: T + 6 });
    expect(t.get('a')).toEqual({ state: 'loaded', since: T + 6, lastUsed: T + 6 });
    expect(t.get('missing')).toBeUndefined();
  });

  it('reuses freed slots and grows past its first capacity, entries intact', () => {
    const t = new ResidencyTable();
    for (let i = 0; i < 1000; i++) t.set(`n${i}`, { state: 'loaded', since: T + i, lastUsed: T + 2 * i });
    for (let i = 0; i < 1000; i += 2) expect(t.delete(`n${i}`)).toBe(true);
    expect(t.delete('n0')).toBe(false);
    for (let i = 0; i < 500; i++) t.set(`m${i}`, { state: 'unloading', since: T - i, lastUsed: T, fence: i });
    expect(t.size).toBe(1000);
    for (let i = 1; i < 1000; i += 2)
      expect(t.get(`n${i}`)).toEqual({ state: 'loaded', since: T + i, lastUsed: T + 2 * i });
    for (let i = 0; i < 500; i++)
      expect(t.get(`m${i}`)).toEqual({ state: 'unloading', since: T - i, lastUsed: T, fence: i });
    // Deleting while iterating, as a poll's reconciliation does.
    for (const [name, res] of t.entries()) if (res.state === 'unloading') t.delete(name);
    expect([...t.names()].every((n) => n.startsWith('n'))).toBe(true);
    expect(t.size).toBe(500);
  });
});
