/**
 * AdapterStats alone (src/adapters/stats.ts): the survivors of `npm run mutation:safety -- stats`
 * (docs/reliability/mutation-testing.md): each request counts one, decayed by the time since the
 * last, and the capacity is the number of adapters kept.
 */
import { AdapterStats } from '../../src/adapters/stats';

describe('AdapterStats', () => {
  it('counts each request once, decayed from the last one seen', () => {
    const s = new AdapterStats(1000);
    s.observe('a', 5000);
    s.observe('a', 5000);
    expect(s.frequency('a', 5000)).toBe(2);
    s.observe('a', 6000);
    expect(s.frequency('a', 6000)).toBe(2);
    expect(s.frequency('a', 7000)).toBe(1);
  });

  it('keeps `capacity` adapters, forgetting the least recently seen', () => {
    const s = new AdapterStats(1000, 2);
    s.observe('a', 0);
    s.observe('b', 0);
    expect(s.frequency('a', 0)).toBe(1);
    s.observe('c', 0);
    expect([s.frequency('a', 0), s.frequency('b', 0), s.frequency('c', 0)]).toEqual([0, 1, 1]);
  });
});
