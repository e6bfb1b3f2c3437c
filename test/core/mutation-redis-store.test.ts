/**
 * The TypeScript of the Redis fleet store (src/fleet/redis/redis-store.ts) alone, against a real
 * redis-server: the epoch it notes from each reply (an emptied state said once, the grace its
 * registration then asks), the heartbeat (its period, a switch or an emptied state it finds),
 * the change channel, and what it sends and reads around the scripts (times, windows, the
 * events' order, a retake refused, a lease's release). Its Lua is one string to Stryker:
 * test/core/store-differential.test.ts holds it equal to the memory store.
 */
import { randomBytes } from 'node:crypto';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';

const U = 'http://10.0.0.1:8000';
const SPEC = { url: U, backend: 'vllm' as const, priority: 0 };

let redis: RedisServer;
const open: RedisFleetStore[] = [];
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await redis.close();
});

function store(prefix: string, ttl = 10_000, node = 'n1'): RedisFleetStore {
  const s = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: ttl, timeout: 2000 }), node);
  open.push(s);
  return s;
}
/** A prefix whose state another node already registered (so a first heartbeat finds an epoch). */
async function fresh(): Promise<string> {
  const p = `rs${randomBytes(4).toString('hex')}:`;
  const first = new RedisFleetStore(redis.config(p, { timeout: 2000 }), 'n0');
  try {
    await first.upsertReplica(SPEC);
  } finally {
    await first.close();
  }
  return p;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the epoch', () => {
  it('an emptied state is said once by takeStateLost, and the registration after it asks the grace', async () => {
    const p = await fresh();
    const s = store(p);
    expect(s.currentEpoch).toBeNull();
    await s.upsertReplica(SPEC);
    const first = s.currentEpoch;
    expect(first).toMatch(/^[0-9a-f]{16}$/);
    expect(s.takeStateLost()).toBe(false);
    // Begun by a node that knew no state: no grace.
    expect(await redis.command(['EXISTS', `${p}reborn`])).toBe(0);
    await redis.command(['FLUSHALL']);
    // A read finds no epoch: emptied.
    await s.views([U]);
    expect(s.takeStateLost()).toBe(true);
    expect(s.takeStateLost()).toBe(false);
    expect(s.currentEpoch).toBe(first);
    // It knew the state: its registration begins it anew with a grace of node_ttl_ms.
    await s.upsertReplica(SPEC);
    const pttl = Number(await redis.command(['PTTL', `${p}reborn`]));
    expect(pttl).toBeGreaterThan(9000);
    expect(pttl).toBeLessThanOrEqual(10_000);
    expect(s.currentEpoch).not.toBe(first);
    // The new epoch differs from the one it knew: said once more.
    expect(s.takeStateLost()).toBe(true);
    await s.views([U]);
    expect(s.takeStateLost()).toBe(false);
  });

  it('inherits its predecessor epoch only when it has seen none', async () => {
    const p = await fresh();
    const s = store(p);
    s.inheritEpoch('old');
    expect(s.currentEpoch).toBe('old');
    s.inheritEpoch('other');
    expect(s.currentEpoch).toBe('old');
    // A state whose epoch is not the one inherited was emptied since.
    await s.upsertReplica(SPEC);
    expect(s.takeStateLost()).toBe(true);
  });
});

describe('the heartbeat', () => {
  it('runs every node_ttl_ms / 4, at least every 100 ms, and stops on close', async () => {
    const [pa, pb] = [await fresh(), await fresh()];
    const set = jest.spyOn(global, 'setInterval');
    const clear = jest.spyOn(global, 'clearInterval');
    try {
      const a = store(pa, 10_000);
      const b = store(pb, 200);
      expect(set.mock.calls.map((c) => c[1])).toEqual([2500, 100]);
      const timer = set.mock.results[0]!.value as NodeJS.Timeout;
      expect(timer.hasRef()).toBe(false);
      await a.close();
      expect(clear).toHaveBeenCalledWith(timer);
      await b.close();
    } finally {
      set.mockRestore();
      clear.mockRestore();
    }
  });

  it('registers the node, and tells of a state emptied under it', async () => {
    const p = await fresh();
    const s = store(p, 400);
    const lost = jest.fn();
    s.onStateLost = lost;
    await s.upsertReplica(SPEC);
    await waitFor(
      async () => (await redis.command(['ZSCORE', `${p}nodes`, 'n1'])) !== null,
      5000,
      'heartbeat',
    );
    expect(lost).not.toHaveBeenCalled();
    await redis.command(['FLUSHALL']);
    await waitFor(() => lost.mock.calls.length > 0, 5000, 'state lost');
    expect(s.takeStateLost()).toBe(true);
  });

  it('takes a switch to another server said to it as a lost state', async () => {
    const p = await fresh();
    const s = store(p, 400);
    const lost = jest.fn();
    await s.upsertReplica(SPEC);
    expect(s.takeStateLost()).toBe(false);
    s.onStateLost = lost;
    await redis.restart(false);
    await waitFor(() => lost.mock.calls.length > 0, 5000, 'state lost');
    expect(s.takeStateLost()).toBe(true);
  });
});

describe('the change channel', () => {
  it('wakes on a change until unsubscribed', async () => {
    const p = await fresh();
    const s = store(p);
    const woken = jest.fn();
    s.onRemoteChange = woken;
    await waitFor(async () => (await redis.subscribers(`${p}changed`)) === 1, 5000, 'subscribed');
    await redis.command(['PUBLISH', `${p}changed`, '1']);
    await waitFor(() => woken.mock.calls.length === 1, 5000, 'woken');
    s.unsubscribe();
    await sleep(300);
    await redis.command(['PUBLISH', `${p}changed`, '1']);
    await sleep(100);
    expect(woken).toHaveBeenCalledTimes(1);
    // Not subscribed again by the reconnect a closed subscriber would otherwise get.
    expect(await redis.subscribers(`${p}changed`)).toBe(0);
  });
});

describe('around the scripts', () => {
  it('the shared clock in whole ms', async () => {
    const s = store(await fresh());
    const [sec, usec] = (await redis.command(['TIME'])) as [string, string];
    const t = await s.sharedTime();
    expect(Number.isInteger(t)).toBe(true);
    const ref = Number(sec) * 1000 + Number(usec) / 1000;
    expect(t).toBeGreaterThanOrEqual(Math.floor(ref));
    expect(t - ref).toBeLessThan(1000);
  });

  it('events newest last, at most the limit', async () => {
    const s = store(await fresh());
    for (const at of [1, 2, 3]) await s.pushEvent({ at, url: U, adapter: 'a', op: 'load', result: 'ok' });
    expect((await s.events(2)).map((e) => e.at)).toEqual([2, 3]);
    expect((await s.events(10)).length).toBe(3);
  });

  it('a lease: acquired, released with whether its adapter went idle; a retake refused once reclaimed', async () => {
    const s = store(await fresh());
    await s.upsertReplica(SPEC);
    expect(await s.acquire({ id: 'l1', url: U, adapter: null, at: 1 })).toBeUndefined();
    expect(await s.inFlightTotal()).toBe(1);
    expect(await s.release('l1', 2)).toEqual({ id: 'l1', url: U, adapter: null, at: 1, adapterIdle: false });
    expect(await s.release('l1', 3)).toBeUndefined();
    expect(await s.retake([{ id: 'l2', url: U, adapter: null, at: 5 }])).toEqual([]);
    await sleep(20);
    const [gone] = await s.expireLeases(Date.now(), 10);
    expect(gone).toEqual({ id: 'l2', url: U, adapter: null, at: 5 });
    // In a batch: the reclaimed one refused, those before and after it taken, each where it says.
    const batch = ['l3', 'l2', 'l4'].map((id, i) => ({
      id,
      url: U,
      adapter: i === 2 ? 'a' : null,
      at: 6 + i,
    }));
    expect(await s.retake(batch)).toEqual(['l2']);
    expect(await s.inFlightTotal()).toBe(2);
    expect(await s.release('l4', 9)).toEqual({ id: 'l4', url: U, adapter: 'a', at: 8, adapterIdle: true });
    expect(await s.release('l3', 9)).toEqual({ id: 'l3', url: U, adapter: null, at: 6, adapterIdle: false });
    expect(await s.retake([])).toEqual([]);
  });

  it('windows and TTLs in whole ms, at least 1', async () => {
    const p = await fresh();
    const s = store(p);
    await s.upsertReplica(SPEC);
    // Redis takes whole ms only (PEXPIRE, SET PX): a fraction is rounded up.
    expect(await s.spendBudget('k', 2, 0.2, 0)).toBe(0);
    await s.addToBudget('k', 1, 0.2);
    expect(await s.claimPlacement('a', U, undefined, 0, 0.3)).toBe(U);
    expect(await s.beginLoad(U, 'a', 0, 4, 0.5)).not.toBeNull();
  });

  it('the other operations reach their scripts with their arguments', async () => {
    const s = store(await fresh());
    await s.upsertReplica(SPEC);
    expect(await s.replicaSpecs()).toEqual([SPEC]);
    const f = await s.beginLoad(U, 'a', 10, 4, 60_000);
    expect(await s.finishLoad(U, 'a', f!, true, 11)).toBe(true);
    expect(await s.residents(U)).toEqual([
      { name: 'a', state: 'loaded', since: 11, lastUsed: 11, inFlight: 0 },
    ]);
    await s.touch(U, 'a', 20);
    expect((await s.residents(U))[0]!.lastUsed).toBe(20);
    const u = await s.beginUnload(U, 'a', 30, 60_000);
    expect(u).not.toBeNull();
    expect(await s.finishUnload(U, 'a', u!, false, 31)).toBe(true);
    expect((await s.residents(U))[0]!.state).toBe('loaded');
    await s.forget(U, 'a', 40);
    expect(await s.residents(U)).toEqual([]);
    const { views, state } = await s.viewsAndLease(
      [U],
      { name: 'a' },
      { id: 'l', url: U, adapter: 'a', at: 1 },
    );
    expect(state).toBeUndefined();
    expect(views.map((v) => v.url)).toEqual([U]);
    const [withRes] = await s.views([U], { name: 'a' }, true);
    expect(withRes!.residents).toEqual([]);
    for (let i = 0; i < 5; i++) await s.reportOutcome(U, false, 50 + i);
    const dump = await s.dump();
    expect(dump.replicas).toHaveLength(1);
    expect(dump.replicas[0]).toMatchObject({ url: U, inFlight: 1, adapters: [], llamaAdapters: [] });
    expect(s.liveNodes === null || typeof s.liveNodes === 'number').toBe(true);
  });

  it('a snapshot: the registry entries a configuration manages are loaded, the others static; an error marks it down', async () => {
    const s = store(await fresh());
    await s.upsertReplica(SPEC);
    await s.applySnapshot(U, {
      at: 5,
      ok: true,
      load: { waiting: 0, running: 0, kvUsage: 0, activeAdapters: [], malformedLines: 0 },
      registry: [
        { name: 'mine', path: '/m' },
        { name: 'base', path: '/b' },
      ],
      managed: (name) => name === 'mine',
    });
    const states = Object.fromEntries((await s.residents(U)).map((r) => [r.name, r.state]));
    expect(states).toEqual({ mine: 'loaded', base: 'static' });
    // A vLLM replica lists no llama.cpp adapters.
    expect((await s.dump()).replicas[0]!.llamaAdapters).toEqual([]);
    await s.applySnapshot(U, { at: 6, ok: false, error: 'refused' });
    expect((await s.views([U]))[0]).toMatchObject({ health: 'down', lastError: 'refused' });
    await s.applySnapshot(U, { at: 7, ok: false });
    expect((await s.views([U]))[0]!.lastError).toBe('');
    await s.applySnapshot(U, {
      at: 8,
      ok: true,
      load: { waiting: 0, running: 0, kvUsage: 0, activeAdapters: [], malformedLines: 0 },
    });
    // Passive failures: a success in between starts the count again; down after three in a row.
    await s.reportOutcome(U, false, 9);
    await s.reportOutcome(U, false, 10);
    await s.reportOutcome(U, true, 11);
    await s.reportOutcome(U, false, 12);
    await s.reportOutcome(U, false, 13);
    expect((await s.views([U]))[0]!.health).toBe('up');
    await s.reportOutcome(U, false, 14);
    expect((await s.views([U]))[0]!.health).toBe('down');
    // A registry read with no configuration's test (a poller without one): every new entry is static.
    const t = store(await fresh());
    await t.upsertReplica(SPEC);
    await t.applySnapshot(U, {
      at: 5,
      ok: true,
      load: { waiting: 0, running: 0, kvUsage: 0, activeAdapters: [], malformedLines: 0 },
      registry: [{ name: 'other', path: '/o' }],
    });
    expect((await t.residents(U)).map((r) => [r.name, r.state])).toEqual([['other', 'static']]);
  });

  it('a failed load leaves nothing, a finished unload removes it, a release says when its adapter went idle', async () => {
    const s = store(await fresh());
    await s.upsertReplica(SPEC);
    const f = await s.beginLoad(U, 'a', 1, 4, 60_000);
    expect(await s.finishLoad(U, 'a', f!, false, 2)).toBe(true);
    expect(await s.residents(U)).toEqual([]);
    const g = await s.beginLoad(U, 'a', 3, 4, 60_000);
    await s.finishLoad(U, 'a', g!, true, 4);
    const u = await s.beginUnload(U, 'a', 5, 60_000);
    expect(await s.finishUnload(U, 'a', u!, true, 6)).toBe(true);
    expect(await s.residents(U)).toEqual([]);
    const h = await s.beginLoad(U, 'a', 7, 4, 60_000);
    await s.finishLoad(U, 'a', h!, true, 8);
    expect((await s.views([U], { name: 'a' }, true))[0]!.residents!.map((r) => r.name)).toEqual(['a']);
    await s.acquire({ id: 'x', url: U, adapter: 'a', at: 9 });
    await s.acquire({ id: 'y', url: U, adapter: 'a', at: 9 });
    expect((await s.release('x', 10))!.adapterIdle).toBe(false);
    expect((await s.release('y', 11))!.adapterIdle).toBe(true);
    // A lease taken again (recovery) counts on its adapter: no unload under it.
    expect(await s.retake([{ id: 'r', url: U, adapter: 'a', at: 12 }])).toEqual([]);
    expect((await s.views([U], { name: 'a' }))[0]!.adapter!.inFlight).toBe(1);
    expect(await s.beginUnload(U, 'a', 13, 60_000)).toBeNull();
    await s.release('r', 14);
    // Views without residents asked carry none.
    expect((await s.views([U], { name: 'a' }))[0]!.residents).toBeUndefined();
    expect(
      (await s.viewsAndLease([U], { name: 'a' }, { id: 'z', url: U, adapter: 'a', at: 15 })).views[0]!
        .residents,
    ).toBeUndefined();
  });

  it('a placement lasts its TTL, not 1 ms, until released; a budget add opens a window as long as asked', async () => {
    const s = store(await fresh());
    await s.upsertReplica(SPEC);
    await s.upsertReplica({ ...SPEC, url: 'http://10.0.0.2:8000' });
    expect(await s.claimPlacement('a', U, undefined, 0, 60_000, 'c1')).toBe(U);
    await sleep(20);
    expect(await s.claimPlacement('a', 'http://10.0.0.2:8000', undefined, 0, 60_000, 'c2')).toBe(U);
    // Shared by two claimers on its replica: it stays while the other still holds it.
    expect(await s.claimPlacement('a', U, undefined, 0, 60_000, 'c2')).toBe(U);
    await s.releasePlacement('a', U, 'c1');
    expect(await s.claimPlacement('a', 'http://10.0.0.2:8000', undefined, 0, 60_000, 'c3')).toBe(U);
    await s.releasePlacement('a', U, 'c2');
    await s.releasePlacement('a', U, 'c3');
    expect(await s.claimPlacement('a', 'http://10.0.0.2:8000', undefined, 0, 60_000, 'c4')).toBe(
      'http://10.0.0.2:8000',
    );
    // A claim and a release that name no claimer.
    expect(await s.claimPlacement('b', U, undefined, 0, 60_000)).toBe(U);
    await s.releasePlacement('b', U);
    expect(await s.claimPlacement('b', 'http://10.0.0.2:8000', undefined, 0, 60_000)).toBe(
      'http://10.0.0.2:8000',
    );
    await s.addToBudget('k', 5, 60_000);
    await sleep(20);
    expect(await s.spendBudget('k', 2, 60_000, 0)).toBeGreaterThan(0);
  });

  it('a prune keeps the node among the live ones unless it is leaving', async () => {
    const p = await fresh();
    const s = store(p);
    await s.upsertReplica(SPEC);
    await s.acquire({ id: 'kept', url: U, adapter: null, at: 1 });
    await s.acquire({ id: 'dropped', url: U, adapter: null, at: 1 });
    const member = async () => (await redis.command(['ZSCORE', `${p}nodes`, 'n1'])) !== null;
    await waitFor(member, 5000, 'heartbeat');
    expect(await s.prune(() => ['kept'])).toBe(1);
    expect(await member()).toBe(true);
    await s.prune(() => ['kept'], true);
    expect(await member()).toBe(false);
  });

  it('the probe says PONG and takes a switched server; the mode is redis', async () => {
    const s = store(await fresh());
    await s.upsertReplica(SPEC);
    await redis.restart(false);
    await sleep(300);
    expect(await s.ping()).toBe('PONG');
    expect(s.mode()).toBe('redis');
  });
});
