/**
 * The waits with no wake of their own still keep the waiting request's lease young
 * (AdapterPolicy.keepLease, src/router/waiting-lease.ts): a load call, a request joining this
 * process's load (a prefetch's, which holds no lease), and a load queued behind the replica's room
 * lock. Each is asked by the load it waits on: at that load's wakes and before it turns `loaded`,
 * so the adapter lands under the lease (test/core/lease-through-load.test.ts shows the unload it
 * let happen).
 */
import { AdapterManager } from '../../src/adapters/manager';
import { ROOM_FALLBACK_MS } from '../../src/adapters/room';
import type { LoadOutcome, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { silentLogger } from '../../src/log';
import { adapterPolicy } from '../helpers/adapter-policy';

const U = 'http://r1:8000';

/** Loads take `loadMs` of virtual time, unloads `unloadMs`. */
class SlowApi implements ReplicaApi {
  constructor(
    private readonly clock: VirtualClock,
    private readonly loadMs: number,
    private readonly unloadMs = 0,
  ) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(): Promise<LoadOutcome> {
    await sleep(this.clock, this.loadMs);
    return 'loaded';
  }
  async unloadAdapter(): Promise<UnloadOutcome> {
    if (this.unloadMs > 0) await sleep(this.clock, this.unloadMs);
    return 'unloaded';
  }
}

async function setup(loadMs: number, unloadMs = 0) {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await store.applySnapshot(U, { at: 0, ok: true, registry: [] });
  const mgr = new AdapterManager(store, new SlowApi(clock, loadMs, unloadMs), clock, silentLogger);
  const ensure = (name: string, over: Parameters<typeof adapterPolicy>[0] = {}) =>
    mgr.ensure(U, { name, path: `/adapters/${name}` }, adapterPolicy({ loadTimeoutMs: 10_000, ...over }));
  /** A keepLease that records the adapter's state in the store each time it is asked. */
  const watch = (name: string) => {
    const seen: (string | undefined)[] = [];
    /** The clock's time at each ask. */
    const at: number[] = [];
    const keepLease = () => {
      at.push(clock.now());
      return store.residents(U).then((rs) => {
        seen.push(rs.find((r) => r.name === name)?.state);
      });
    };
    return { seen, at, keepLease };
  };
  return { clock, store, ensure, watch };
}

/** The longest stretch between two asks, from `from` to `to` (the ends count as asks). */
function longestGap(at: readonly number[], from: number, to: number): number {
  const times = [from, ...at.filter((t) => t > from && t < to), to];
  return Math.max(...times.slice(1).map((t, i) => t - times[i]!));
}

describe('a wait with no wake of its own keeps its lease young', () => {
  it('a load call: asked before the adapter turns loaded', async () => {
    const { clock, ensure, watch } = await setup(5000);
    const caller = watch('a');
    const load = ensure('a', { keepLease: caller.keepLease });
    await clock.run();
    expect(await load).toBe('loaded');
    // Asked before the lock (room was free), then during the call and as it landed, still `loading`.
    expect(caller.seen[0]).toBeUndefined();
    expect(new Set(caller.seen.slice(1))).toEqual(new Set(['loading']));
  });

  // One load call of 5 s: the lease had no wake to be renewed on until the load landed, so a
  // store's sweep could reclaim it meanwhile (test/core/lease-through-load.test.ts shows the count).
  it('a load call: asked every ROOM_FALLBACK_MS while the replica is called, no timer left after', async () => {
    const { clock, ensure, watch } = await setup(5000);
    const caller = watch('a');
    const load = ensure('a', { keepLease: caller.keepLease });
    await clock.run(6000);
    expect(await load).toBe('loaded');
    expect(longestGap(caller.at, 0, 5000)).toBeLessThanOrEqual(ROOM_FALLBACK_MS);
    // The call ended: its timer with it.
    expect(clock.pending()).toBe(0);
  });

  it('a keep that fails does not fail the load', async () => {
    const { clock, ensure } = await setup(1000);
    let asked = 0;
    const load = ensure('a', {
      keepLease: () => {
        asked++;
        // Young at the lock and at landing (nothing to take), failing in between.
        return asked === 1
          ? undefined
          : clock.now() < 1000
            ? Promise.reject(new Error('store down'))
            : undefined;
      },
    });
    await clock.run();
    expect(await load).toBe('loaded');
    expect(asked).toBeGreaterThan(2);
  });

  it("a request joining a prefetch's load: asked by that load during its call and before the adapter turns loaded", async () => {
    const { clock, ensure, watch } = await setup(5000);
    // A prefetch: no lease, no keepLease.
    const prefetch = ensure('a');
    await clock.run(clock.now() + 100);
    const joiner = watch('a');
    const joined = ensure('a', { queueTimeoutMs: 10_000, keepLease: joiner.keepLease });
    await clock.run();
    expect(await prefetch).toBe('loaded');
    expect(await joined).toBe('joined');
    expect(new Set(joiner.seen)).toEqual(new Set(['loading']));
    expect(longestGap(joiner.at, 100, 5000)).toBeLessThanOrEqual(ROOM_FALLBACK_MS);
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

  // The holder of the room lock in one unload call of 5 s (its victim idle): no wake of its own
  // until that call ended, so the queued load's lease had none either.
  it('a load queued behind a holder inside one unload call: asked every ROOM_FALLBACK_MS', async () => {
    const { clock, ensure, watch } = await setup(100, 5000);
    // Both slots held by idle adapters: `c` unloads one under the room lock, `d` queues behind it.
    await Promise.all([ensure('a'), ensure('b'), clock.run()]);
    const holder = ensure('c', { queueTimeoutMs: 2000 });
    await clock.run(clock.now() + 10);
    const from = clock.now();
    const queued = watch('d');
    const behind = ensure('d', { queueTimeoutMs: 10_000, keepLease: queued.keepLease }).catch(
      (e: Error) => e,
    );
    await clock.run(from + 4000);
    expect(longestGap(queued.at, from, from + 4000)).toBeLessThanOrEqual(ROOM_FALLBACK_MS);
    await clock.run();
    expect(await holder).toBe('loaded');
    await behind;
  });
});
