/**
 * Unload and load calls that fail at the replica (adversarial review of the unload path): what the
 * store holds afterwards, whether the lock is given back, and whether a request can be told an
 * adapter is resident that the replica no longer holds.
 */
import { AdapterManager } from '../../src/adapters/manager';
import { BackendError } from '../../src/backends/errors';
import {
  AdapterNotFoundError,
  AdapterRejectedError,
  type LoadOutcome,
  type ReplicaActivity,
  type ReplicaApi,
  type UnloadOutcome,
} from '../../src/backends/replica-api';
import { randomBytes } from 'node:crypto';
import { sleep, systemClock, type Clock, VirtualClock } from '../../src/clock';
import { RouterError } from '../../src/errors';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { silentLogger } from '../../src/log';
import { adapterPolicy as policy } from '../helpers/adapter-policy';
import { useRedisStores } from '../helpers/redis-stores';

const U = 'http://r1:8000';

/** How the next unload call goes wrong. */
type UnloadFault =
  | 'reset-after' // the replica unloads, then the connection drops before its answer
  | 'timeout-after' // the replica unloads, its answer comes after the caller's bound
  | 'error500' // the replica refuses it (an engine fault): still loaded
  | 'timeout'; // no answer, nothing done

/** A vLLM stand-in with a registry (`/v1/models`) and an activity report (`/metrics`). */
class Replica implements ReplicaApi {
  calls: string[] = [];
  held = new Set<string>();
  busy: string[] = [];
  unloadFaults: UnloadFault[] = [];
  loadFaults: Error[] = [];
  /** Whether `/v1/models` answers. */
  listing = true;
  /** Another router's load landing with each of this one's. */
  peerLoad: string | undefined;
  /** Loads the replica makes whose answer is then lost (the connection dropped after). */
  lostLoadAnswers = 0;
  constructor(
    private readonly clock: Clock,
    private readonly loadMs = 100,
  ) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(_url: string, name: string): Promise<LoadOutcome> {
    this.calls.push(`load ${name}`);
    await sleep(this.clock, this.loadMs);
    const f = this.loadFaults.shift();
    if (f) throw f;
    if (this.held.has(name)) return 'already-loaded';
    this.held.add(name);
    if (this.peerLoad !== undefined) this.held.add(this.peerLoad);
    if (this.lostLoadAnswers > 0) {
      this.lostLoadAnswers--;
      throw new BackendError('connect', 'POST /v1/load_lora_adapter: socket hang up');
    }
    return 'loaded';
  }
  async unloadAdapter(_url: string, name: string, timeoutMs: number): Promise<UnloadOutcome> {
    this.calls.push(`unload ${name}`);
    const f = this.unloadFaults.shift();
    if (f === 'error500') throw new BackendError('http', 'Internal Server Error', 500);
    if (f === 'timeout' || f === 'timeout-after') {
      if (f === 'timeout-after') this.held.delete(name);
      await sleep(this.clock, timeoutMs);
      throw new BackendError('timeout', `POST /v1/unload_lora_adapter: no answer within ${timeoutMs} ms`);
    }
    const had = this.held.delete(name);
    if (f === 'reset-after')
      throw new BackendError('connect', 'POST /v1/unload_lora_adapter: socket hang up');
    return had ? 'unloaded' : 'absent';
  }
  async activity(): Promise<ReplicaActivity> {
    return { busy: [...this.busy] };
  }
  async residency(): Promise<{ name: string; path: string }[]> {
    if (!this.listing) throw new BackendError('timeout', 'GET /v1/models: no answer');
    return [...this.held].map((name) => ({ name, path: `/adapters/${name}` }));
  }
}

async function setup(loadMs = 100) {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  const api = new Replica(clock, loadMs);
  const mgr = new AdapterManager(store, api, clock, silentLogger);
  const ensure = (name: string, p = policy()) => mgr.ensure(U, { name, path: `/adapters/${name}` }, p);
  const settle = async <T>(p: Promise<T>): Promise<T> => {
    await clock.run();
    return p;
  };
  const state = async () =>
    Object.fromEntries((await store.residents(U)).map((r) => [r.name, r.state] as const));
  return { clock, store, api, mgr, ensure, settle, state };
}

const caught = async (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e as RouterError,
  );

describe('an unload whose call fails', () => {
  it.each(['reset-after', 'timeout-after'] as const)(
    'after the replica did unload (%s): no request is told the adapter is resident there',
    async (fault) => {
      const { api, ensure, settle, state } = await setup();
      await settle(ensure('a'));
      await settle(ensure('b'));
      api.unloadFaults.push(fault);
      // c makes room: a (least recently used) is unloaded by the replica, its answer lost.
      await settle(caught(ensure('c')));
      expect(api.held.has('a')).toBe(false);
      // A request for a now: a hit would proxy it to a replica that answers 404 "does not exist".
      const outcome = await settle(caught(ensure('a')).then(() => undefined));
      expect(outcome).toBeUndefined();
      expect(api.held.has('a')).toBe(true);
      // The store follows the replica: nothing it lists as loaded is missing there.
      const s = await state();
      for (const [name, st] of Object.entries(s))
        if (st === 'loaded') expect([name, api.held.has(name)]).toEqual([name, true]);
    },
  );
});

describe('an after-load undo whose unload call fails', () => {
  it.each(['reset-after', 'timeout-after'] as const)(
    'after the replica did unload (%s): the request is not sent to the adapter undone',
    async (fault) => {
      // Limit 1. Another router's load of z lands beside this one's c (each read the replica with a
      // slot free): the after-load check undoes c, the one no request can be on. The replica does
      // unload it, but the answer is lost: the load was ended as landed, and the request proxied to
      // c, which the replica no longer holds (404 "does not exist").
      const { api, ensure, settle, state } = await setup();
      api.peerLoad = 'z';
      api.unloadFaults.push(fault);
      const err = await settle(caught(ensure('c', policy({ maxLoadedAdapters: 1 }))));
      expect(api.calls).toEqual(['load c', 'unload c']);
      expect(api.held.has('c')).toBe(false);
      expect([err?.code, (await state()).c]).toEqual(['adapter_slots_busy', undefined]);
    },
  );

  it('that the replica refused (500): the adapter stays, served, and the store says loaded', async () => {
    const { api, ensure, settle, state } = await setup();
    api.peerLoad = 'z';
    api.unloadFaults.push('error500');
    expect(await settle(ensure('c', policy({ maxLoadedAdapters: 1 })))).toBe('loaded');
    expect([api.held.has('c'), (await state()).c]).toEqual([true, 'loaded']);
  });
});

describe('a load whose answer is lost after the replica loaded it', () => {
  it('the request is served by it, and the next one is a hit (not a failure held by the backoff)', async () => {
    const { api, ensure, settle, state } = await setup();
    api.lostLoadAnswers = 1;
    const first = await settle(caught(ensure('a')));
    expect(api.held.has('a')).toBe(true);
    const second = await settle(caught(ensure('a')));
    expect([first?.code, second?.code, (await state()).a]).toEqual([undefined, undefined, 'loaded']);
    expect(api.calls).toEqual(['load a']);
  });

  it('one that took the replica over its limit goes through the after-load undo as any load', async () => {
    const { api, ensure, settle, state } = await setup();
    api.lostLoadAnswers = 1;
    api.peerLoad = 'z';
    const err = await settle(caught(ensure('c', policy({ maxLoadedAdapters: 1 }))));
    expect(api.calls).toEqual(['load c', 'unload c']);
    expect([err?.code, (await state()).c, [...api.held]]).toEqual(['adapter_slots_busy', undefined, ['z']]);
  });

  it('one whose registry cannot be read then fails as before (the poll adopts it)', async () => {
    const { api, ensure, settle, state } = await setup();
    api.lostLoadAnswers = 1;
    api.listing = false;
    const err = await settle(caught(ensure('a')));
    expect([err?.code, (await state()).a, api.held.has('a')]).toEqual([
      'adapter_load_failed',
      undefined,
      true,
    ]);
  });

  it('one the replica does not list failed: the request gets its 502, nothing is taken as loaded', async () => {
    const { api, ensure, settle, state } = await setup();
    api.loadFaults.push(new BackendError('connect', 'POST /v1/load_lora_adapter: connection refused'));
    const err = await settle(caught(ensure('a')));
    expect([err?.code, (await state()).a, api.held.has('a')]).toEqual([
      'adapter_load_failed',
      undefined,
      false,
    ]);
  });
});

describe('an unload the replica did not do', () => {
  it.each(['error500', 'timeout'] as const)(
    '(%s): the adapter stays loaded, its lock is given back, and a later unload of it is granted',
    async (fault) => {
      const { api, store, ensure, settle, state } = await setup();
      await settle(ensure('a'));
      await settle(ensure('b'));
      // Every call fails while c waits for room: no room made, c gets its 503.
      api.unloadFaults.push(...Array<UnloadFault>(50).fill(fault));
      const err = await settle(caught(ensure('c')));
      api.unloadFaults.length = 0;
      expect(err?.code).toBe('adapter_slots_busy');
      expect([...api.held].sort()).toEqual(['a', 'b']);
      expect(await state()).toEqual({ a: 'loaded', b: 'loaded' });
      // No lock left: a request is a hit (not a wait behind "unloading"), and a lease can be taken.
      expect(await settle(ensure('a'))).toBe('hit');
      expect((await store.views([U], { name: 'a' }))[0]?.adapter?.state).toBe('loaded');
      // The replica answers again: the next cold request makes room.
      expect(await settle(ensure('c'))).toBe('loaded');
      expect(api.held.size).toBe(2);
    },
  );

  it('a failed call whose registry cannot be read leaves the adapter loaded (the poll reconciles)', async () => {
    // Pins today's choice when the replica cannot say: the store keeps it, as before the fix.
    const { api, ensure, settle, state } = await setup();
    await settle(ensure('a'));
    await settle(ensure('b'));
    api.unloadFaults.push('reset-after', ...Array<UnloadFault>(50).fill('error500'));
    api.listing = false;
    expect((await settle(caught(ensure('c'))))?.code).toBe('adapter_slots_busy');
    expect(api.held.has('a')).toBe(false);
    expect((await state()).a).toBe('loaded');
    // Once the replica answers, the next unload of a is answered "absent", which ends it as gone.
    api.unloadFaults.length = 0;
    api.listing = true;
    expect(await settle(ensure('c'))).toBe('loaded');
    expect(await state()).toEqual({ b: 'loaded', c: 'loaded' });
  });
});

describe('a load that fails while other requests wait for it', () => {
  it.each([
    [
      'rank (400)',
      new AdapterRejectedError('LoRA rank 64 is greater than max_lora_rank 16.'),
      'adapter_rejected',
    ],
    ['missing path (404)', new AdapterNotFoundError('No adapter found for /adapters/c'), 'model_not_found'],
    ['engine (500)', new BackendError('http', 'Internal Server Error', 500), 'adapter_load_failed'],
  ])(
    '%s: one call, every joiner gets the failure, the slot and the lock are free',
    async (_k, failure, code) => {
      const { api, ensure, settle, state } = await setup();
      await settle(ensure('a'));
      api.loadFaults.push(failure);
      const all = Promise.all(Array.from({ length: 20 }, () => caught(ensure('c'))));
      const errs = await settle(all);
      expect(api.calls.filter((c) => c === 'load c')).toHaveLength(1);
      expect(new Set(errs.map((e) => e?.code))).toEqual(new Set([code]));
      expect(await state()).toEqual({ a: 'loaded' });
      // The slot it claimed is free: another adapter loads there without unloading a.
      expect(await settle(ensure('d'))).toBe('loaded');
      expect(api.calls.filter((c) => c.startsWith('unload'))).toEqual([]);
    },
  );
});

const env = useRedisStores();

describe('across nodes sharing Redis: an unload whose answer was lost', () => {
  it('a request on another node is not told the adapter is resident', async () => {
    const p = `uf${randomBytes(4).toString('hex')}:`;
    const stores = [0, 1].map((i) => new RedisFleetStore(env.redis.config(p, { timeout: 2000 }), `node${i}`));
    env.open.push(...stores);
    await stores[0]!.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const api = new Replica(systemClock, 5);
    const [n0, n1] = stores.map((s) => new AdapterManager(s, api, systemClock, silentLogger));
    const ref = (name: string) => ({ name, path: `/adapters/${name}` });
    expect(await n0!.ensure(U, ref('a'), policy())).toBe('loaded');
    expect(await n0!.ensure(U, ref('b'), policy())).toBe('loaded');
    api.unloadFaults.push('reset-after');
    // Node 0 makes room for c: the replica unloads a, the answer is lost; then b goes.
    expect(await n0!.ensure(U, ref('c'), policy())).toBe('loaded');
    expect(api.held.has('a')).toBe(false);
    // Node 1's request for a: not a hit on a replica that no longer holds it.
    await n1!.ensure(U, ref('a'), policy());
    expect(api.held.has('a')).toBe(true);
    expect(api.held.size).toBeLessThanOrEqual(2);
  });
});

describe('across nodes sharing Redis: a load that fails while the other node waits for it', () => {
  it('the waiting node makes one attempt of its own at most, and each of its requests fails', async () => {
    const p = `ul${randomBytes(4).toString('hex')}:`;
    const stores = [0, 1].map((i) => new RedisFleetStore(env.redis.config(p, { timeout: 2000 }), `node${i}`));
    env.open.push(...stores);
    await stores[0]!.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const api = new Replica(systemClock, 200);
    const [n0, n1] = stores.map((s) => new AdapterManager(s, api, systemClock, silentLogger));
    stores[1]!.onRemoteChange = () => n1!.roomChanged.notify();
    const ref = { name: 'c', path: '/adapters/c' };
    const rank = () => new AdapterRejectedError('LoRA rank 64 is greater than max_lora_rank 16.');
    api.loadFaults.push(rank(), rank());
    const first = caught(n0!.ensure(U, ref, policy()));
    // Node 1's requests come while node 0's load is under way (`loading` in the shared state).
    await new Promise((r) => setTimeout(r, 50));
    const waiting = Array.from({ length: 10 }, () => caught(n1!.ensure(U, ref, policy())));
    const errs = await Promise.all([first, ...waiting]);
    // Each fails: with the rejection, or (one of node 1's that woke after its own attempt failed) held
    // off by its backoff.
    expect(errs[0]?.code).toBe('adapter_rejected');
    for (const e of errs) expect(['adapter_rejected', 'adapter_load_backoff']).toContain(e?.code);
    // One call a node: node 1 learns nothing from node 0's failure but its own.
    expect(api.calls.filter((c) => c === 'load c').length).toBeLessThanOrEqual(2);
    expect((await stores[1]!.residents(U)).map((r) => r.name)).toEqual([]);
  });
});
