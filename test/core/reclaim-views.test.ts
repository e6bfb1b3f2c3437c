/**
 * Unit test of the views FailoverFleetStore returns once the shared state was found emptied
 * (src/fleet/redis/failover-store.ts `views`, `viewsAndLease`, `reclaim`): the shared side is a
 * stand-in over an in-process store for the emptied Redis, its replica registered again by another
 * node (health unknown), and this node's registration (which hands on its downs) held until the
 * test lets it through. The
 * simulation's seed 542328: a FLUSHALL at 1,877 ms; node 1's request at 1,957 ms found it and began
 * the reclaim that hands on the replicas node 1 had polled down (replica-2, at 1,087 ms); two of
 * its requests held for the TTFT objective woke at 1,961 ms, read every replica `unknown` while
 * that reclaim was under way, were decided on replica-2 and one was proxied there at 1,987 ms.
 */
import type { Clock } from '../../src/clock';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { Lease, ReplicaSpec } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';

const U = 'http://replica-2:8000';
const SPEC: ReplicaSpec = { url: U, backend: 'vllm', priority: 0 };

/** Lets pending promise callbacks run (the stand-in answers in microtasks). */
async function settle(): Promise<void> {
  for (let i = 0; i < 50; i++) await Promise.resolve();
}

/**
 * The shared state as a stand-in: `state` answers views and snapshots, `empty` swaps in an
 * emptied one (the replica registered again by another node) whose reply says so once (`lost`)
 * or not (another call of this node took that news already), and this node's registrations wait
 * for `letRegister`.
 */
function sharedState(): {
  shared: SharedStore;
  empty: (o: { lost: boolean }) => Promise<void>;
  letRegister: () => void;
  /** Another node's poll applied to the state now. */
  poll: (snap: Parameters<MemoryFleetStore['applySnapshot']>[1]) => Promise<void>;
} {
  let state = new MemoryFleetStore();
  let lost = false;
  let held: Promise<void> = Promise.resolve();
  let open = () => undefined as void;
  const known = {
    liveNodes: 3,
    currentEpoch: 'e1',
    onStateLost: null,
    onRemoteChange: null,
    takeStateLost: () => {
      const was = lost;
      lost = false;
      return was;
    },
    upsertReplica: async (spec: ReplicaSpec) => {
      await held;
      await state.upsertReplica(spec);
    },
    applySnapshot: (url: string, snap: Parameters<MemoryFleetStore['applySnapshot']>[1]) =>
      state.applySnapshot(url, snap),
    views: (urls: readonly string[]) => state.views(urls),
    // None: the failover store reads views, then acquires (its fallback for a store without the pair).
    viewsAndLease: undefined,
  } as Record<string, unknown>;
  const shared = new Proxy(known, {
    get: (o, k: string) => (k in o ? o[k] : async () => undefined),
  }) as unknown as SharedStore;
  return {
    shared,
    empty: async (o) => {
      state = new MemoryFleetStore();
      await state.upsertReplica(SPEC); // another node registered it first: no health yet
      lost = o.lost;
      held = new Promise<void>((resolve) => (open = resolve));
    },
    letRegister: () => open(),
    poll: (snap) => state.applySnapshot(U, snap),
  };
}

/** A node that polled U down, sharing the state, on a clock that stands still. */
async function nodeThatSawItDown(shared: SharedStore): Promise<FailoverFleetStore> {
  const clock: Clock = { now: () => 1087, after: () => () => undefined };
  const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 1000, logEveryMs: 60_000 }, clock);
  await s.upsertReplica(SPEC);
  await s.applySnapshot(U, { at: 1087, startedAt: 1083, ok: false, error: '500 Internal Server Error' });
  expect((await s.views([U]))[0]!.health).toBe('down');
  return s;
}

describe('FailoverFleetStore: views read once the shared state was found emptied', () => {
  it('while its reclaim is under way: a replica this node saw down and the state knows nothing of reads down', async () => {
    const { shared, empty, letRegister } = sharedState();
    const s = await nodeThatSawItDown(shared);
    await empty({ lost: false });
    shared.onStateLost!(); // another call's reply (a heartbeat, a request) found it: the reclaim begins
    const views = s.views([U]); // a held request wakes and decides again meanwhile
    await settle();
    letRegister();
    expect((await views)[0]!.health).toBe('down');
  });

  it('whose own reply found it, another node having registered every replica first: that replica reads down', async () => {
    const { shared, empty, letRegister } = sharedState();
    const s = await nodeThatSawItDown(shared);
    await empty({ lost: true });
    const views = s.views([U]);
    await settle();
    letRegister();
    expect((await views)[0]!.health).toBe('down');
  });

  it('with a lease, while its reclaim is under way: that replica reads down', async () => {
    const { shared, empty, letRegister } = sharedState();
    const s = await nodeThatSawItDown(shared);
    await empty({ lost: false });
    shared.onStateLost!();
    const lease: Lease = { id: 'n1g0-9', url: U, adapter: null, at: 1961 };
    const taken = s.viewsAndLease([U], undefined, lease);
    await settle();
    letRegister();
    expect((await taken).views[0]!.health).toBe('down');
  });

  it('while its reclaim is under way: a replica another node polled since the emptying keeps what that poll said', async () => {
    const { shared, empty, letRegister, poll } = sharedState();
    const s = await nodeThatSawItDown(shared);
    await empty({ lost: false });
    await poll({ at: 1950, startedAt: 1948, ok: true }); // another node's poll, begun after this node's down one
    shared.onStateLost!();
    const views = s.views([U]);
    await settle();
    letRegister();
    expect((await views)[0]!.health).toBe('up');
  });
});
