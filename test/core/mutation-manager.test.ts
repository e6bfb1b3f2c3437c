/**
 * Unit test of AdapterManager (src/adapters/manager.ts, one module), written against the survivors
 * of `npm run mutation:safety -- manager` (docs/reliability/mutation-testing.md): the undo of a load
 * that took the replica over its limit, a load another process has under way, a lock that lapsed
 * before the load call, configured static adapters and the limit, a joiner's
 * own deadline, and what the call listeners and the event log are told. A virtual clock started
 * well past 0, so a time measured from the wrong origin shows.
 */
import { AdapterManager, type LoadRecord } from '../../src/adapters/manager';
import { adapterPolicy } from '../helpers/adapter-policy';
import { BackendError } from '../../src/backends/errors';
import {
  AdapterNotFoundError,
  AdapterRejectedError,
  type LoadOutcome,
  type ReplicaActivity,
  type ReplicaApi,
  type UnloadOutcome,
} from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { isLoadWaitRanOut } from '../../src/adapters/policy';
import { PlacedElsewhere } from '../../src/adapters/claims';
import { RouterError } from '../../src/errors';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { FleetStore } from '../../src/fleet/store';
import type { Fence } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';

const U = 'http://r1:8000';
const T0 = 100_000;

/** A replica: loads take `loadMs`; it lists what it holds (`held`, or `listed` once set) and runs nothing. */
class Replica implements ReplicaApi {
  calls: string[] = [];
  held = new Set<string>();
  /** What its model list says after the next load (another node's load landing at the same time). */
  listAfterLoad: string[] | undefined;
  failNext: Error | undefined;
  /** The next load answers "already loaded" (another node's load landed first). */
  alreadyNext = false;
  /** How long its model list takes to answer. */
  residencyMs = 0;
  /** Paths its model list gives other than `/adapters/<name>` (registered at start: `--lora-modules`). */
  paths = new Map<string, string>();
  constructor(
    private readonly clock: VirtualClock,
    private readonly loadMs = 100,
  ) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(_url: string, name: string): Promise<LoadOutcome> {
    this.calls.push(`load ${name}`);
    await sleep(this.clock, this.loadMs);
    const f = this.failNext;
    this.failNext = undefined;
    if (f) throw f;
    this.held.add(name);
    if (this.listAfterLoad) for (const n of this.listAfterLoad) this.held.add(n);
    if (this.alreadyNext) {
      this.alreadyNext = false;
      return 'already-loaded';
    }
    return 'loaded';
  }
  /** The next unload fails (the replica does not answer). */
  unloadFails = false;
  async unloadAdapter(_url: string, name: string): Promise<UnloadOutcome> {
    this.calls.push(`unload ${name}`);
    if (this.unloadFails) throw new BackendError('timeout', 'no answer');
    this.held.delete(name);
    return 'unloaded';
  }
  /** Adapters it reports running (never idle enough to unload). */
  busy: string[] = [];
  async activity(): Promise<ReplicaActivity> {
    return { busy: [...this.busy] };
  }
  async residency(): Promise<{ name: string; path: string }[]> {
    if (this.residencyMs > 0) await sleep(this.clock, this.residencyMs);
    return [...this.held].map((name) => ({ name, path: this.paths.get(name) ?? `/adapters/${name}` }));
  }
}

const policy = adapterPolicy;

async function setup(loaded: string[] = [], loadMs = 100) {
  const clock = new VirtualClock();
  await clock.run(T0);
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  // Loaded by a router (a registry read at start would make them static on the replica).
  for (const n of loaded) await store.finishLoad(U, n, (await store.beginLoad(U, n, T0, 100))!, true, T0);
  const api = new Replica(clock, loadMs);
  for (const n of loaded) api.held.add(n);
  const mgr = new AdapterManager(store, api, clock, silentLogger);
  const records: LoadRecord[] = [];
  mgr.addCallListener((r) => records.push(r));
  const ensure = (name: string, p = policy()) => mgr.ensure(U, { name, path: `/adapters/${name}` }, p);
  /** Runs the clock until `p` settles: its error (or undefined), and when. */
  const outcome = async (p: Promise<unknown>) => {
    let at: number | undefined;
    const settled = p.then(
      () => {
        at = clock.now();
        return undefined;
      },
      (e: unknown) => {
        at = clock.now();
        return e;
      },
    );
    await clock.run();
    return { err: (await settled) as RouterError | undefined, at: at! };
  };
  const names = async () => (await store.residents(U)).map((r) => r.name).sort();
  return { clock, store, api, mgr, records, ensure, outcome, names };
}

describe('AdapterManager: after a load, the replica over its limit', () => {
  it('unloads the adapter it just loaded, gives a 503, and the store does not hold it', async () => {
    const { api, ensure, outcome, names, records } = await setup([], 100);
    // Another node's load of `b` lands with ours: the replica lists two, the limit is 1.
    api.listAfterLoad = ['b'];
    const { err } = await outcome(ensure('a', policy({ maxLoadedAdapters: 1 })));
    expect(err).toBeInstanceOf(RouterError);
    expect(err!.status).toBe(503);
    expect(api.calls).toEqual(['load a', 'unload a']);
    expect(await names()).toEqual([]);
    // The unload's own time (an instant one here), not a time measured from the wrong origin.
    expect(records.map((r) => [r.op, r.adapter, r.ok, r.ms])).toEqual([
      ['load', 'a', true, 100],
      ['unload', 'a', true, 0],
    ]);
  });

  it('checks nothing after a load the replica answered "already loaded" (another node loaded it)', async () => {
    const { api, ensure, outcome, names } = await setup([], 100);
    api.listAfterLoad = ['b'];
    api.alreadyNext = true;
    const { err } = await outcome(ensure('a', policy({ maxLoadedAdapters: 1 })));
    expect(err).toBeUndefined();
    expect(api.calls).toEqual(['load a']);
    expect(await names()).toEqual(['a']);
  });

  it('"already loaded" for an adapter the replica registered at start takes nothing as loaded (dst seed 18826)', async () => {
    // A name pattern matches the replica's start-up `sql,chat` (another path): an emptied state had no
    // registry read yet, so the router loaded it. Taken as its load, a trim unloaded the start-up adapter.
    const { api, mgr, store, ensure, outcome } = await setup([], 100);
    mgr.replicaWord.isManaged = (name, path) => path === `/adapters/${name}`;
    api.held.add('sql,chat');
    api.paths.set('sql,chat', '/static/sql,chat');
    api.alreadyNext = true;
    const p = ensure('sql,chat', policy({ maxLoadedAdapters: 1 }));
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('loaded'); // the replica serves it: the request goes there
    // Static at once (not against the limit, never trimmed), and so after the next poll.
    expect((await store.residents(U)).map((r) => [r.name, r.state])).toEqual([['sql,chat', 'static']]);
    await store.applySnapshot(U, {
      at: T0 + 1000,
      ok: true,
      registry: await api.residency(),
      managed: mgr.replicaWord.isManaged,
    });
    expect((await store.residents(U)).map((r) => [r.name, r.state])).toEqual([['sql,chat', 'static']]);
  });

  it('"already loaded" for a start-up adapter leaves it static at once: a poll applied during the load, then a later one, keep it; a next request loads nothing', async () => {
    // Review of seed 18826's fix: ended as a failed load, the name was marked gone with the first
    // read already applied (during the load), so the next poll took it as the router's load (trimmable),
    // and until then every request for it loaded it again.
    const { api, clock, mgr, store, ensure, outcome, names } = await setup(['g'], 100);
    const managed = (mgr.replicaWord.isManaged = (name: string, path: string) =>
      path === `/adapters/${name}`);
    api.held.add('sql,chat');
    api.paths.set('sql,chat', '/static/sql,chat');
    api.alreadyNext = true;
    const poll = async (at: number) =>
      store.applySnapshot(U, { at, ok: true, registry: await api.residency(), managed });
    // The first poll since the state emptied, begun before the load, applies while it is under way.
    const send = api.loadAdapter.bind(api);
    api.loadAdapter = async (url, name) => {
      await poll(T0 - 1);
      return send(url, name);
    };
    const p = ensure('sql,chat', policy({ maxLoadedAdapters: 2 }));
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('loaded');
    const states = async () => (await store.residents(U)).map((r) => [r.name, r.state]).sort();
    expect(await states()).toEqual([
      ['g', 'loaded'],
      ['sql,chat', 'static'],
    ]);
    await poll(clock.now() + 1000);
    expect(await states()).toEqual([
      ['g', 'loaded'],
      ['sql,chat', 'static'],
    ]);
    expect(await names()).toEqual(['g', 'sql,chat']);
    // Served where it is: no load, no unload to make room for one.
    const again = ensure('sql,chat', policy({ maxLoadedAdapters: 1 }));
    expect((await outcome(again)).err).toBeUndefined();
    expect(api.calls).toEqual(['load sql,chat']);
  });

  it('a failed load call of a start-up adapter, listed after at its start-up path, takes nothing as loaded (dst seed 310213)', async () => {
    // The replica hung past the load's bound; the listing read under the lock showed `sql,chat`,
    // registered at start at another path. Taken as this load landed, a trim unloaded it.
    const { api, clock, mgr, store, ensure, outcome } = await setup([], 100);
    const managed = (mgr.replicaWord.isManaged = (name: string, path: string) =>
      path === `/adapters/${name}`);
    api.held.add('sql,chat');
    api.paths.set('sql,chat', '/static/sql,chat');
    api.failNext = new BackendError('timeout', 'no answer');
    const p = ensure('sql,chat', policy({ maxLoadedAdapters: 1 }));
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('loaded'); // the replica holds it: the request goes there
    const states = async () => (await store.residents(U)).map((r) => [r.name, r.state]);
    expect(await states()).toEqual([['sql,chat', 'static']]);
    await store.applySnapshot(U, {
      at: clock.now() + 1000,
      ok: true,
      registry: await api.residency(),
      managed,
    });
    expect(await states()).toEqual([['sql,chat', 'static']]);
    expect(api.calls).toEqual(['load sql,chat']);
  });

  it('"already loaded" at a path a configuration loads is the router\'s load (another node\'s)', async () => {
    const { api, mgr, ensure, outcome, names } = await setup([], 100);
    mgr.replicaWord.isManaged = (name, path) => path === `/adapters/${name}`;
    api.alreadyNext = true;
    expect((await outcome(ensure('a', policy({ maxLoadedAdapters: 1 })))).err).toBeUndefined();
    expect(await names()).toEqual(['a']);
  });

  it('an undo whose unload fails keeps the adapter loaded, in the store too, and serves the request', async () => {
    const { api, store, ensure, outcome, names, records } = await setup([], 100);
    api.listAfterLoad = ['b'];
    api.unloadFails = true;
    const p = ensure('a', policy({ maxLoadedAdapters: 1 }));
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('loaded');
    expect(api.calls).toEqual(['load a', 'unload a']);
    expect(await names()).toEqual(['a']);
    // The load told once, the failed unload with its reason.
    expect(records.map((r) => [r.op, r.adapter, r.ok])).toEqual([
      ['load', 'a', true],
      ['unload', 'a', false],
    ]);
    const unload = (await store.events(10)).find((e) => e.op === 'unload');
    expect(unload?.detail).toBe(new BackendError('timeout', 'no answer').message);
  });

  it('an undo held off by the store (Redis just back, a record change) unloads nothing: the request is served', async () => {
    const { api, store, ensure, outcome, names } = await setup([], 100);
    api.listAfterLoad = ['b'];
    const fences: unknown[] = [];
    (store as FleetStore).undoHeldOff = (fence: Fence) => (fences.push(fence), true);
    const p = ensure('a', policy({ maxLoadedAdapters: 1 }));
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('loaded');
    expect(api.calls).toEqual(['load a']);
    expect(await names()).toEqual(['a']);
    expect(fences).toHaveLength(1);
  });

  it('an undo whose load lock is no longer its own unloads nothing: another node may have loaded it since and sent its request (dst seed 1018463)', async () => {
    const { api, store, ensure, outcome, names } = await setup([], 100);
    api.listAfterLoad = ['b'];
    // Held before the load call; lost by the time it lands (a FLUSHALL emptied Redis, and another
    // node's load of `a` there took a lock of its own, answered "already loaded", and proxied).
    const holds = store.holds.bind(store);
    let asked = 0;
    store.holds = async (...a) => (++asked === 1 ? holds(...a) : false);
    const p = ensure('a', policy({ maxLoadedAdapters: 1 }));
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('loaded');
    expect(api.calls).toEqual(['load a']);
    expect(await names()).toEqual(['a']);
    expect(asked).toBe(2);
  });

  it('a load whose undo is held off, answered "already loaded", waits for the load the store shows under way', async () => {
    // Decided alone, answered once Redis is back: the copy on the replica may be another node's
    // load, still `loading` in Redis, whose after-load check may undo it (dst seed 1793).
    const { api, store, clock, ensure, outcome } = await setup([], 100);
    (store as FleetStore).undoHeldOff = () => true;
    api.alreadyNext = true;
    // Once that answer came, the store shows the other node's load under way until T0 + 700.
    const views = store.views.bind(store);
    store.views = async (urls, adapter, withResidents) => {
      const v = await views(urls, adapter, withResidents);
      if (api.calls.length > 0 && clock.now() < T0 + 700)
        for (const x of v) if (x.adapter) x.adapter = { ...x.adapter, state: 'loading' };
      return v;
    };
    const { err, at } = await outcome(ensure('a', policy({ maxLoadedAdapters: 1 })));
    expect(err).toBeUndefined();
    expect(at).toBeGreaterThanOrEqual(T0 + 700);
    expect(api.calls).toEqual(['load a']);
  });

  it('an undo with no access time left after the check unloads nothing: the trim after a poll decides', async () => {
    const { api, ensure, outcome, names } = await setup([], 100);
    api.listAfterLoad = ['b'];
    // The list takes 10 ms: before the load (T0 -> +10), then the load (+110), then after it (+120).
    api.residencyMs = 10;
    const p = ensure('a', policy({ maxLoadedAdapters: 1, deadline: T0 + 120 }));
    const { err, at } = await outcome(p);
    expect(err).toBeUndefined();
    expect(at).toBe(T0 + 120);
    expect(api.calls).toEqual(['load a']);
    expect(await names()).toEqual(['a']);
  });
});

describe('AdapterManager: a load already under way elsewhere', () => {
  it('another process loading the adapter: waits for it, loads nothing itself, and uses it', async () => {
    const { api, store, clock, ensure, outcome } = await setup();
    const fence = await store.beginLoad(U, 'a', T0, 2);
    clock.after(600, () => void store.finishLoad(U, 'a', fence!, true, clock.now()));
    const p = ensure('a');
    const { err } = await outcome(p);
    expect(err).toBeUndefined();
    expect(await p).toBe('hit');
    expect(api.calls).toEqual([]);
  });

  it('another process unloading the adapter: waits for the unload to end, then loads it again', async () => {
    const { api, store, clock, ensure, outcome, names } = await setup(['a']);
    const fence = await store.beginUnload(U, 'a', T0);
    clock.after(600, () => void store.finishUnload(U, 'a', fence!, true, clock.now()));
    const { err, at } = await outcome(ensure('a'));
    expect(err).toBeUndefined();
    // The unload ended at +600; the wait for it looks again every 250 ms (+750), then a 100 ms load.
    expect(at).toBe(T0 + 850);
    expect(api.calls).toEqual(['load a']);
    expect(await names()).toEqual(['a']);
  });

  it('two adapters loaded at once on one replica: each its own load, at the same time', async () => {
    const { ensure, clock } = await setup([], 100);
    const done: number[] = [];
    const both = ['a', 'b'].map((n) => ensure(n).then(() => done.push(clock.now())));
    await clock.run();
    await Promise.all(both);
    expect(done).toEqual([T0 + 100, T0 + 100]);
  });

  // A wait for the adapter's own load is not escalated to a load on another replica; a wait for an
  // unload is a lack of room, which may be.
  it.each([
    ['a load elsewhere', 'load', true],
    ['an unload elsewhere', 'unload', false],
  ] as const)(
    '%s that never ends: 503 at the deadline (queue + load timeouts), not a poll later',
    async (_, op, ownLoad) => {
      const { api, store, ensure, outcome } = await setup(op === 'unload' ? ['a'] : []);
      if (op === 'load') await store.beginLoad(U, 'a', T0, 2);
      else await store.beginUnload(U, 'a', T0);
      const { err, at } = await outcome(ensure('a'));
      expect(err!.status).toBe(503);
      expect(at).toBe(T0 + 1500);
      expect(api.calls).toEqual([]);
      expect(isLoadWaitRanOut(err)).toBe(ownLoad);
    },
  );

  it('a joiner with no time left gives its 503 at once, and a join that ends leaves no timer behind', async () => {
    const { ensure, clock, outcome } = await setup([], 100);
    const first = ensure('a');
    await clock.run(T0);
    const { err, at } = await outcome(ensure('a', policy({ deadline: T0 })));
    expect(err!.status).toBe(503);
    expect(at).toBe(T0);
    expect(isLoadWaitRanOut(err)).toBe(true);
    expect((await outcome(first)).err).toBeUndefined();
    // A joiner whose load ends before its deadline: its deadline timer is cancelled.
    const { ensure: ensure2, clock: clock2 } = await setup([], 100);
    const loads = [ensure2('b'), ensure2('b')];
    await clock2.run(T0 + 100);
    expect(await Promise.all(loads)).toEqual(['loaded', 'joined']);
    expect(clock2.pending()).toBe(0);
  });

  it('a load started by another call here while this one spent its cold-load budget: joined, one load', async () => {
    const { api, clock, mgr, outcome } = await setup([], 100);
    const spend = () => sleep(clock, 10);
    const calls = [0, 1].map(() =>
      mgr.ensure(U, { name: 'a', path: '/adapters/a' }, policy(), undefined, spend),
    );
    for (const c of calls) expect((await outcome(c)).err).toBeUndefined();
    expect((await Promise.all(calls)).sort()).toEqual(['joined', 'loaded']);
    expect(api.calls).toEqual(['load a']);
  });

  it('resident meanwhile (loaded by another process while this call spent its budget), no access time left: a hit', async () => {
    const { api, clock, store, mgr, outcome } = await setup([], 100);
    const spend = async () => {
      await sleep(clock, 10);
      await store.finishLoad(U, 'a', (await store.beginLoad(U, 'a', clock.now(), 100))!, true, clock.now());
    };
    const p = mgr.ensure(
      U,
      { name: 'a', path: '/adapters/a' },
      policy({ deadline: T0 + 10 }),
      undefined,
      spend,
    );
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('hit');
    expect(api.calls).toEqual([]);
  });

  it('a joiner keeps its own deadline, counted from when it came', async () => {
    const { ensure, clock, outcome } = await setup([], 5000);
    const long = ensure('a', policy({ queueTimeoutMs: 30_000, loadTimeoutMs: 30_000 }));
    await clock.run(T0 + 10);
    const { err, at } = await outcome(ensure('a'));
    expect(err!.status).toBe(503);
    expect(at).toBe(T0 + 10 + 1500);
    expect((await outcome(long)).err).toBeUndefined();
  });
});

describe('AdapterManager: the load lock and the limit', () => {
  it('calls the replica on no lapsed lock: a load whose lock is no longer its own is not sent', async () => {
    const { api, store, ensure, outcome } = await setup();
    store.holds = async () => false;
    const { err } = await outcome(ensure('a'));
    expect(err!.status).toBe(503);
    expect(api.calls).toEqual([]);
  });

  it('a configured static adapter the store holds as loaded takes no slot', async () => {
    const { api, ensure, outcome, names } = await setup(['boot']);
    const p = policy({ maxLoadedAdapters: 1, isStatic: (n) => n === 'boot' });
    const { err } = await outcome(ensure('a', p));
    expect(err).toBeUndefined();
    expect(api.calls).toEqual(['load a']);
    expect(await names()).toEqual(['a', 'boot']);
  });

  it('a slot taken by another node at the last moment: tries again, the cold-load budget spent once', async () => {
    const { api, store, mgr, outcome } = await setup();
    const begin = store.beginLoad.bind(store);
    let refused = 0;
    store.beginLoad = async (...args) => (refused++ === 0 ? null : begin(...args));
    let spent = 0;
    const p = mgr.ensure(U, { name: 'a', path: '/adapters/a' }, policy(), undefined, async () => {
      spent++;
    });
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('loaded');
    expect(spent).toBe(1);
    expect(api.calls).toEqual(['load a']);
  });

  it('a load with no access time left once room is made calls no replica: 503', async () => {
    const { api, ensure, outcome, names } = await setup();
    const { err, at } = await outcome(ensure('a', policy({ deadline: T0 })));
    expect(err!.status).toBe(503);
    expect(at).toBe(T0);
    expect(api.calls).toEqual([]);
    expect(await names()).toEqual([]);
  });

  it('an adapter already on the replica from its start (static there) is a hit: no load', async () => {
    const { api, store, ensure, outcome } = await setup();
    await store.applySnapshot(U, { at: T0, ok: true, registry: [{ name: 'boot', path: '/adapters/boot' }] });
    const p = ensure('boot');
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('hit');
    expect(api.calls).toEqual([]);
  });

  it('the trim unloads the excess only, down to the limit, and tells the listeners', async () => {
    const { api, mgr, clock, names, records } = await setup(['a', 'b', 'c']);
    const trimmed = mgr.trim(U, policy({ maxLoadedAdapters: 2 }));
    await clock.run();
    await trimmed;
    expect(api.calls).toEqual(['unload a']);
    expect(await names()).toEqual(['b', 'c']);
    expect(records.map((r) => [r.op, r.adapter, r.ok])).toEqual([['unload', 'a', true]]);
  });
});

describe('AdapterManager: what it tells', () => {
  it('tells the listeners and the event log each load, ok or failed, with its time', async () => {
    const { api, store, ensure, outcome, records } = await setup([], 100);
    await outcome(ensure('a'));
    api.failNext = new BackendError('timeout', 'no answer');
    const { err } = await outcome(ensure('b'));
    expect(err!.status).toBe(502);
    expect(records).toEqual([
      { url: U, adapter: 'a', op: 'load', ok: true, ms: 100 },
      { url: U, adapter: 'b', op: 'load', ok: false, ms: 100 },
    ]);
    const events = await store.events(10);
    expect(events.map((e) => [e.adapter, e.op, e.result, e.ms, e.detail])).toEqual([
      ['a', 'load', 'ok', 100, undefined],
      ['b', 'load', 'error', 100, new BackendError('timeout', 'no answer').message],
    ]);
  });

  it("records a failed load's reason: a known error's message, anything else as a whole", async () => {
    const { api, store, ensure, outcome } = await setup([], 100);
    const thrown = [
      new AdapterRejectedError('400 Bad Request: rank 64 exceeds max_lora_rank 16'),
      new AdapterNotFoundError('404 Not Found: no such adapter'),
      new Error('socket hang up'),
    ];
    for (const [i, e] of thrown.entries()) {
      api.failNext = e;
      await outcome(ensure(`x${i}`));
    }
    const details = (await store.events(10)).map((e) => e.detail);
    expect(details).toEqual([...thrown.slice(0, 2).map((e) => e.message), 'Error: socket hang up']);
  });

  it("a load the replica rejects is the client's 400, not a 502", async () => {
    const { api, ensure, outcome } = await setup();
    api.failNext = new AdapterRejectedError('400 Bad Request: rank 64 exceeds max_lora_rank 16');
    expect((await outcome(ensure('a'))).err!.status).toBe(400);
  });

  it('wakes a wait for room when a load ends', async () => {
    const { mgr, ensure, clock } = await setup([], 100);
    let woke: number | undefined;
    void mgr.roomChanged.wait(clock, 10_000).then(() => (woke = clock.now()));
    const p = ensure('a');
    await clock.run();
    await p;
    expect(woke).toBe(T0 + 100);
  });
});

describe('AdapterManager: the placement checked again after a wait', () => {
  /** A recheck that counts its calls and names `placedOn`. */
  const recheck = (placedOn: string) => {
    const asked = { n: 0 };
    return { asked, fn: async () => (asked.n++, placedOn) };
  };

  it('a load that waited for nothing does not ask again', async () => {
    const { api, ensure, outcome } = await setup();
    const { asked, fn } = recheck('http://elsewhere:8000');
    expect((await outcome(ensure('a', policy({ recheckPlacement: fn })))).err).toBeUndefined();
    expect(asked.n).toBe(0);
    expect(api.calls).toEqual(['load a']);
  });

  it("after waiting for another process's unload, a placement moved elsewhere: no load here", async () => {
    const { api, store, clock, ensure, outcome } = await setup(['a']);
    const fence = await store.beginUnload(U, 'a', T0);
    clock.after(600, () => void store.finishUnload(U, 'a', fence!, true, clock.now()));
    const { asked, fn } = recheck('http://elsewhere:8000');
    const { err } = await outcome(ensure('a', policy({ recheckPlacement: fn })));
    expect(err).toBeInstanceOf(PlacedElsewhere);
    expect(asked.n).toBe(1);
    expect(api.calls).toEqual([]);
  });

  it("after waiting behind another load's room-making in this process: asks again", async () => {
    const { api, ensure, outcome } = await setup();
    // Each load reads the replica's list first (10 ms), under the replica's room lock.
    api.residencyMs = 10;
    const first = recheck(U);
    const second = recheck(U);
    const loads = [
      ensure('a', policy({ recheckPlacement: first.fn })),
      ensure('b', policy({ recheckPlacement: second.fn })),
    ];
    for (const l of loads) expect((await outcome(l)).err).toBeUndefined();
    expect([first.asked.n, second.asked.n]).toEqual([0, 1]);
  });
});

describe('AdapterManager: record changes and unknown replicas', () => {
  it('unloads nothing another store may have a request on (a record change), even in excess', async () => {
    const { api, mgr, clock, names } = await setup(['a', 'b', 'c']);
    mgr.leasedElsewhere = () => true;
    const trimmed = mgr.trim(U, policy({ maxLoadedAdapters: 2 }));
    await clock.run();
    await trimmed;
    expect(api.calls).toEqual([]);
    expect(await names()).toEqual(['a', 'b', 'c']);
  });

  it('a replica the store does not know (an emptied Redis before its re-registration): 503, no endless retry', async () => {
    const { api, store, mgr, outcome } = await setup();
    // Bounds the loop of the bug this found: the store refusing every load on a replica it does not know.
    const begin = store.beginLoad.bind(store);
    let begun = 0;
    store.beginLoad = async (...args) => {
      if (++begun > 100) throw new Error('beginLoad refused 100 times in a row: an endless retry');
      return begin(...args);
    };
    const { err } = await outcome(
      mgr.ensure('http://unknown:8000', { name: 'a', path: '/adapters/a' }, policy()),
    );
    expect(err).toBeInstanceOf(RouterError);
    expect(err!.status).toBe(503);
    expect(api.calls).toEqual([]);
  });
});

describe('Room: a slot for a load, and the trim (src/adapters/room.ts through the manager)', () => {
  it('a slot another node took between the read and the claim: the limit holds (statics excepted only if configured)', async () => {
    const { api, store, clock, ensure, outcome } = await setup();
    // `boot` is on the replica from its start and configured static: it takes no slot, either way.
    await store.applySnapshot(U, { at: T0, ok: true, registry: [{ name: 'boot', path: '/adapters/boot' }] });
    await store.finishLoad(U, 'x', (await store.beginLoad(U, 'x', T0, 100))!, true, T0);
    api.held.add('boot').add('x');
    expect((await store.residents(U)).map((r) => [r.name, r.state])).toEqual([
      ['boot', 'static'],
      ['x', 'loaded'],
    ]);
    const begin = store.beginLoad.bind(store);
    let raced = false;
    store.beginLoad = async (url, name, ...rest) => {
      if (!raced && name === 'a') {
        raced = true;
        await begin(U, 'b', clock.now(), 100); // another node's load, under way
      }
      return begin(url, name, ...rest);
    };
    const p = policy({ maxLoadedAdapters: 2, isStatic: (n) => n === 'boot' });
    expect((await outcome(ensure('a', p))).err).toBeUndefined();
    expect(api.calls).toEqual(['unload x', 'load a']);
    const occupying = (await store.residents(U)).filter((r) => r.name !== 'boot').map((r) => r.name);
    expect(occupying.sort()).toEqual(['a', 'b']);
  });

  it('a prefetch unloads only what it may evict', async () => {
    const { api, store, ensure, outcome } = await setup(['x', 'y']);
    await store.touch(U, 'y', T0 + 50); // x is the least recently used
    const { err } = await outcome(ensure('a', policy({ mayEvict: (n) => n === 'y' })));
    expect(err).toBeUndefined();
    expect(api.calls).toEqual(['unload y', 'load a']);
  });

  it('room made by an unload: loads at once, with no wait for room', async () => {
    const { api, ensure, outcome } = await setup(['x', 'y']);
    const { err, at } = await outcome(ensure('a'));
    expect(err).toBeUndefined();
    expect(at).toBe(T0 + 100);
    expect(api.calls).toEqual(['unload x', 'load a']);
  });

  it('room made by an unload is a wait: the placement is checked again before the load', async () => {
    const { api, ensure, outcome } = await setup(['x', 'y']);
    let asked = 0;
    const p = policy({ recheckPlacement: async () => (asked++, 'http://elsewhere:8000') });
    expect((await outcome(ensure('a', p))).err).toBeInstanceOf(PlacedElsewhere);
    expect(asked).toBe(1);
    expect(api.calls).toEqual(['unload x']);
  });

  it('a slot freed by another node while this load waited for room: the placement is checked again', async () => {
    const { api, store, clock, ensure, outcome } = await setup();
    const fence = await store.beginLoad(U, 'b', T0, 100);
    // Another node's load of b fails at +300: its slot is free again.
    clock.after(300, () => void store.finishLoad(U, 'b', fence!, false, clock.now()));
    let asked = 0;
    const p = policy({
      maxLoadedAdapters: 1,
      recheckPlacement: async () => (asked++, 'http://elsewhere:8000'),
    });
    expect((await outcome(ensure('a', p))).err).toBeInstanceOf(PlacedElsewhere);
    expect(asked).toBe(1);
    expect(api.calls).toEqual([]);
  });

  it('every slot busy: 503 at the queue timeout exactly, Retry-After its seconds rounded up', async () => {
    const { api, ensure, outcome } = await setup(['x', 'y']);
    api.busy = ['x', 'y'];
    const { err, at } = await outcome(ensure('a', policy({ queueTimeoutMs: 2500 })));
    expect(err!.status).toBe(503);
    expect(at).toBe(T0 + 2500);
    expect(err!.retryAfterS).toBe(3);
    expect(api.calls).toEqual([]);
  });

  it('the trim unloads the whole excess, least recently used first', async () => {
    const { api, store, mgr, clock, names } = await setup(['a', 'b', 'c', 'd']);
    await store.touch(U, 'a', T0 + 50);
    await store.touch(U, 'b', T0 + 40);
    const trimmed = mgr.trim(U, policy({ maxLoadedAdapters: 2 }));
    await clock.run();
    await trimmed;
    expect(api.calls).toEqual(['unload c', 'unload d']);
    expect(await names()).toEqual(['a', 'b']);
  });
});
