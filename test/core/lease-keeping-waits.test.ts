/**
 * The waits with no wake of their own still keep the waiting request's lease young
 * (AdapterPolicy.keepLease, src/router/waiting-lease.ts): a load call, a request joining this
 * process's load (a prefetch's, which holds no lease), and a load queued behind the replica's room
 * lock. Each is asked by the load it waits on: at that load's wakes and before it turns `loaded`,
 * so the adapter lands under the lease (test/core/lease-through-load.test.ts shows the unload it
 * let happen).
 */
import { AdapterManager } from '../../src/adapters/manager';
import type { LoadOutcome, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { silentLogger } from '../../src/log';
import { adapterPolicy } from '../helpers/adapter-policy';

const U = 'http://r1:8000';

/** Loads take `loadMs` of virtual time. */
class SlowApi implements ReplicaApi {
  constructor(
    private readonly clock: VirtualClock,
    private readonly loadMs: number,
  ) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(): Promise<LoadOutcome> {
    await sleep(this.clock, this.loadMs);
    return 'loaded';
  }
  async unloadAdapter(): Promise<UnloadOutcome> {
    return 'unloaded';
  }
}

async function setup(loadMs: number) {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await store.applySnapshot(U, { at: 0, ok: true, registry: [] });
  const mgr = new AdapterManager(store, new SlowApi(clock, loadMs), clock, silentLogger);
  const ensure = (name: string, over: Parameters<typeof adapterPolicy>[0] = {}) =>
    mgr.ensure(U, { name, path: `/adapters/${name}` }, adapterPolicy({ loadTimeoutMs: 10_000, ...over }));
  /** A keepLease that records the adapter's state in the store each time it is asked. */
  const watch = (name: string) => {
    const seen: (string | undefined)[] = [];
    const keepLease = () =>
      store.residents(U).then((rs) => {
        seen.push(rs.find((r) => r.name === name)?.state);
      });
    return { seen, keepLease };
  };
  return { clock, store, ensure, watch };
}

describe('a wait with no wake of its own keeps its lease young', () => {
  it('a load call: asked before the adapter turns loaded', async () => {
    const { clock, ensure, watch } = await setup(5000);
    const caller = watch('a');
    const load = ensure('a', { keepLease: caller.keepLease });
    await clock.run();
    expect(await load).toBe('loaded');
    // Asked once before the lock (room was free), once as it landed, still `loading`.
    expect(caller.seen).toEqual([undefined, 'loading']);
  });

  it("a request joining a prefetch's load: asked by that load before the adapter turns loaded", async () => {
    const { clock, ensure, watch } = await setup(5000);
    // A prefetch: no lease, no keepLease.
    const prefetch = ensure('a');
    await clock.run(clock.now() + 100);
    const joiner = watch('a');
    const joined = ensure('a', { queueTimeoutMs: 10_000, keepLease: joiner.keepLease });
    await clock.run();
    expect(await prefetch).toBe('loaded');
    expect(await joined).toBe('joined');
    expect(joiner.seen).toEqual(['loading']);
  });

  it('a load queued behind the room lock: asked at the holder’s wakes', async () => {
    const { clock, store, ensure, watch } = await setup(100);
    // Both slots held by requests in flight: `c` waits for room under the lock, `d` queues behind it.
    await Promise.all([ensure('a'), ensure('b'), clock.run()]);
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 });
    await store.acquire({ id: 'Lb', url: U, adapter: 'b', at: 0 });
    const holder = ensure('c', { queueTimeoutMs: 2000 }).catch((e: Error) => e);
    await clock.run(clock.now() + 10);
    const queued = watch('d');
    const behind = ensure('d', { queueTimeoutMs: 2000, keepLease: queued.keepLease }).catch((e: Error) => e);
    await clock.run(clock.now() + 1000);
    // Every ROOM_FALLBACK_MS (250 ms) at least.
    expect(queued.seen.length).toBeGreaterThanOrEqual(3);
    await clock.run();
    await holder;
    await behind;
  });
});
