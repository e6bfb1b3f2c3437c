/**
 * Unit test of HeldLeases (src/fleet/redis/held-leases.ts, one module), written against the
 * survivors of its mutation run (docs/reliability/mutation-testing.md): a lease the shared store
 * reclaimed is forgotten here and its local copy released, a restore of local leases only leaves
 * the shared ones alone, what each store reclaimed is forgotten only for the copy it holds, and a
 * predecessor's releases are adopted. The shared store is a recording fake; the local one is real.
 */
import { VirtualClock } from '../../src/clock';
import { LEASE_CEILING } from '../../src/fleet/memory-leases';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { HeldLeases } from '../../src/fleet/redis/held-leases';
import { RETAKE_BATCH } from '../../src/fleet/store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { Lease } from '../../src/fleet/types';

const U = 'http://r1:8000';
const DAY = 24 * 3600_000;
const lease = (id: string, at = 1): Lease => ({ id, url: U, adapter: 'a', at });

/** A shared store that records its calls; `reclaimed` leases are refused on retake. */
function fakeShared(reclaimed: string[] = [], withRetake = true) {
  const calls: string[] = [];
  const shared = {
    acquire: async (l: Lease) => void calls.push(`acquire ${l.id}`),
    release: async (id: string) => void calls.push(`release ${id}`),
    ...(withRetake && {
      retake: async (ls: Lease[]) => {
        calls.push(`retake ${ls.map((l) => l.id).join(',')}`);
        return ls.filter((l) => reclaimed.includes(l.id)).map((l) => l.id);
      },
    }),
  } as unknown as SharedStore;
  return { shared, calls };
}

async function setup() {
  const clock = new VirtualClock();
  const local = new MemoryFleetStore();
  await local.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  const held = new HeldLeases(local, clock);
  /** A lease admitted while degraded: in the local store and held as local. */
  const takeLocal = async (id: string, at = 1) => {
    await local.acquire(lease(id, at));
    held.mine.set(id, { lease: lease(id, at), shared: false });
  };
  return { clock, local, held, takeLocal };
}

describe('HeldLeases.restore', () => {
  it('a local lease the shared store reclaimed is forgotten and its local copy released', async () => {
    const { local, held, takeLocal } = await setup();
    await takeLocal('L1');
    await takeLocal('L2');
    const { shared, calls } = fakeShared(['L1']);
    await held.restore(shared, false);
    expect(calls).toEqual(['retake L1,L2']); // one call for both
    expect([...held.mine.keys()]).toEqual(['L2']);
    expect(held.mine.get('L2')!.shared).toBe(true);
    // Both leave the local store: L1 reclaimed, L2 moved to the shared one.
    expect(await local.inFlightTotal()).toBe(0);
  });

  it('a shared lease the shared store reclaimed is forgotten, and nothing is released locally for it', async () => {
    const { local, held, takeLocal } = await setup();
    await takeLocal('L1');
    held.mine.set('S1', { lease: lease('S1'), shared: true });
    const { shared } = fakeShared(['S1', 'L1']);
    await held.restore(shared, false);
    expect([...held.mine.keys()]).toEqual([]);
    expect(await local.inFlightTotal()).toBe(0);
  });

  it('only local ones: a shared lease is not taken again', async () => {
    const { held, takeLocal } = await setup();
    held.mine.set('S1', { lease: lease('S1'), shared: true });
    await takeLocal('L1');
    const { shared, calls } = fakeShared();
    await held.restore(shared, true);
    expect(calls).toEqual(['retake L1']);
  });

  it('one call per RETAKE_BATCH leases, in the order held; one ended before its batch is sent is not taken', async () => {
    const { held, takeLocal } = await setup();
    const n = RETAKE_BATCH + 2;
    for (let i = 0; i < n; i++) await takeLocal(`L${i}`);
    const { shared, calls } = fakeShared([`L${RETAKE_BATCH + 1}`]);
    const retake = shared.retake!.bind(shared);
    shared.retake = async (ls) => {
      held.mine.delete(`L${RETAKE_BATCH}`); // its request ended while the first batch was taken
      return retake(ls);
    };
    await held.restore(shared, false);
    const ids = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `L${from + i}`);
    expect(calls).toEqual([`retake ${ids(0, RETAKE_BATCH).join(',')}`, `retake L${RETAKE_BATCH + 1}`]);
    expect(held.mine.size).toBe(RETAKE_BATCH);
    expect([...held.mine.values()].every((m) => m.shared)).toBe(true);
  });

  it('a shared store without retake: acquired again, and kept', async () => {
    const { held, takeLocal } = await setup();
    await takeLocal('L1');
    const { shared, calls } = fakeShared([], false);
    await held.restore(shared, false);
    expect(calls).toEqual(['acquire L1']);
    expect(held.mine.get('L1')!.shared).toBe(true);
  });

  it('a lease whose request ended while it was being taken again is released there', async () => {
    const { held, takeLocal } = await setup();
    await takeLocal('L1');
    const { shared, calls } = fakeShared();
    const retake = shared.retake!.bind(shared);
    shared.retake = async (ls) => {
      held.mine.delete('L1'); // its request ended meanwhile
      return retake(ls);
    };
    await held.restore(shared, false);
    expect(calls).toEqual(['retake L1', 'release L1']);
    expect(held.mine.size).toBe(0);
  });
});

describe('HeldLeases.forgetExpired and adopt', () => {
  it('forgets a lease only for the store that holds its copy, or after a day', async () => {
    const { held } = await setup();
    for (const [id, shared] of [
      ['L1', false],
      ['S1', true],
      ['L2', false],
      ['S2', true],
    ] as const)
      held.mine.set(id, { lease: lease(id, 1000), shared });
    held.mine.set('old', { lease: lease('old', 1), shared: true });
    // The local store reclaimed S1's id and L1; the shared one L2's id and S2 (both, one this node forgot): only L1 and S2 go.
    held.forgetExpired(
      [lease('L1'), lease('S1'), lease('gone')],
      [lease('L2'), lease('S2'), lease('gone')],
      DAY,
      DAY,
    );
    expect([...held.mine.keys()].sort()).toEqual(['L2', 'S1', 'old']);
    // A day after it was taken, whatever happened.
    held.forgetExpired([], [], 1 + DAY, DAY);
    expect([...held.mine.keys()].sort()).toEqual(['L2', 'S1']);
  });

  it('forgets a lease LEASE_CEILING max ages after it was taken: every store reclaimed it by then', async () => {
    const { held } = await setup();
    held.mine.set('S1', { lease: lease('S1', 1000), shared: true });
    held.mine.set('L1', { lease: lease('L1', 1001), shared: false });
    held.forgetExpired([], [], 1000 + LEASE_CEILING * 100 - 1, 100);
    expect([...held.mine.keys()].sort()).toEqual(['L1', 'S1']);
    held.forgetExpired([], [], 1000 + LEASE_CEILING * 100, 100);
    expect([...held.mine.keys()]).toEqual(['L1']);
  });

  it("takes a predecessor's releases still to replay, and they are replayed once", async () => {
    const { held, clock, local } = await setup();
    const pred = new HeldLeases(local, clock);
    pred.pendingReleases.add('R1');
    held.adopt(pred);
    expect([...held.pendingReleases]).toEqual(['R1']);
    expect(pred.pendingReleases.size).toBe(0);
    const { shared, calls } = fakeShared();
    await held.replayReleases(shared);
    expect(calls).toEqual(['release R1']);
    expect(held.pendingReleases.size).toBe(0);
  });
});
