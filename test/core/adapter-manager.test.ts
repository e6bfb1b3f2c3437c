import { AdapterManager } from '../../src/adapters/manager';
import { adapterPolicy } from '../helpers/adapter-policy';
import { BackendError } from '../../src/backends/errors';
import {
  AdapterNotFoundError,
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

/** A unit-test stand-in for the replica API: loads take `loadMs` of virtual time. */
class FakeApi implements ReplicaApi {
  calls: string[] = [];
  failNext: Error[] = [];
  constructor(
    private clock: VirtualClock,
    private loadMs = 100,
  ) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(_url: string, name: string): Promise<LoadOutcome> {
    this.calls.push(`load ${name}`);
    await sleep(this.clock, this.loadMs);
    const f = this.failNext.shift();
    if (f) throw f;
    return 'loaded';
  }
  async unloadAdapter(_url: string, name: string): Promise<UnloadOutcome> {
    this.calls.push(`unload ${name}`);
    return 'unloaded';
  }
}

const policy = adapterPolicy;

async function setup(loadMs = 100) {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await store.applySnapshot(U, { at: 0, ok: true, registry: [{ name: 'boot', path: '/a/boot' }] });
  const api = new FakeApi(clock, loadMs);
  const mgr = new AdapterManager(store, api, clock, silentLogger);
  const ensure = (name: string, p = policy()) => mgr.ensure(U, { name, path: `/adapters/${name}` }, p);
  const settle = async <T>(p: Promise<T>): Promise<T> => {
    await clock.run();
    return p;
  };
  return { clock, store, api, mgr, ensure, settle };
}

const caught = async (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e as RouterError,
  );

describe('AdapterManager', () => {
  it("a caller joining another's load keeps its own deadline (queue + load timeouts), not the load's", async () => {
    // The load started by a long-bounded caller takes 5 s; a caller that joins it with a 500 +
    // 1000 ms bound (an escalated request near its end) must not wait the whole load.
    const { ensure, clock } = await setup(5000);
    const long = ensure('a', policy({ queueTimeoutMs: 30_000, loadTimeoutMs: 30_000 }));
    await clock.run(clock.now() + 10);
    let joined: RouterError | undefined | 'waiting' = 'waiting';
    void caught(ensure('a')).then((e) => (joined = e));
    await clock.run(clock.now() + 1600);
    for (let i = 0; i < 10; i++) await Promise.resolve();
    expect(joined).not.toBe('waiting');
    expect((joined as unknown as RouterError).code).toBe('adapter_slots_busy');
    await clock.run();
    expect(await long).toBe('loaded');
  });

  it('loads a cold adapter once for many concurrent callers; later calls are hits', async () => {
    const { api, ensure, clock, store } = await setup();
    const all = Promise.all(Array.from({ length: 50 }, () => ensure('a')));
    await clock.run();
    const outcomes = await all;
    expect(api.calls).toEqual(['load a']);
    expect(outcomes.filter((o) => o === 'loaded')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'joined')).toHaveLength(49);
    expect(await ensure('a')).toBe('hit');
    expect((await store.residents(U)).find((r) => r.name === 'a')!.state).toBe('loaded');
  });

  it('unloads the least recently used idle adapter to make room, never a static one', async () => {
    const { api, ensure, settle, store, clock } = await setup();
    await settle(ensure('a'));
    await settle(ensure('b'));
    await store.touch(U, 'a', clock.now() + 1); // b is now the least recently used
    await settle(ensure('c'));
    expect(api.calls).toEqual(['load a', 'load b', 'unload b', 'load c']);
    expect((await store.residents(U)).map((r) => r.name).sort()).toEqual(['a', 'boot', 'c']);
  });

  it('never unloads an adapter with requests in flight; waits for one to go idle', async () => {
    const { api, ensure, settle, store, clock } = await setup();
    await settle(ensure('a'));
    await settle(ensure('b'));
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 });
    await store.acquire({ id: 'Lb', url: U, adapter: 'b', at: 0 });
    const pending = ensure('c');
    await clock.run(clock.now() + 200);
    expect(api.calls).toEqual(['load a', 'load b']);
    await store.release('Lb', clock.now());
    await clock.run();
    expect(await pending).toBe('loaded');
    expect(api.calls).toEqual(['load a', 'load b', 'unload b', 'load c']);
  });

  it('fails with a retryable 503 when no adapter goes idle within the queue timeout', async () => {
    const { ensure, settle, store, api } = await setup();
    await settle(ensure('a'));
    await settle(ensure('b'));
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 });
    await store.acquire({ id: 'Lb', url: U, adapter: 'b', at: 0 });
    const err = await settle(caught(ensure('c')));
    expect(err).toBeInstanceOf(RouterError);
    expect([err!.status, err!.code, err!.retryAfterS]).toEqual([503, 'adapter_slots_busy', 1]);
    expect(api.calls).not.toContain('load c');
  });

  it('does not count configured static adapters against the limit, nor evict them', async () => {
    const { ensure, settle, api } = await setup();
    const p = policy({ maxLoadedAdapters: 1, isStatic: (n) => n === 'pinned' });
    await settle(ensure('a', p));
    await settle(ensure('b', p));
    expect(api.calls).toEqual(['load a', 'unload a', 'load b']);
  });

  it('reports a failed load (502: the replica message logged, not told) and backs off exponentially per adapter', async () => {
    const { ensure, settle, api, clock } = await setup();
    api.failNext.push(new BackendError('http', 'LoRA rank 128 is greater than max_lora_rank 64.', 400));
    let err = await settle(caught(ensure('a')));
    expect([err!.status, err!.code]).toEqual([502, 'adapter_load_failed']);
    // The replica's text can name storage paths: the client's message is fixed, the log's has it.
    expect(err!.message).not.toMatch(/max_lora_rank 64/);
    expect(err!.internal).toMatch(/max_lora_rank 64/);
    err = await settle(caught(ensure('a')));
    expect([err!.status, err!.code, err!.retryAfterS]).toEqual([503, 'adapter_load_backoff', 1]);
    expect(api.calls).toEqual(['load a']); // no second attempt inside the window
    await clock.run(clock.now() + 1000);
    api.failNext.push(new BackendError('timeout', 'no answer'));
    await settle(caught(ensure('a')));
    expect(api.calls).toEqual(['load a', 'load a']);
    await clock.run(clock.now() + 1500); // second failure: 2 s window
    expect((await settle(caught(ensure('a'))))!.code).toBe('adapter_load_backoff');
    await clock.run(clock.now() + 600);
    expect(await settle(ensure('a'))).toBe('loaded');
    expect(await ensure('a')).toBe('hit');
  });

  it('a caller whose budget spend is slow is already the load: a peer joins it, and no second load follows its failure', async () => {
    // The budget spend (`beforeLoad`, a Redis call) runs inside the load, once room is there: the
    // flight is set before it, so a peer that comes during the spend joins instead of loading
    // beside it (before, the peer loaded, failed, and the spender had to look at the backoff again).
    const { mgr, clock, api, settle } = await setup(10);
    api.failNext.push(new BackendError('http', 'engine failure', 500));
    const ref = { name: 'a', path: '/adapters/a' };
    const slowSpend = () => sleep(clock, 50);
    const spender = caught(mgr.ensure(U, ref, policy(), undefined, slowSpend));
    const peer = caught(mgr.ensure(U, ref, policy()));
    const [spenderErr, peerErr] = await settle(Promise.all([spender, peer]));
    expect(api.calls).toEqual(['load a']);
    expect([spenderErr?.code, peerErr?.code]).toEqual(['adapter_load_failed', 'adapter_load_failed']);
    const again = await settle(caught(mgr.ensure(U, ref, policy(), undefined, slowSpend)));
    expect(again?.code).toBe('adapter_load_backoff');
    expect(api.calls).toEqual(['load a']);
  });

  it('answers 404 when the replica has no adapter at the path (the client asked for an unknown adapter)', async () => {
    const { ensure, settle, api, store } = await setup();
    api.failNext.push(new AdapterNotFoundError('Loading lora a failed: No adapter found for /adapters/a'));
    const err = await settle(caught(ensure('a')));
    expect([err!.status, err!.code]).toEqual([404, 'model_not_found']);
    expect((await store.residents(U)).map((r) => r.name)).toEqual(['boot']);
  });

  it('gives every concurrent caller the same failure', async () => {
    const { ensure, clock, api } = await setup();
    api.failNext.push(new BackendError('connect', 'ECONNREFUSED'));
    const all = Promise.all(Array.from({ length: 5 }, () => caught(ensure('a'))));
    await clock.run();
    expect((await all).map((e) => e!.code)).toEqual(Array(5).fill('adapter_load_failed'));
    expect(api.calls).toEqual(['load a']);
  });

  it('refuses to load an adapter without a path', async () => {
    const { mgr } = await setup();
    const err = await caught(mgr.ensure(U, { name: 'nopath' }, policy()));
    expect(err!.code).toBe('adapter_load_failed');
  });

  it('shows pending claims in views: the requested adapter as loading, other claims as slots taken', async () => {
    const { mgr, store } = await setup();
    mgr.claim(U, 'x');
    mgr.claim(U, 'y');
    const views = await store.views([U], { name: 'x' }, true);
    mgr.overlayClaims(views, 'x');
    expect(views[0]!.adapter).toMatchObject({ state: 'loading' });
    expect(views[0]!.residentCount).toBe(2); // x and y are both spoken for
    mgr.unclaim(U, 'x');
    mgr.unclaim(U, 'y');
    const fresh = await store.views([U], { name: 'x' }, true);
    mgr.overlayClaims(fresh, 'x');
    expect([fresh[0]!.adapter, fresh[0]!.residentCount]).toEqual([undefined, 0]);
  });
});

/** A replica that reports what it runs (vLLM's `lora_requests_info`), or fails to answer. */
class ReportingApi extends FakeApi {
  busy: string[] | undefined = [];
  down = false;
  asked = 0;
  async activity(): Promise<ReplicaActivity> {
    this.asked++;
    this.calls.push('activity');
    if (this.down) throw new BackendError('timeout', 'GET /metrics: no answer within 1000 ms');
    return this.busy === undefined ? {} : { busy: [...this.busy] };
  }
}

async function reportingSetup() {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  const api = new ReportingApi(clock, 100);
  const mgr = new AdapterManager(store, api, clock, silentLogger);
  const ensure = (name: string, p = policy()) => mgr.ensure(U, { name, path: `/adapters/${name}` }, p);
  const settle = async <T>(p: Promise<T>): Promise<T> => {
    await clock.run();
    return p;
  };
  return { clock, store, api, mgr, ensure, settle };
}

describe('AdapterManager: the replica has the last word on unloads', () => {
  it('asks the replica nothing for a hit or a load into a free slot (the request path costs what it did)', async () => {
    const { api, ensure, settle } = await reportingSetup();
    await settle(ensure('a'));
    await settle(ensure('a'));
    await settle(ensure('b'));
    expect(api.calls).toEqual(['load a', 'load b']);
  });

  it('asks afresh before each unload, and unloads an idle victim the replica does not report', async () => {
    const { api, ensure, settle } = await reportingSetup();
    await settle(ensure('a'));
    await settle(ensure('b'));
    await settle(ensure('c'));
    expect(api.calls).toEqual(['load a', 'load b', 'activity', 'unload a', 'load c']);
  });

  it('loads into the slot a failed load gave back after its read, unloading nothing', async () => {
    // Dst seeds 708211 and 848577: y read the replica full (a loaded, another node's x loading); x's
    // load failed before y asked to unload a. The store refuses that unload (a slot is free): y
    // waits for room as for busy victims, reads again and loads, where it unloaded a (a slot left empty).
    const { api, ensure, settle, store, clock } = await reportingSetup();
    const p = policy();
    await settle(ensure('a', p));
    const x = await store.beginLoad(U, 'x', clock.now(), 2);
    const begin = store.beginUnload.bind(store);
    store.beginUnload = async (...args) => {
      await store.finishLoad(U, 'x', x!, false, clock.now());
      return begin(...args);
    };
    expect(await settle(ensure('y', p))).toBe('loaded');
    expect(api.calls).toEqual(['load a', 'load y']);
  });

  it('passes over a victim the replica reports running or waiting (no lease holds it) for another idle one', async () => {
    const { api, ensure, settle, store } = await reportingSetup();
    await settle(ensure('a'));
    await settle(ensure('b'));
    api.busy = ['a']; // a runs there, unknown to the leases
    await settle(ensure('c'));
    // b is asked about afresh too: each unload has its own scrape, taken after its beginUnload.
    expect(api.calls).toEqual(['load a', 'load b', 'activity', 'activity', 'unload b', 'load c']);
    expect((await store.residents(U)).map((r) => [r.name, r.state]).sort()).toEqual([
      ['a', 'loaded'],
      ['c', 'loaded'],
    ]);
  });

  it('waits for room while the replica reports every victim busy, then unloads once it reports one idle', async () => {
    const { api, ensure, clock } = await reportingSetup();
    const p = policy({ maxLoadedAdapters: 1, queueTimeoutMs: 5000 });
    const first = ensure('a', p);
    await clock.run();
    await first;
    api.busy = ['a'];
    const pending = ensure('b', p);
    await clock.run(clock.now() + 1000);
    expect(api.calls.filter((c) => c.startsWith('unload'))).toEqual([]);
    expect(api.asked).toBeGreaterThan(1); // asked again on each retry, never trusting an old answer
    api.busy = [];
    await clock.run();
    expect(await pending).toBe('loaded');
    expect(api.calls.slice(-2)).toEqual(['unload a', 'load b']);
  });

  it('unloads nothing on a replica that does not answer the fresh scrape: 503 after the queue timeout', async () => {
    const { api, ensure, settle, store } = await reportingSetup();
    const p = policy({ maxLoadedAdapters: 1 });
    await settle(ensure('a', p));
    api.down = true;
    const err = await settle(caught(ensure('b', p)));
    expect([err!.status, err!.code]).toEqual([503, 'adapter_slots_busy']);
    expect(api.calls.filter((c) => c.startsWith('unload'))).toEqual([]);
    expect((await store.residents(U)).map((r) => [r.name, r.state])).toEqual([['a', 'loaded']]);
  });

  it('a replica that cannot say (no lora_requests_info) leaves the decision to the leases', async () => {
    const { api, ensure, settle, store } = await reportingSetup();
    const p = policy({ maxLoadedAdapters: 1 });
    await settle(ensure('a', p));
    api.busy = undefined;
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 });
    const err = await settle(caught(ensure('b', p)));
    expect(err!.code).toBe('adapter_slots_busy'); // the lease still forbids it
    await store.release('La', 0);
    expect(await settle(ensure('b', p))).toBe('loaded');
    expect(api.calls.filter((c) => c.startsWith('unload'))).toEqual(['unload a']);
  });

  it('a trim after a poll acts at once, not behind a load waiting for room on the same replica', async () => {
    // Limit 1: a busy, b's load waits for room (holding the replica's room lock). A load that
    // landed late (c) shows up in a poll: the trim must unload the idle c on that poll, not
    // after b's wait (up to the queue timeout) ends.
    const { api, ensure, settle, store, clock, mgr } = await setup();
    const one = policy({ maxLoadedAdapters: 1, queueTimeoutMs: 5000 });
    await settle(ensure('a', one));
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 });
    const pending = caught(ensure('b', one));
    await clock.run(clock.now() + 10);
    expect(api.calls).toEqual(['load a']);
    await store.applySnapshot(U, {
      at: clock.now(),
      ok: true,
      registry: [
        { name: 'boot', path: '/a/boot' },
        { name: 'a', path: '/adapters/a' },
        { name: 'c', path: '/adapters/c' },
      ],
      managed: () => true,
    });
    let trimmed = false;
    void mgr.trim(U, one).then(() => (trimmed = true));
    // No virtual time passes: the waiting load's next look is 250 ms away.
    for (let i = 0; i < 50 && !trimmed; i++) await new Promise((r) => setImmediate(r));
    expect(trimmed).toBe(true);
    expect(api.calls).toEqual(['load a', 'unload c']);
    await store.release('La', clock.now());
    await clock.run();
    expect(await pending).toBeUndefined();
    expect(api.calls).toEqual(['load a', 'unload c', 'unload a', 'load b']);
  });
});

/**
 * A store whose unload locks lapse as Redis's do (`expire` hands the adapter back to requests) when
 * the replica's fresh word takes longer than the lock's TTL.
 */
class LapsingStore extends MemoryFleetStore {
  ttls: number[] = [];
  lapsed = false;
  override async beginUnload(
    url: string,
    adapter: string,
    at: number,
    ttlMs?: number,
    forAdapter?: string,
    limit?: number,
  ) {
    this.ttls.push(ttlMs ?? 0);
    return super.beginUnload(url, adapter, at, ttlMs, forAdapter, limit);
  }
  override async holds(url: string, adapter: string, fence: number): Promise<boolean> {
    if (this.lapsed) return false;
    return super.holds(url, adapter, fence);
  }
}

describe('AdapterManager: the unload lock outlives the replica’s word', () => {
  it('sizes the lock for the fresh scrape too, and unloads nothing once the lock lapsed during it', async () => {
    const clock = new VirtualClock();
    const store = new LapsingStore();
    await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const api = new ReportingApi(clock, 100);
    const mgr = new AdapterManager(store, api, clock, silentLogger);
    mgr.replicaWord.timeoutMs = () => 20_000; // a poll timeout of 20 s: a slow /metrics is not a failure
    const p = policy({ queueTimeoutMs: 300 });
    const ensure = async (name: string) => {
      const r = mgr.ensure(U, { name, path: `/adapters/${name}` }, p).catch((e: Error) => e);
      await clock.run();
      return r;
    };
    await ensure('a');
    await ensure('b');
    // The scrape outlasts the lock: by the time the replica answers, the lock is gone (its TTL
    // passed on this node's clock, which the unload checks; the word's freshness bound is lifted
    // so that only the lock can stop it).
    mgr.replicaWord.freshMs = Infinity;
    const ask = api.activity.bind(api);
    api.activity = async () => {
      await sleep(clock, store.ttls.at(-1)!);
      store.lapsed = true;
      return ask();
    };
    await ensure('c');
    expect(store.ttls[0]).toBeGreaterThanOrEqual(p.loadTimeoutMs + 20_000);
    expect(api.calls.filter((c) => c.startsWith('unload'))).toEqual([]);
  });
});

describe('AdapterManager: the limit when the store lacks what the replica holds', () => {
  /** A replica that lists what it holds (`/v1/models`): `x0` loaded behind the store's back. */
  class ListingApi extends FakeApi {
    held = new Set(['x0']);
    /** The most adapters held at once. */
    peak = 1;
    private asked: (() => void)[] = [];
    private reads = 0;
    override async loadAdapter(url: string, name: string): Promise<LoadOutcome> {
      const r = await super.loadAdapter(url, name);
      this.held.add(name);
      this.peak = Math.max(this.peak, this.held.size);
      return r;
    }
    override async unloadAdapter(url: string, name: string): Promise<UnloadOutcome> {
      this.held.delete(name);
      return super.unloadAdapter(url, name);
    }
    /** The first two reads answer together: both nodes read the replica before either claims. */
    async residency(): Promise<{ name: string; path: string }[]> {
      if (++this.reads === 1) await new Promise<void>((r) => this.asked.push(r));
      else for (const r of this.asked.splice(0)) r();
      return [...this.held].map((name) => ({ name, path: `/adapters/${name}` }));
    }
  }

  it('two nodes sharing an emptied store and reading the replica at once: the replica never holds more than the limit', async () => {
    const clock = new VirtualClock();
    const store = new MemoryFleetStore(); // shared by both nodes, emptied: it never saw x0
    await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const api = new ListingApi(clock, 100);
    const nodes = [0, 1].map(() => new AdapterManager(store, api, clock, silentLogger));
    const outcomes = ['x1', 'x2'].map((name, i) =>
      caught(nodes[i]!.ensure(U, { name, path: `/adapters/${name}` }, policy())),
    );
    await clock.run();
    await Promise.all(outcomes);
    // The store's atomic check counted x0 as taking a slot: the second load waited for room (and
    // took it from the idle first one), never loading beside it into a full replica.
    expect(api.peak).toBe(2);
  });
});

/**
 * The cold-load budget counts loads, not attempts (`beforeLoad`, spent just before a free slot is
 * claimed): a request refused for want of a slot starts no load, so it spends nothing. Found in the
 * 30-minute fault run (seed 11, 2026-12-03): 28 loads in 30 minutes against a budget of 20 a minute,
 * 556 requests refused 503 `adapter_slots_busy` and 15,049 refused 429 "the fleet has started its
 * allowed adapter loads" though no load had started.
 */
describe('AdapterManager: the cold-load budget is spent by loads only', () => {
  async function budgeted() {
    const s = await reportingSetup();
    const spends: string[] = [];
    const p = policy({ maxLoadedAdapters: 1 });
    const ensure = (name: string) =>
      s.mgr.ensure(U, { name, path: `/adapters/${name}` }, p, undefined, async () => {
        spends.push(name);
      });
    /** The replica's load and unload calls (the fresh asks before an unload left out). */
    const ops = () => s.api.calls.filter((c) => c !== 'activity');
    return { ...s, spends, ensure, ops };
  }

  it('a request refused 503 for want of a slot spends nothing', async () => {
    const { store, spends, ensure, ops, settle } = await budgeted();
    expect(await settle(ensure('a'))).toBe('loaded');
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 }); // the only slot, busy
    const refused = await settle(caught(ensure('b')));
    expect(refused).toBeInstanceOf(RouterError);
    expect(refused!.code).toBe('adapter_slots_busy');
    expect(ops()).toEqual(['load a']);
    expect(spends).toEqual(['a']);
  });

  it('a request refused 503 because the replica reports the only victim busy (no lease holds it) spends nothing', async () => {
    // The fault run's case: a node cut off from Redis runs requests the shared leases do not
    // show, so the store counts the adapter idle and the replica's word keeps it.
    const { api, spends, ensure, ops, settle } = await budgeted();
    expect(await settle(ensure('a'))).toBe('loaded');
    api.busy = ['a'];
    const refused = await settle(caught(ensure('b')));
    expect(refused!.code).toBe('adapter_slots_busy');
    expect(ops()).toEqual(['load a']);
    expect(spends).toEqual(['a']);
  });

  it('a request that waits for the slot and then loads spends once', async () => {
    const { store, spends, ensure, ops, settle, clock } = await budgeted();
    expect(await settle(ensure('a'))).toBe('loaded');
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 });
    // Released while b waits for room (its 500 ms queue timeout): a is unloaded, b loaded.
    const pending = ensure('b');
    await clock.run(clock.now() + 100);
    await store.release('La', clock.now());
    expect(await settle(pending)).toBe('loaded');
    expect(ops()).toEqual(['load a', 'unload a', 'load b']);
    expect(spends).toEqual(['a', 'b']);
  });

  it('room made for a request the budget refused, then taken by another load, is made again for its next', async () => {
    // Seed 437527: the store kept the room for x after y's load took it (one unload per load), so
    // x's next request, finding the replica full, could unload nothing until the unload's TTL.
    const { mgr, spends, ensure, ops, settle } = await budgeted();
    expect(await settle(ensure('a'))).toBe('loaded');
    const refused = () => Promise.reject(new Error('cold-load budget'));
    const refuse = mgr.ensure(
      U,
      { name: 'x', path: '/adapters/x' },
      policy({ maxLoadedAdapters: 1 }),
      undefined,
      refused,
    );
    expect(await settle(caught(refuse))).toBeInstanceOf(Error);
    expect(await settle(ensure('y'))).toBe('loaded'); // into the slot made for x
    expect(await settle(ensure('x'))).toBe('loaded');
    expect(ops()).toEqual(['load a', 'unload a', 'load y', 'unload y', 'load x']);
    expect(spends).toEqual(['a', 'y', 'x']);
  });
});

describe('AdapterManager: a replica over its limit (review of e28f9b9)', () => {
  // A known hole until the store judged a room by the caller's limit: max_loaded_adapters lowered
  // from 3 to 2 with a, b and c loaded. x needs two unloads; the store allowed one per load (the
  // room made for x refused the second) and no load could begin on the still-full replica, so every
  // request for x was refused 503 until the first unload's lock TTL ended: 8,100 ms of virtual time,
  // alone on an idle fleet. Now the first room leaves the replica full (2 of 2): the second goes.
  it('a cold adapter that needs two unloads gets them for its first request', async () => {
    const { api, ensure, settle } = await setup();
    for (const n of ['a', 'b', 'c'])
      expect(await settle(ensure(n, policy({ maxLoadedAdapters: 3 })))).toBe('loaded');
    expect(await settle(caught(ensure('x', policy({ maxLoadedAdapters: 2 }))))).toBeUndefined();
    expect(api.calls).toEqual(['load a', 'load b', 'load c', 'unload a', 'unload b', 'load x']);
  });
});

/** A manager on one replica whose memory store records the limit each `beginUnload` is given. */
async function limitRecordingManager() {
  const clock = new VirtualClock();
  const limits: (number | undefined)[] = [];
  const store = new (class extends MemoryFleetStore {
    override async beginUnload(
      url: string,
      adapter: string,
      at: number,
      ttlMs?: number,
      forAdapter?: string,
      limit?: number,
    ) {
      limits.push(limit);
      return super.beginUnload(url, adapter, at, ttlMs, forAdapter, limit);
    }
  })();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await store.applySnapshot(U, { at: 0, ok: true, registry: [{ name: 'boot', path: '/a/boot' }] });
  const api = new FakeApi(clock);
  const mgr = new AdapterManager(store, api, clock, silentLogger);
  return { clock, limits, api, mgr };
}

describe('AdapterManager: the limit a room is judged by', () => {
  it('is the one a load is given: a configured static adapter loaded at runtime counts in the store', async () => {
    // `s` is configured static (never a victim, not counted by the policy) but was loaded at runtime:
    // the store counts it, so with 1 slot the store's limit is 2. Judged by 1, the room an unload made
    // for x would read as taken (2 of 1) and let a second node unload another adapter for x.
    const { clock, limits, api, mgr } = await limitRecordingManager();
    const p = policy({ maxLoadedAdapters: 1, isStatic: (n) => n === 's' });
    for (const n of ['s', 'a', 'x']) {
      const done = mgr.ensure(U, { name: n, path: `/adapters/${n}` }, p);
      await clock.run();
      expect(await done).toBe('loaded');
    }
    expect(api.calls).toEqual(['load s', 'load a', 'unload a', 'load x']);
    expect(limits).toEqual([2]);
  });
});

describe('AdapterManager: a trim beside a room made for an adapter (review of 962db45)', () => {
  it('a cold adapter on a replica over its limit waits for a trim under way instead of unloading a third', async () => {
    // max_loaded_adapters lowered from 3 to 2 with a, b and c loaded: a poll's trim is unloading a (a
    // 300 ms call) when x comes. x's unload of b leaves 2 of 2, the trim's a still counted: the store let
    // x unload c as well, and once the trim ended the replica held x alone, 1 of 2.
    const { clock, api, store, mgr, ensure, settle } = await setup();
    for (const n of ['a', 'b', 'c'])
      expect(await settle(ensure(n, policy({ maxLoadedAdapters: 3 })))).toBe('loaded');
    const unload = api.unloadAdapter.bind(api);
    let trimming = false;
    api.unloadAdapter = async (url, name) => {
      if (name === 'a') {
        trimming = true;
        await sleep(clock, 300); // within x's 500 ms queue timeout
      }
      return unload(url, name);
    };
    const trimmed = mgr.trim(U, policy({ maxLoadedAdapters: 2 }));
    for (let i = 0; i < 50 && !trimming; i++) await clock.run(clock.now() + 10);
    expect(trimming).toBe(true);
    expect(await settle(caught(ensure('x', policy({ maxLoadedAdapters: 2 }))))).toBeUndefined();
    await settle(trimmed);
    // (The trim's call is listed when it ends.)
    expect(api.calls.slice(3).filter((c) => c.startsWith('unload'))).toEqual(['unload b', 'unload a']);
    expect((await store.residents(U)).filter((r) => r.name !== 'boot').map((r) => r.name)).toHaveLength(2);
  });
});

describe('AdapterManager: two trims of one replica over its limit (review of be567e1)', () => {
  it('a trim begun on a stale reading unloads nothing once the excess is gone', async () => {
    // Two nodes on one store poll a, b, c over a limit of 2 and trim. The second node's reading is
    // taken before the first trim ends and acted on after it (a slow round trip): the store granted
    // its trim whatever the count, so b went too and the replica held c alone, 1 of 2.
    const { clock, api, store, mgr, ensure, settle } = await setup();
    for (const n of ['a', 'b', 'c'])
      expect(await settle(ensure(n, policy({ maxLoadedAdapters: 3 })))).toBe('loaded');
    let firstDone!: () => void;
    const first = new Promise<void>((r) => (firstDone = r));
    let stale = true;
    const slow = new Proxy(store, {
      get(t, p) {
        if (p === 'residents')
          return async (url: string) => {
            const read = await t.residents(url);
            if (stale) await first; // this node's reading arrives after the other's trim ended
            stale = false;
            return read;
          };
        const v = Reflect.get(t, p) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
    const api2 = new FakeApi(clock);
    const mgr2 = new AdapterManager(slow, api2, clock, silentLogger);
    const limit2 = policy({ maxLoadedAdapters: 2 });
    const second = mgr2.trim(U, limit2);
    await settle(mgr.trim(U, limit2));
    firstDone();
    await settle(second);
    expect([...api.calls.slice(3), ...api2.calls]).toEqual(['unload a']);
    expect((await store.residents(U)).filter((r) => r.name !== 'boot').map((r) => r.name)).toEqual([
      'b',
      'c',
    ]);
  });

  it('gives the store the limit it counts against: a configured static adapter loaded at runtime counts', async () => {
    // `s` is configured static but was loaded at runtime: the store counts s, a and b, so with 1 slot
    // its limit is 2. Judged by 1, a trim on a stale reading of a, b would still take b (2 over 1).
    const { clock, limits, api, mgr } = await limitRecordingManager();
    const isStatic = (n: string) => n === 's';
    for (const n of ['s', 'a', 'b']) {
      const done = mgr.ensure(
        U,
        { name: n, path: `/adapters/${n}` },
        policy({ maxLoadedAdapters: 3, isStatic }),
      );
      await clock.run();
      expect(await done).toBe('loaded');
    }
    const trimmed = mgr.trim(U, policy({ maxLoadedAdapters: 1, isStatic }));
    await clock.run();
    await trimmed;
    expect(api.calls).toEqual(['load s', 'load a', 'load b', 'unload a']);
    expect(limits).toEqual([2]);
  });
});

/**
 * A load queued behind the room lock of its replica, while the lock's holder waits for an adapter
 * to go idle, and the adapter it is for made resident there meanwhile by another node. The queued
 * request's own lease (taken at its decision) keeps that adapter busy, so the holder's wait ends
 * only at its deadline: a cycle inside one process. Found by the dst's tally of answers (seed 2937
 * --no-overload, no fault and no overload drawn): `sql` loaded on replica-2 by node 1 at 2,070 ms
 * and resident until 6,949 ms; node 0's request of 754 ms for it, queued behind node 0's room
 * lock (a `team` load waiting for room there), was answered after 7 s; node 0's request of
 * 1,821 ms joined that load and was refused 503 "its load is still under way" at 4,828 ms.
 */
describe('AdapterManager: a load queued behind a wait for room, its adapter made resident by a peer', () => {
  it('a request joining it is served from the resident adapter, not refused while it waits', async () => {
    const clock = new VirtualClock();
    const store = new MemoryFleetStore();
    await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const api = new FakeApi(clock, 100);
    const [here, peer] = [0, 1].map(() => new AdapterManager(store, api, clock, silentLogger));
    const ensure = (m: AdapterManager, name: string, p = policy()) =>
      m.ensure(U, { name, path: `/adapters/${name}` }, p);
    // Both slots taken by adapters with requests in flight.
    for (const name of ['a', 'b']) await Promise.all([ensure(here!, name), clock.run()]);
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 });
    await store.acquire({ id: 'Lb', url: U, adapter: 'b', at: 0 });
    // Here: a load of `t` waits for room (holding the replica's room lock) for up to 5 s.
    const long = policy({ queueTimeoutMs: 5000 });
    const waiting = caught(ensure(here!, 't', long));
    await clock.run(clock.now() + 50);
    // A request for `s`, its lease taken, queues its load behind it.
    await store.acquire({ id: 'Ls', url: U, adapter: 's', at: clock.now() });
    const queued = caught(ensure(here!, 's', long));
    await clock.run(clock.now() + 10);
    // `b` goes idle and the peer, which shares the store, unloads it and loads `s` there.
    await store.release('Lb', clock.now());
    const byPeer = ensure(peer!, 's');
    await clock.run(clock.now() + 300);
    expect(await byPeer).toBe('loaded');
    expect((await store.residents(U)).find((r) => r.name === 's')?.state).toBe('loaded');
    // A second request for `s` here, with the default bound (500 ms queue, 1 s load): `s` is resident.
    await store.acquire({ id: 'Ls2', url: U, adapter: 's', at: clock.now() });
    const joined = caught(ensure(here!, 's'));
    await clock.run();
    expect(await joined).toBeUndefined();
    expect(await queued).toBeUndefined();
    await waiting;
  });
});
