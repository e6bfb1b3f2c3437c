import { LEASE_CEILING, MemoryLeases } from '../../src/fleet/memory-leases';
import { newReplicaRecord, type ReplicaRecord } from '../../src/fleet/replica-record';
import type { ReplicaSpec } from '../../src/fleet/types';

// The in-process store's lease accounting, module by module: every in-flight figure a lease adds
// is taken back once when it ends, renewals touch only the replica and adapters a poll named, and
// reclaiming starts at exactly the age the docs give. The suites through the store let mutants
// of these through (StrykerJS on src/fleet/memory-leases.ts, docs/reliability/mutation-testing.md):
// a release counting up, a renewal of every replica's leases.
const A = 'http://a:8000';
const B = 'http://b:8000';

const spec = (url: string): ReplicaSpec => ({ url, backend: 'vllm', priority: 0 });

function fleet(...urls: string[]) {
  const records = new Map<string, ReplicaRecord>(urls.map((url) => [url, newReplicaRecord(spec(url))]));
  return { records, leases: new MemoryLeases((url) => records.get(url)) };
}

const counts = (r: ReplicaRecord) => ({
  inFlight: r.inFlight,
  byAdapter: Object.fromEntries(r.inFlightByAdapter),
});

describe('MemoryLeases', () => {
  it('counts a lease on its replica and adapter once, and takes both back once when it ends', () => {
    const { records, leases } = fleet(A);
    expect(leases.take({ id: '1', url: A, adapter: 'x', at: 0 })).toBe(true);
    expect(leases.take({ id: '2', url: A, adapter: 'x', at: 0 })).toBe(true);
    expect(leases.take({ id: '3', url: A, adapter: null, at: 0 })).toBe(true);
    // The same id again is refused and counts nothing.
    expect(leases.take({ id: '1', url: A, adapter: 'x', at: 0 })).toBe(false);
    expect(counts(records.get(A)!)).toEqual({ inFlight: 3, byAdapter: { x: 2 } });

    expect(leases.end('1')).toMatchObject({ id: '1', adapter: 'x' });
    expect(counts(records.get(A)!)).toEqual({ inFlight: 2, byAdapter: { x: 1 } });
    expect(leases.end('1')).toBeUndefined();
    expect(counts(records.get(A)!)).toEqual({ inFlight: 2, byAdapter: { x: 1 } });
    leases.end('3');
    expect(counts(records.get(A)!)).toEqual({ inFlight: 1, byAdapter: { x: 1 } });
    leases.end('2');
    // The adapter's entry goes with its last lease: it reads idle, not "0 in flight".
    expect(counts(records.get(A)!)).toEqual({ inFlight: 0, byAdapter: {} });
    expect(leases.size).toBe(0);
  });

  it('a lease taken before its replica was registered is counted nowhere, so uncounted nowhere', () => {
    const records = new Map<string, ReplicaRecord>();
    const leases = new MemoryLeases((url) => records.get(url));
    expect(leases.take({ id: '1', url: A, adapter: 'x', at: 0 })).toBe(true);
    records.set(A, newReplicaRecord(spec(A)));
    expect(leases.take({ id: '2', url: A, adapter: 'x', at: 0 })).toBe(true);
    expect(counts(records.get(A)!)).toEqual({ inFlight: 1, byAdapter: { x: 1 } });
    leases.end('1');
    expect(counts(records.get(A)!)).toEqual({ inFlight: 1, byAdapter: { x: 1 } });
    leases.end('2');
    expect(counts(records.get(A)!)).toEqual({ inFlight: 0, byAdapter: {} });
  });

  it("renews only the leases of the polled replica's named adapters", () => {
    const { leases } = fleet(A, B);
    leases.take({ id: 'a-x', url: A, adapter: 'x', at: 0 });
    leases.take({ id: 'a-y', url: A, adapter: 'y', at: 0 });
    leases.take({ id: 'a-base', url: A, adapter: null, at: 0 });
    leases.take({ id: 'b-x', url: B, adapter: 'x', at: 0 });
    leases.renew(A, ['x'], 900);
    // Max age 1,000 ms at 1,000: only A's lease for x was renewed (at 900), the rest are reclaimed.
    const reclaimed = leases.expire(1000, 1000).map((e) => e.id);
    expect(reclaimed.sort()).toEqual(['a-base', 'a-y', 'b-x']);
    expect(leases.size).toBe(1);
  });

  it('reclaims a lease at exactly its max age, and at exactly the ceiling however renewed', () => {
    const { records, leases } = fleet(A);
    leases.take({ id: 'old', url: A, adapter: 'x', at: 0 });
    expect(leases.expire(999, 1000)).toEqual([]);
    expect(leases.expire(1000, 1000)).toEqual([
      { id: 'old', lease: { id: 'old', url: A, adapter: 'x', at: 0 }, why: 'held over 1000 ms' },
    ]);
    expect(counts(records.get(A)!)).toEqual({ inFlight: 0, byAdapter: {} });

    const ceiling = LEASE_CEILING * 1000;
    leases.take({ id: 'busy', url: A, adapter: 'x', at: 0 });
    leases.renew(A, ['x'], ceiling - 1);
    expect(leases.expire(ceiling - 1, 1000)).toEqual([]);
    expect(leases.expire(ceiling, 1000)).toEqual([
      { id: 'busy', lease: { id: 'busy', url: A, adapter: 'x', at: 0 }, why: `taken over ${ceiling} ms ago` },
    ]);
    expect(counts(records.get(A)!)).toEqual({ inFlight: 0, byAdapter: {} });
  });
});
