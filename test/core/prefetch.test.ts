import { AdapterManager } from '../../src/adapters/manager';
import type { LoadOutcome, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { RoomWants, Wanting } from '../../src/adapters/room-wants';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { ResidencyState } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { DemandTracker, type AdapterDemand } from '../../src/prefetch/demand';
import { planPrefetch, type PlannerReplica } from '../../src/prefetch/planner';
import { PREFETCH_BUDGET_KEY, Prefetcher, spendPrefetchBudget } from '../../src/prefetch/prefetcher';
import { prefetchSettings } from '../helpers/prefetch-settings';
import { adapterPolicy } from '../helpers/adapter-policy';

const R1 = 'http://r1:8000';
const R2 = 'http://r2:8000';
const URLS = [R1, R2];

describe('DemandTracker', () => {
  it('halves a count per half-life and reads it as a rate', () => {
    const d = new DemandTracker(10_000);
    for (let i = 0; i < 4; i++) d.observe({ name: 'a' }, URLS, 0);
    expect(d.count('a', 0)).toBe(4);
    expect(d.count('a', 10_000)).toBeCloseTo(2);
    expect(d.count('a', 20_000)).toBeCloseTo(1);
    expect(d.rate('a', 0)).toBeCloseTo((4 * Math.LN2) / 10);
    expect(d.count('never', 0)).toBe(0);
  });

  it('tracks a fixed number of adapters: names asked once do not push the hot ones out', () => {
    const d = new DemandTracker(60_000, 4);
    for (let i = 0; i < 10; i++) for (const n of ['h1', 'h2', 'h3']) d.observe({ name: n }, URLS, i);
    for (let i = 0; i < 1000; i++) d.observe({ name: `once-${i}` }, URLS, 10 + i);
    expect(d.size).toBe(4);
    for (const n of ['h1', 'h2', 'h3']) expect(d.count(n, 1010)).toBeGreaterThan(9);
    expect(d.snapshot(1010).map((e) => e.demand.adapter.name)).toEqual(['h1', 'h2', 'h3', 'once-999']);
  });

  it('drops adapters whose demand has decayed away', () => {
    const d = new DemandTracker(1000);
    d.observe({ name: 'a' }, URLS, 0);
    expect(d.snapshot(10_000)).toEqual([]);
    expect(d.size).toBe(0);
  });
});

describe('RoomWants', () => {
  it('lists the adapters waiting requests want per replica, until each wait ends', () => {
    const wants = new RoomWants();
    const end = wants.add('x', URLS);
    const held = new Wanting(wants, 'y', [R2]);
    held.on();
    held.on();
    expect([wants.on(R1), wants.on(R2)]).toEqual([['x'], ['x', 'y']]);
    // Decided again, held for another replica: it wants room there instead.
    held.on([R1]);
    expect([wants.on(R1), wants.on(R2)]).toEqual([['x', 'y'], ['x']]);
    end();
    held.off();
    held.off();
    expect(wants.size).toBe(0);
    // The base model or a static adapter wants no slot.
    new Wanting(wants, undefined, URLS).on();
    expect(wants.size).toBe(0);
  });
});

type Res = { name: string; state?: ResidencyState; inFlight?: number };
const replica = (url: string, residents: Res[] = [], over: Partial<PlannerReplica> = {}): PlannerReplica => ({
  url,
  maxLoadedAdapters: 2,
  available: true,
  residents: residents.map((r) => ({ name: r.name, state: r.state ?? 'loaded', inFlight: r.inFlight ?? 0 })),
  isStatic: () => false,
  ...over,
});
const demandOf = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([name, count]) => ({
      demand: { adapter: { name, path: `/a/${name}` }, urls: URLS, count, at: 0 } as AdapterDemand,
      count,
    }))
    .sort((a, b) => b.count - a.count);
const settings = { hysteresis: 0.5, evictFactor: 2, maxLoads: 2 };
const planned = (p: ReturnType<typeof planPrefetch>) => p.map((l) => `${l.adapter.name}@${l.url}`);

describe('planPrefetch', () => {
  it('sizes copies to the share of demand over the fleet’s slots, largest shortfall first', () => {
    // 4 slots; a has 3/4 of demand (target 3, capped at 2 replicas), b 1/4 (target 1).
    const p = planPrefetch(demandOf({ a: 3, b: 1 }), [replica(R1), replica(R2)], settings);
    expect(planned(p)).toEqual([`a@${R1}`, `a@${R2}`]);
    // a has both its copies: b's turn.
    const next = planPrefetch(
      demandOf({ a: 3, b: 1 }),
      [replica(R1, [{ name: 'a' }]), replica(R2, [{ name: 'a' }])],
      settings,
    );
    expect(planned(next)).toEqual([`b@${R1}`]);
  });

  it('makes no copy unless the target exceeds the copies by the hysteresis', () => {
    // a: 0.35 of 4 slots = 1.4 targets against 1 copy: short by 0.4 < 0.5.
    const p = planPrefetch(
      demandOf({ a: 35, b: 65 }),
      [replica(R1, [{ name: 'a' }, { name: 'b' }]), replica(R2, [{ name: 'b' }])],
      settings,
    );
    expect(planned(p)).toEqual([]);
    expect(
      planned(
        planPrefetch(
          demandOf({ a: 40, b: 60 }),
          [replica(R1, [{ name: 'a' }, { name: 'b' }]), replica(R2, [{ name: 'b' }])],
          settings,
        ),
      ),
    ).toEqual([`a@${R2}`]);
  });

  it('evicts only an idle adapter far colder than the newcomer, and never below its own target', () => {
    const full = (c: Res[]) => [replica(R1, c, { maxLoadedAdapters: 2 })];
    const s = { ...settings, maxLoads: 1 };
    // b and c hold the slots with demand within a factor 2 of a's: nothing is evicted.
    expect(
      planned(planPrefetch(demandOf({ a: 10, b: 6, c: 6 }), full([{ name: 'b' }, { name: 'c' }]), s)),
    ).toEqual([]);
    // c is far colder, and its copy is worth little of a slot (target 0.1): c may go.
    const p = planPrefetch(demandOf({ a: 10, b: 9, c: 1 }), full([{ name: 'b' }, { name: 'c' }]), s);
    expect(planned(p)).toEqual([`a@${R1}`]);
    expect(p[0]!.victims).toEqual(['c']);
    // The same c with a request in flight: no victim.
    expect(
      planned(
        planPrefetch(demandOf({ a: 10, b: 9, c: 1 }), full([{ name: 'b' }, { name: 'c', inFlight: 1 }]), s),
      ),
    ).toEqual([]);
    // Static residents and loads under way are never victims either.
    const st = [
      replica(R1, [{ name: 'b' }, { name: 'c', state: 'loading' }], {
        isStatic: (n) => n === 'b',
        maxLoadedAdapters: 1,
      }),
    ];
    expect(planned(planPrefetch(demandOf({ a: 10, b: 0.1, c: 0.1 }), st, s))).toEqual([]);
  });

  it('does not take the slot of an adapter whose loss would bring its copy back at the next tick', () => {
    // 2 slots; c has 4 of 25 (target 0.32 < 1 - 0.5 + ... ) vs a has 20: c may go. With a higher
    // hysteresis c's loss would leave it short by more than the hysteresis: it stays.
    const s = { hysteresis: 0.5, evictFactor: 2, maxLoads: 1 };
    const one = [replica(R1, [{ name: 'c' }], { maxLoadedAdapters: 1 })];
    expect(planned(planPrefetch(demandOf({ a: 20, c: 4 }), one, s))).toEqual([`a@${R1}`]);
    // 1 slot: c's target is 4/24 = 0.17; with hysteresis 0.1, 0 copies would be short by 0.17 > 0.1.
    expect(planned(planPrefetch(demandOf({ a: 20, c: 4 }), one, { ...s, hysteresis: 0.1 }))).toEqual([]);
  });

  it('leaves a replica alone while a request waits there for room for an adapter it does not hold', () => {
    // A request held (or waiting for room) wants R1 for `x`: R1's free slot is its, not a's.
    const both = [replica(R1, [], { roomWanted: ['x'] }), replica(R2)];
    expect(planned(planPrefetch(demandOf({ a: 5, b: 5 }), both, settings))).toEqual([`a@${R2}`]);
    // Nor an idle adapter there that a prefetch could evict.
    const full = [replica(R1, [{ name: 'c' }], { maxLoadedAdapters: 1, roomWanted: ['x'] })];
    expect(planned(planPrefetch(demandOf({ a: 20, c: 1 }), full, { ...settings, maxLoads: 1 }))).toEqual([]);
    // Held for the queue on a replica that holds its adapter: it wants no slot there.
    const holds = [replica(R1, [{ name: 'x' }], { roomWanted: ['x'] })];
    expect(planned(planPrefetch(demandOf({ a: 5, b: 5 }), holds, { ...settings, maxLoads: 1 }))).toEqual([
      `a@${R1}`,
    ]);
  });

  it('plans nothing on a busy replica, and one load a replica', () => {
    const p = planPrefetch(
      demandOf({ a: 5, b: 5 }),
      [replica(R1, [], { available: false }), replica(R2)],
      settings,
    );
    expect(planned(p)).toEqual([`a@${R2}`]);
  });
});

/** A unit-test stand-in for the replica API: loads take `loadMs` of virtual time. */
class FakeApi implements ReplicaApi {
  calls: string[] = [];
  constructor(private clock: VirtualClock) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(url: string, name: string): Promise<LoadOutcome> {
    this.calls.push(`load ${name}@${url}`);
    await sleep(this.clock, 300);
    return 'loaded';
  }
  async unloadAdapter(url: string, name: string): Promise<UnloadOutcome> {
    this.calls.push(`unload ${name}@${url}`);
    return 'unloaded';
  }
}

const policy = adapterPolicy({ maxLoadedAdapters: 1 });
/** A request seen an interval ago: a first copy of its adapter is no longer that request's to make. */
const AGO = -1000;
const on = prefetchSettings();

async function fleet(registry: string[] = []) {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  const api = new FakeApi(clock);
  for (const url of URLS) {
    await store.upsertReplica({ url, backend: 'vllm', priority: 0 });
    await store.applySnapshot(url, {
      at: 0,
      ok: true,
      load: { waiting: 0, running: 0, activeAdapters: [], malformedLines: 0 },
      registry: registry.map((name) => ({ name, path: `/a/${name}` })),
      managed: () => true,
    });
  }
  /** A node's prefetcher; `routes`: the replicas its router configurations list (all by default). */
  const node = (routes: readonly string[] = URLS) => {
    const manager = new AdapterManager(store, api, clock, silentLogger);
    const p = new Prefetcher(store, manager, clock, silentLogger, (url) =>
      routes.includes(url) ? policy : undefined,
    );
    p.configure(on);
    return p;
  };
  const tick = async (p: Prefetcher) => {
    const t = p.maybeTick();
    await clock.run();
    await t;
  };
  return { clock, store, api, node, tick };
}

describe('Prefetcher', () => {
  it('loads a demanded adapter into a free slot through the manager, once', async () => {
    const { api, node, tick, store } = await fleet();
    const p = node();
    for (let i = 0; i < 3; i++) p.observe({ name: 'a', path: '/a/a' }, [R1], AGO);
    await tick(p);
    expect(api.calls).toEqual([`load a@${R1}`]);
    expect((await store.views([R1], { name: 'a' }))[0]!.adapter?.state).toBe('loaded');
    await tick(p);
    expect(api.calls).toEqual([`load a@${R1}`]);
    expect(p.stats).toMatchObject({ loaded: 1, overBudget: 0 });
  });

  it('leaves requests half of every window of the fleet’s budget, however the windows fall', async () => {
    // cold_loads_per_minute 4. A request opens the fleet's window at -10 s; prefetching's opens
    // at 0; the next fleet window opens at 50.001 s by a request, and prefetching tries every
    // second from 55 s: late in its first window and early in its second, both in that fleet window.
    const store = new MemoryFleetStore();
    const s = { loadsPerMinute: 100, coldLoadsPerMinute: 4 };
    const request = async (t: number) => (await store.spendBudget('fleet', 4, 60_000, t)) === 0;
    expect(await request(-10_000)).toBe(true);
    const granted: number[] = [];
    if (await spendPrefetchBudget(store, s, 0)) granted.push(0);
    expect(await request(50_001)).toBe(true);
    for (let t = 55_000; t <= 100_000; t += 1000) if (await spendPrefetchBudget(store, s, t)) granted.push(t);
    expect(granted.filter((t) => t >= 50_001 && t < 110_001).length).toBeLessThanOrEqual(2);
    // Requests still get two more loads (with the request that opened it, half of 4) in that window.
    expect([await request(100_000), await request(100_001)]).toEqual([true, true]);
  });

  it('spends its own budget, never more than a quarter of the fleet’s cold loads a minute', async () => {
    const { api, node, tick, clock } = await fleet();
    const p = node();
    p.configure({ ...on, coldLoadsPerMinute: 4, loadsPerMinute: 10 });
    p.observe({ name: 'a', path: '/a/a' }, URLS, AGO);
    p.observe({ name: 'b', path: '/a/b' }, URLS, AGO);
    await tick(p);
    // Two loads planned (one a replica), one granted: a quarter of 4 a minute.
    expect(api.calls).toHaveLength(1);
    expect(p.stats.overBudget).toBe(1);
    await clock.run(clock.now() + 1000);
    await tick(p);
    expect(api.calls).toHaveLength(1);
  });

  it('never unloads what the plan did not allow, whatever the manager would pick', async () => {
    const { api, node, tick, store, clock } = await fleet(['b']);
    const p = node();
    // b is resident on both replicas (1 slot each) and asked as often as a: not a victim.
    for (let i = 0; i < 4; i++) {
      p.observe({ name: 'a', path: '/a/a' }, URLS, AGO);
      p.observe({ name: 'b', path: '/a/b' }, URLS, AGO);
    }
    await tick(p);
    expect(api.calls).toEqual([]);
    // A lease on b (a request in flight) on R1 while a's demand grows far past it: R1's b stays.
    await store.acquire({ id: 'l1', url: R1, adapter: 'b', at: 0 });
    for (let i = 0; i < 40; i++) p.observe({ name: 'a', path: '/a/a' }, URLS, AGO);
    await clock.run(clock.now() + 1000);
    await tick(p);
    expect(api.calls).toEqual([`unload b@${R2}`, `load a@${R2}`]);
  });

  it('unloads a victim only with its load’s budget in hand: a refused load leaves the victim resident', async () => {
    // Seed 60 of the simulation (dst-found/room-making.test.ts): prefetching's budget (one load a minute)
    // spent, the next tick planned `a` in place of an idle, colder `b`; the manager unloaded `b` to make
    // room, then asked the budget, which refused: a slot left empty and `b` gone for nothing.
    const { api, node, tick, store, clock } = await fleet(['b']);
    const p = node();
    p.configure({ ...on, loadsPerMinute: 1 });
    expect(await spendPrefetchBudget(store, { loadsPerMinute: 1, coldLoadsPerMinute: 0 }, 0)).not.toBeNull();
    p.observe({ name: 'b', path: '/a/b' }, [R1], AGO);
    for (let i = 0; i < 40; i++) p.observe({ name: 'a', path: '/a/a' }, [R1], AGO);
    await clock.run(clock.now() + 1000);
    await tick(p);
    expect(p.stats.overBudget).toBe(1);
    expect(api.calls).toEqual([]);
    expect((await store.views([R1], { name: 'b' }))[0]!.adapter?.state).toBe('loaded');
  });

  it('the manager unloads for it only the victims the plan allowed', async () => {
    const { api, store, clock } = await fleet(['b']);
    const manager = new AdapterManager(store, api, clock, silentLogger);
    const refused = manager
      .ensure(R1, { name: 'a', path: '/a/a' }, { ...policy, queueTimeoutMs: 0, mayEvict: (n) => n !== 'b' })
      .then(
        () => 'loaded',
        (e: Error) => e.message,
      );
    await clock.run();
    expect(await refused).toMatch(/No adapter slot/);
    expect(api.calls).toEqual([]);
  });

  it('a planned load another router made first leaves its budget to the next planned copy', async () => {
    // The two-node flake (test/kong/prefetch.test.ts): a tick plans `a` on R1 and R2 (budget: one
    // load a minute); R1's load spends the budget, but a request on another node began loading `a`
    // on R1 meanwhile, so this one loads nothing, and R2 is refused: no second copy for a minute.
    const { api, node, store, clock } = await fleet();
    const p = node();
    p.configure({ ...on, loadsPerMinute: 1 });
    const spend = store.spendBudget.bind(store);
    // The budget's round trip is where the request's load slips in.
    jest.spyOn(store, 'spendBudget').mockImplementation(async (key, limit, windowMs, at) => {
      if (key === PREFETCH_BUDGET_KEY) await sleep(clock, 10);
      return spend(key, limit, windowMs, at);
    });
    p.observe({ name: 'a', path: '/a/a' }, URLS, AGO);
    const other = new AdapterManager(store, api, clock, silentLogger);
    const t = p.maybeTick();
    const request = other.ensure(R1, { name: 'a', path: '/a/a' }, policy);
    await clock.run();
    await Promise.all([t, request]);
    expect(api.calls.sort()).toEqual([`load a@${R1}`, `load a@${R2}`]);
    expect(p.stats).toMatchObject({ loaded: 1, overBudget: 0 });
  });

  it('leaves the copy a request is placing to that request, and makes the next one', async () => {
    // The two-node flake's other schedule: a tick planned `a` on R1 while a request had placed its
    // cold load there (not loading yet: the residency shows nothing), the prefetch made that load
    // and the request joined it: the one unit of the minute bought the copy the request was making.
    const { api, node, store, clock, tick } = await fleet();
    const p = node();
    p.configure({ ...on, loadsPerMinute: 1 });
    p.observe({ name: 'a', path: '/a/a' }, URLS, AGO);
    // A request on another node placed `a` on R1.
    expect(await store.claimPlacement('a', R1, undefined, 0, 10_000)).toBe(R1);
    await tick(p);
    expect(api.calls).toEqual([]);
    // The request loads it and lets its placement go: the next tick makes the second copy.
    const other = new AdapterManager(store, api, clock, silentLogger);
    const request = other.ensure(R1, { name: 'a', path: '/a/a' }, policy);
    await clock.run();
    await request;
    await store.releasePlacement('a', R1);
    await clock.run(clock.now() + on.intervalMs);
    await tick(p);
    expect(api.calls).toEqual([`load a@${R1}`, `load a@${R2}`]);
    expect(p.stats).toMatchObject({ loaded: 1, overBudget: 0 });
  });

  it('leaves the first copy of an adapter asked for within the interval to the request deciding', async () => {
    // A request observed (the access phase) but not yet placed: a tick then sees no copy and no
    // placement. It is the request's to make; an interval later with no copy, the prefetch's.
    const { api, node, clock, tick } = await fleet();
    const p = node();
    p.observe({ name: 'a', path: '/a/a' }, [R1], 0);
    await clock.run(on.intervalMs - 1);
    await tick(p);
    expect(api.calls).toEqual([]);
    await clock.run(2 * on.intervalMs - 1);
    await tick(p);
    expect(api.calls).toEqual([`load a@${R1}`]);
  });

  it('drops a planned load at its start once a request waits for room on its replica', async () => {
    // The plan saw R1 free; a request for `x` begins waiting for room there before the load starts.
    const { api, store, clock, tick } = await fleet();
    const manager = new AdapterManager(store, api, clock, silentLogger);
    const p = new Prefetcher(store, manager, clock, silentLogger, () => policy);
    p.configure(on);
    p.observe({ name: 'a', path: '/a/a' }, [R1], AGO);
    const views = store.views.bind(store);
    // The tick's look at the planned adapter's placement is where the request comes in.
    jest.spyOn(store, 'views').mockImplementation(async (urls, adapter, withResidents) => {
      if (adapter?.name === 'a') manager.roomWants.add('x', [R1]);
      return views(urls, adapter, withResidents);
    });
    await tick(p);
    expect(api.calls).toEqual([]);
    expect(p.stats).toMatchObject({ planned: 1, loaded: 0, failed: 0, leftToRequests: 1 });
  });

  it('two nodes on one store plan once a tick and load an adapter once', async () => {
    const { api, node, clock } = await fleet();
    const [p, q] = [node(), node()];
    for (const n of [p, q]) for (let i = 0; i < 3; i++) n.observe({ name: 'a', path: '/a/a' }, [R1], AGO);
    const both = Promise.all([p.maybeTick(), q.maybeTick()]);
    await clock.run();
    await both;
    expect(api.calls).toEqual([`load a@${R1}`]);
    expect(p.stats.ticks + q.stats.ticks).toBe(1);
  });

  it('a node whose demand lists only replicas it no longer routes to leaves the tick to one that plans', async () => {
    // Review 68: a rolling change moved node p's route off R1; the demand its old configuration saw
    // there decays over minutes. Taking the fleet's one plan a tick for it, p planned nothing (no
    // replica of its own to ask of) and q, whose route's demand is on R1, could not plan that tick.
    const { api, node, clock } = await fleet();
    const p = node([R2]);
    const q = node([R1]);
    for (const n of [p, q]) for (let i = 0; i < 3; i++) n.observe({ name: 'a', path: '/a/a' }, [R1], AGO);
    const first = p.maybeTick();
    await clock.run();
    await first;
    const second = q.maybeTick();
    await clock.run();
    await second;
    expect({ calls: api.calls, ticks: [p.stats.ticks, q.stats.ticks] }).toEqual({
      calls: [`load a@${R1}`],
      ticks: [0, 1],
    });
  });
});
