/**
 * Unit test of AdapterManager (src/adapters/manager.ts, one module), written against the survivors
 * of `npm run mutation:safety -- manager` (docs/reliability.md#mutation-testing): the undo of a load
 * that took the replica over its limit, a load another process has under way, a lock that lapsed
 * before the load call, configured static adapters and the limit, a joiner's
 * own deadline, and what the call listeners and the event log are told. A virtual clock started
 * well past 0, so a time measured from the wrong origin shows.
 */
import { AdapterManager, type LoadRecord } from '../../src/adapters/manager';
import { adapterPolicy } from '../helpers/adapter-policy';
import { BackendError } from '../../src/backends/errors';
import {
  AdapterRejectedError,
  type LoadOutcome,
  type ReplicaActivity,
  type ReplicaApi,
  type UnloadOutcome,
} from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { RouterError } from '../../src/errors';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
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
  async activity(): Promise<ReplicaActivity> {
    return { busy: [] };
  }
  async residency(): Promise<{ name: string; path: string }[]> {
    return [...this.held].map((name) => ({ name, path: `/adapters/${name}` }));
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
    expect(records.map((r) => [r.op, r.adapter, r.ok])).toEqual([
      ['load', 'a', true],
      ['unload', 'a', true],
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

  it('an undo whose unload fails keeps the adapter loaded, in the store too, and serves the request', async () => {
    const { api, ensure, outcome, names } = await setup([], 100);
    api.listAfterLoad = ['b'];
    api.unloadFails = true;
    const p = ensure('a', policy({ maxLoadedAdapters: 1 }));
    expect((await outcome(p)).err).toBeUndefined();
    expect(await p).toBe('loaded');
    expect(api.calls).toEqual(['load a', 'unload a']);
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

  it('a load elsewhere that never ends: 503 at the deadline (queue + load timeouts), not a poll later', async () => {
    const { api, store, ensure, outcome } = await setup();
    await store.beginLoad(U, 'a', T0, 2);
    const { err, at } = await outcome(ensure('a'));
    expect(err!.status).toBe(503);
    expect(at).toBe(T0 + 1500);
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
    expect(events.map((e) => [e.adapter, e.op, e.result, e.ms])).toEqual([
      ['a', 'load', 'ok', 100],
      ['b', 'load', 'error', 100],
    ]);
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
