/**
 * A prefetch's unload racing a request that just chose the victim (adversarial review of the
 * unload path): the request's lease lands just before the prefetch's unload is granted, or just
 * after. Either way the request is never sent to the victim while it is not resident.
 */
import { AdapterManager } from '../../src/adapters/manager';
import type { LoadOutcome, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { ResidencyState } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { Prefetcher } from '../../src/prefetch/prefetcher';
import { prefetchSettings } from '../helpers/prefetch-settings';
import { adapterPolicy } from '../helpers/adapter-policy';

const R1 = 'http://r1:8000';

/** A replica whose registry follows its loads and unloads; loads take 300 ms. */
class Replica implements ReplicaApi {
  calls: string[] = [];
  held = new Set<string>(['b']);
  /** Most adapters held at once. */
  peak = 1;
  constructor(private readonly clock: VirtualClock) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(_url: string, name: string): Promise<LoadOutcome> {
    this.calls.push(`load ${name}`);
    await sleep(this.clock, 300);
    this.held.add(name);
    this.peak = Math.max(this.peak, this.held.size);
    return 'loaded';
  }
  async unloadAdapter(_url: string, name: string): Promise<UnloadOutcome> {
    this.calls.push(`unload ${name}`);
    this.held.delete(name);
    return 'unloaded';
  }
}

const policy = adapterPolicy({ maxLoadedAdapters: 1 });
const on = prefetchSettings();

/** R1 holds b (1 slot); a is in demand, b is not: the plan unloads b for a. */
async function world() {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  const api = new Replica(clock);
  await store.upsertReplica({ url: R1, backend: 'vllm', priority: 0 });
  await store.applySnapshot(R1, {
    at: 0,
    ok: true,
    load: { waiting: 0, running: 0, activeAdapters: [], malformedLines: 0 },
    registry: [{ name: 'b', path: '/a/b' }],
    managed: () => true,
  });
  const manager = new AdapterManager(store, api, clock, silentLogger);
  const prefetcher = new Prefetcher(store, manager, clock, silentLogger, () => policy);
  prefetcher.configure(on);
  for (let i = 0; i < 40; i++) prefetcher.observe({ name: 'a', path: '/a/a' }, [R1], -1000);
  return { clock, store, api, manager, prefetcher };
}

describe("a prefetch's unload and a request for its victim", () => {
  it('the lease comes first: the unload is refused, the prefetch loads nothing', async () => {
    const { clock, store, api, prefetcher } = await world();
    const begin = store.beginUnload.bind(store);
    jest.spyOn(store, 'beginUnload').mockImplementation(async (...args) => {
      // The request decided on b (resident) and takes its lease as the prefetch asks.
      await store.acquire({ id: 'req', url: R1, adapter: 'b', at: clock.now() });
      return begin(...args);
    });
    const t = prefetcher.maybeTick();
    await clock.run();
    await t;
    expect(api.calls).toEqual([]);
    expect([...api.held]).toEqual(['b']);
    expect(prefetcher.stats).toMatchObject({ planned: 1, loaded: 0, failed: 1 });
  });

  it('the unload is granted first: the request waits it out, takes the slot, and is served once b is back', async () => {
    const { clock, store, api, manager, prefetcher } = await world();
    const begin = store.beginUnload.bind(store);
    let underLease: ResidencyState | undefined | 'none' = 'none';
    let served: Promise<boolean> | undefined;
    jest.spyOn(store, 'beginUnload').mockImplementation(async (...args) => {
      const fence = await begin(...args);
      if (underLease === 'none') {
        // The request's lease lands just after the grant: it reads the state under it (admission.ts).
        underLease = await store.acquire({ id: 'req', url: R1, adapter: 'b', at: clock.now() });
        // Not resident under the lease: it goes through ensure before it may be proxied; proxied
        // only if the replica holds b then.
        served = manager
          .ensure(R1, { name: 'b', path: '/a/b' }, policy)
          .then(() => api.held.has('b'))
          .catch(() => false);
      }
      return fence;
    });
    const t = prefetcher.maybeTick();
    await clock.run();
    await t;
    expect(underLease).toBe('unloading');
    expect(await served).toBe(true);
    // The prefetch's unload was asked before the lease, so the replica's idle word covered it. The
    // request, waiting for room behind the prefetch's room-making, gets the slot: the planned load
    // is dropped at its start (RoomWants), no load of a to be undone by the request.
    expect(api.calls).toEqual(['unload b', 'load b']);
    expect(prefetcher.stats).toMatchObject({ loaded: 0, leftToRequests: 1 });
    expect([...api.held]).toEqual(['b']);
  });

  it("a prefetch's load and a cold request into the one free slot at once: the request is served, one slot held", async () => {
    const { clock, store, api, manager, prefetcher } = await world();
    // R1 emptied (b unloaded by a poll's trim, say): the plan loads a into the free slot; a request
    // for x, decided on R1 as free, comes in the same instant.
    await store.applySnapshot(R1, {
      at: 1,
      ok: true,
      load: { waiting: 0, running: 0, activeAdapters: [], malformedLines: 0 },
      registry: [],
      managed: () => true,
    });
    api.held.clear();
    let request: Promise<string> | undefined;
    const views = store.views.bind(store);
    // Planned on R1 free; the request comes as the tick looks at a's placement, after the plan.
    jest.spyOn(store, 'views').mockImplementation(async (urls, adapter, withResidents) => {
      if (adapter?.name === 'a' && !request)
        request = manager.ensure(R1, { name: 'x', path: '/a/x' }, policy).then(
          (o) => o,
          (e: Error) => e.message,
        );
      return views(urls, adapter, withResidents);
    });
    const t = prefetcher.maybeTick();
    await clock.run();
    await t;
    expect(await request).toBe('loaded');
    // The request claimed the slot first; the prefetch, which never waits for room, loads nothing
    // (nor unloads the request's fresh x, which it was not planned to evict).
    expect(api.calls).toEqual(['load x']);
    expect(prefetcher.stats).toMatchObject({ planned: 1, loaded: 0, failed: 1 });
    expect(api.peak).toBe(1);
  });
});

describe('a prefetch stopped while its plan runs (its runtime replaced by a `redis` record change)', () => {
  // Each lock and each replica call of the plan under way asks whether the prefetcher was stopped
  // right before it (AdapterPolicy.halted), not only the planning: a stop that comes as a lock is
  // granted leaves that lock ended and the replica uncalled.
  it("stopped as its victim's unload is granted: no unload call, no load", async () => {
    const { store, api, prefetcher } = await world();
    const begin = store.beginUnload.bind(store);
    let stopped: Promise<void> | undefined;
    jest.spyOn(store, 'beginUnload').mockImplementation(async (...args) => {
      const fence = await begin(...args);
      stopped = prefetcher.stop();
      return fence;
    });
    await prefetcher.maybeTick();
    await stopped;
    expect(api.calls).toEqual([]);
    expect((await store.residents(R1)).map((r) => `${r.name} ${r.state}`)).toEqual(['b loaded']);
    // Stopped: no further tick plans.
    expect(prefetcher.stats.ticks).toBe(1);
  });

  it('stopped as its load lock is granted: the lock ended, no load call', async () => {
    const { clock, store, api, prefetcher } = await world();
    const begin = store.beginLoad.bind(store);
    jest.spyOn(store, 'beginLoad').mockImplementation(async (...args) => {
      const fence = await begin(...args);
      void prefetcher.stop();
      return fence;
    });
    const t = prefetcher.maybeTick();
    await clock.run();
    await t;
    // The victim went first; the load, stopped after its grant, never reached the replica.
    expect(api.calls).toEqual(['unload b']);
    expect(await store.residents(R1)).toEqual([]);
    await clock.run(clock.now() + 10_000);
    await prefetcher.maybeTick();
    expect(prefetcher.stats.ticks).toBe(1);
  });
});
