/**
 * A prefetch's budget unit is spent for a load call, or given back to its tick. Each schedule
 * takes a unit on R1 and then makes no load call there; R2 (its residency read slow, so its unit
 * is asked later) is planned in the same tick. Counted: the fleet's cold-load units spent in the
 * store against the load calls in the replica's own log. A unit spent for no call is a cold load
 * the fleet's requests are refused (429) later in the minute.
 */
import { AdapterManager } from '../../src/adapters/manager';
import { BackendError } from '../../src/backends/errors';
import type { LoadOutcome, ReplicaActivity, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { silentLogger } from '../../src/log';
import { COLD_LOAD_WINDOW_MS, FLEET_BUDGET_KEY } from '../../src/router/cold-budget';
import {
  PREFETCH_BUDGET_KEY,
  Prefetcher,
  spendPrefetchBudget,
  TickBudget,
  type CountedIn,
} from '../../src/prefetch/prefetcher';
import { prefetchSettings } from '../helpers/prefetch-settings';
import { adapterPolicy } from '../helpers/adapter-policy';

const R1 = 'http://r1:8000';
const R2 = 'http://r2:8000';
const FLEET = 4;

/** Replicas whose registries follow their loads and unloads; R2 lists its adapters 50 ms late. */
class Replicas implements ReplicaApi {
  calls: string[] = [];
  held = new Map<string, Set<string>>([
    [R1, new Set()],
    [R2, new Set()],
  ]);
  /** Adapters R1 reports running (its fresh word before an unload). */
  busy: string[] = [];
  failUnload = false;
  failLoad = false;
  constructor(private readonly clock: VirtualClock) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(url: string, name: string): Promise<LoadOutcome> {
    this.calls.push(`load ${name}@${url}`);
    await sleep(this.clock, 300);
    if (this.failLoad && url === R1) throw new BackendError('http', `load of ${name} failed`, 500);
    this.held.get(url)!.add(name);
    return 'loaded';
  }
  async unloadAdapter(url: string, name: string): Promise<UnloadOutcome> {
    this.calls.push(`unload ${name}@${url}`);
    if (this.failUnload) throw new BackendError('http', `unload of ${name} refused`, 500);
    this.held.get(url)!.delete(name);
    return 'unloaded';
  }
  async activity(url: string): Promise<ReplicaActivity> {
    return { busy: url === R1 ? this.busy : [] };
  }
  async residency(url: string): Promise<{ name: string; path: string }[]> {
    if (url === R2) await sleep(this.clock, 50);
    return [...this.held.get(url)!].map((name) => ({ name, path: `/a/${name}` }));
  }
}

const policy = adapterPolicy({ maxLoadedAdapters: 1 });
/** One prefetch load a minute (a quarter of the fleet's four). */
const on = prefetchSettings({ coldLoadsPerMinute: FLEET });

/** R1 holds `r1` (or nothing), R2 nothing; `a` is in demand on both (or on `demandOn`). */
async function world(r1: string[], demandOn = [R1, R2]) {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  const api = new Replicas(clock);
  for (const url of [R1, R2]) {
    const registry = url === R1 ? r1 : [];
    for (const name of registry) api.held.get(url)!.add(name);
    await store.upsertReplica({ url, backend: 'vllm', priority: 0 });
    await store.applySnapshot(url, {
      at: 0,
      ok: true,
      load: { waiting: 0, running: 0, activeAdapters: [], malformedLines: 0 },
      registry: registry.map((name) => ({ name, path: `/a/${name}` })),
      managed: () => true,
    });
  }
  const manager = new AdapterManager(store, api, clock, silentLogger);
  const prefetcher = new Prefetcher(store, manager, clock, silentLogger, () => policy);
  prefetcher.configure(on);
  for (let i = 0; i < 40; i++) prefetcher.observe({ name: 'a', path: '/a/a' }, demandOn, -1000);
  const tick = async () => {
    const t = prefetcher.maybeTick();
    await clock.run();
    await t;
  };
  /** The fleet's cold loads spent this minute: what requests are refused from the budget. */
  const fleetSpent = async () => {
    let granted = 0;
    for (let i = 0; i < FLEET; i++)
      if ((await store.spendBudget(FLEET_BUDGET_KEY, FLEET, COLD_LOAD_WINDOW_MS, clock.now())) === 0)
        granted++;
    return FLEET - granted;
  };
  const loadCalls = () => api.calls.filter((c) => c.startsWith('load '));
  return { clock, store, api, manager, prefetcher, tick, fleetSpent, loadCalls };
}

describe("a prefetch's unit taken for R1, where no load call follows, goes to R2's load", () => {
  it('the replica reports the victim busy after its unload lock (and the unit) was granted', async () => {
    const w = await world(['b']);
    w.api.busy = ['b'];
    await w.tick();
    // One cold load of the fleet's spent, for R2's load call.
    expect(await w.fleetSpent()).toBe(w.loadCalls().length);
    expect(w.loadCalls()).toEqual([`load a@${R2}`]);
  });

  it("the replica refuses the victim's unload", async () => {
    const w = await world(['b']);
    w.api.failUnload = true;
    await w.tick();
    expect(w.api.calls).toContain(`unload b@${R1}`);
    // One cold load of the fleet's spent, for R2's load call.
    expect(await w.fleetSpent()).toBe(w.loadCalls().length);
    expect(w.loadCalls()).toEqual([`load a@${R2}`]);
  });

  it("the room was made, then another router's load took the slot: the load lock is refused", async () => {
    const w = await world(['b']);
    const begin = w.store.beginLoad.bind(w.store);
    let first = true;
    jest.spyOn(w.store, 'beginLoad').mockImplementation(async (url, adapter, at, limit) => {
      if (first && url === R1) {
        first = false;
        // A request on another node loads `c` into the room b left.
        await begin(R1, 'c', at, limit);
      }
      return begin(url, adapter, at, limit);
    });
    await w.tick();
    expect(w.api.calls).toContain(`unload b@${R1}`);
    // One cold load of the fleet's spent, for R2's load call.
    expect(await w.fleetSpent()).toBe(w.loadCalls().length);
    expect(w.loadCalls()).toEqual([`load a@${R2}`]);
  });

  it("another router's load of the same adapter got the lock first and holds it past the prefetch's wait", async () => {
    const w = await world([]);
    const begin = w.store.beginLoad.bind(w.store);
    let first = true;
    jest.spyOn(w.store, 'beginLoad').mockImplementation(async (url, adapter, at, limit) => {
      if (first && url === R1) {
        first = false;
        // Its load call is slow: the lock outlasts the prefetch's wait for it.
        await begin(R1, adapter, at, limit);
      }
      return begin(url, adapter, at, limit);
    });
    await w.tick();
    // One cold load of the fleet's spent, for R2's load call.
    expect(await w.fleetSpent()).toBe(w.loadCalls().length);
    expect(w.loadCalls()).toEqual([`load a@${R2}`]);
  });
});

describe("a unit no load of the tick took again goes back to the store at the tick's end", () => {
  it("R1's victim is busy and no other load is planned: the fleet's unit is refunded to requests", async () => {
    const w = await world(['b'], [R1]);
    w.api.busy = ['b'];
    await w.tick();
    expect(w.loadCalls()).toEqual([]);
    expect(w.prefetcher.stats).toMatchObject({ planned: 1, overBudget: 0, refunded: 1 });
    // Requests keep the fleet's whole budget: no load was made.
    expect(await w.fleetSpent()).toBe(0);
  });

  it("and prefetch's own unit (one a minute): the next tick loads once the victim is idle", async () => {
    const w = await world(['b'], [R1]);
    w.api.busy = ['b'];
    await w.tick();
    w.api.busy = [];
    // Past the replica's backoff after the first tick's failed attempt.
    await w.clock.run(w.clock.now() + 10 * on.intervalMs);
    await w.tick();
    expect(w.loadCalls()).toEqual([`load a@${R1}`]);
    expect(w.prefetcher.stats).toMatchObject({ loaded: 1, overBudget: 0 });
    expect(await w.fleetSpent()).toBe(1);
  });
});

describe('a unit whose load call was sent is spent', () => {
  it('a load call that failed keeps its unit: R2 is refused for the minute', async () => {
    const w = await world([]);
    w.api.failLoad = true;
    await w.tick();
    expect(w.loadCalls()).toEqual([`load a@${R1}`]);
    expect(w.prefetcher.stats).toMatchObject({ failed: 1, overBudget: 1 });
    expect(await w.fleetSpent()).toBe(1);
  });
});

describe('TickBudget', () => {
  /** The store's windows a unit is counted in: prefetch's and the fleet's, both opened at 0. */
  const windows = (): CountedIn => [
    { key: PREFETCH_BUDGET_KEY, opened: 0 },
    { key: FLEET_BUDGET_KEY, opened: 0 },
  ];
  const noRefund = async () => 0;

  it('takes a unit given back before the store, and a unit comes back once however often it is given back', async () => {
    let spent = 0;
    const budget = new TickBudget(async () => (++spent <= 1 ? windows() : null), noRefund);
    const unit = await budget.take();
    expect(unit).not.toBeNull();
    unit!.giveBack();
    unit!.giveBack();
    expect(budget.spare).toBe(1);
    const again = await budget.take();
    expect(again).not.toBeNull();
    expect(spent).toBe(1);
    // The one spare is gone; the store's one unit too.
    expect(await budget.take()).toBeNull();
    unit!.giveBack();
    expect(budget.spare).toBe(0);
  });

  it("gives its spare units back to the windows they were counted in at the tick's end, once", async () => {
    const refunds: [string, number, number][] = [];
    const budget = new TickBudget(
      async () => windows(),
      async (w, n) => (refunds.push([w.key, w.opened, n]), n),
    );
    const [a, b, c] = [await budget.take(), await budget.take(), await budget.take()];
    a!.giveBack();
    b!.giveBack();
    // `c` made its load call: it stays spent.
    expect(c).not.toBeNull();
    expect(await budget.settle()).toBe(2);
    expect(refunds).toEqual([
      [PREFETCH_BUDGET_KEY, 0, 2],
      [FLEET_BUDGET_KEY, 0, 2],
    ]);
    expect(budget.spare).toBe(0);
    expect(await budget.settle()).toBe(0);
    expect(refunds).toHaveLength(2);
  });
});

describe('spendPrefetchBudget', () => {
  it("gives prefetch's own unit back when the fleet's window refuses: no load follows it", async () => {
    const store = new MemoryFleetStore();
    for (let i = 0; i < FLEET; i++) await store.spendBudget(FLEET_BUDGET_KEY, FLEET, COLD_LOAD_WINDOW_MS, 0);
    expect(await spendPrefetchBudget(store, on, 0)).toBeNull();
    // Prefetch's one unit this minute is still there.
    expect(await store.spendBudget(PREFETCH_BUDGET_KEY, 1, 60_000, 0)).toBe(0);
  });
});

describe("a replica where the adapter's load backs off", () => {
  it('is planned no prefetch of it: the copy goes to the other replica', async () => {
    const w = await world([]);
    // A request's load of `a` failed on R1: held off there for ten minutes.
    w.api.failLoad = true;
    const long = adapterPolicy({ maxLoadedAdapters: 1, backoffBaseMs: 600_000, backoffMaxMs: 600_000 });
    const failed = w.manager.ensure(R1, { name: 'a', path: '/a/a' }, long).catch((e: Error) => e);
    await w.clock.run();
    expect(await failed).toMatchObject({ code: 'adapter_load_failed' });
    w.api.failLoad = false;
    await w.tick();
    expect(w.loadCalls()).toEqual([`load a@${R1}`, `load a@${R2}`]);
    expect(w.prefetcher.stats).toMatchObject({ planned: 1, loaded: 1, failed: 0 });
  });
});
