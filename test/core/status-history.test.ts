import { RecentHistory } from '../../src/status/history';
import { naturalOrder } from '../../src/status/status';

describe('RecentHistory (the placement page charts)', () => {
  it('counts into fixed buckets and returns the last ones oldest first, empty buckets included', () => {
    const h = new RecentHistory(10_000, 6);
    h.record('requests', 1_000);
    h.record('requests', 9_999);
    h.record('loads', 12_000, 250);
    h.record('refusals', 35_000);
    const s = h.series(40_000);
    expect(s.map((b) => b.at)).toEqual([-10_000, 0, 10_000, 20_000, 30_000, 40_000]);
    expect(s.map((b) => b.requests)).toEqual([0, 2, 0, 0, 0, 0]);
    expect(s[2]).toMatchObject({ loads: 1, loadMs: 250 });
    expect(s[4]!.refusals).toBe(1);
  });

  it('keeps a bounded number of buckets however long it runs', () => {
    const h = new RecentHistory(1000, 5);
    for (let t = 0; t < 100_000; t += 500) h.record('requests', t);
    expect((h as unknown as { buckets: unknown[] }).buckets.length).toBe(5);
    expect(h.series(99_999).map((b) => b.requests)).toEqual([2, 2, 2, 2, 2]);
  });
});

it('sorts adapter names naturally', () => {
  expect(['cust-10', 'cust-2', 'cust-1', 'cust-11'].sort(naturalOrder)).toEqual([
    'cust-1',
    'cust-2',
    'cust-10',
    'cust-11',
  ]);
});
