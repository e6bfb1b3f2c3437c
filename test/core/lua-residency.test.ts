/**
 * The residency Lua (src/fleet/redis/scripts/residency.ts) case by case, against a real
 * redis-server: placement and its claimers, the polls a snapshot applies or refuses, the views a
 * request reads and an outcome's replica, where the other real-Redis suites let a mutant through
 * (`npm run mutation:lua -- residency`, docs/reliability/mutation-testing.md, "The Lua").
 * lua-scripts.test.ts holds the other scripts'.
 */
import { randomBytes } from 'node:crypto';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { scriptSource } from '../../src/fleet/redis/scripts';
import { useRedisStores } from '../helpers/redis-stores';

const U = 'http://10.0.0.1:8000';
const V = 'http://10.0.0.2:8000';
const TTL = 60_000;

const env = useRedisStores();

/** A node's store on a prefix of its own (a fresh state), both replicas registered. */
async function store(): Promise<{ s: RedisFleetStore; p: string }> {
  const p = `lr${randomBytes(4).toString('hex')}:`;
  const s = new RedisFleetStore(env.redis.config(p, { node_ttl_ms: 60_000, timeout: 2000 }), 'n1');
  env.open.push(s);
  await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await s.upsertReplica({ url: V, backend: 'vllm', priority: 0 });
  return { s, p };
}
const pttl = async (key: string) => Number(await env.redis.command(['PTTL', key]));

describe('placement (place, unplace)', () => {
  it('a placement given back with no claimer named goes at once, whoever claimed it', async () => {
    const { s } = await store();
    expect(await s.claimPlacement('x', U, undefined, 1, TTL, 'c1')).toBe(U);
    // No claimer (a load ended for every request on it): dropped though c1 still holds a share.
    await s.releasePlacement('x', U);
    expect(await s.claimPlacement('x', V, undefined, 2, TTL, 'c2')).toBe(V);
  });

  it("the request that made a placement holds a share of it: another's release leaves it standing", async () => {
    const { s } = await store();
    expect(await s.claimPlacement('x', U, undefined, 1, TTL, 'c1')).toBe(U);
    expect(await s.claimPlacement('x', U, undefined, 2, TTL, 'c2')).toBe(U);
    // c2's load ended (failed): c1's, under way on U, keeps the placement, or a third request
    // spreads x to V while it runs.
    await s.releasePlacement('x', U, 'c2');
    expect(await s.claimPlacement('x', V, undefined, 3, TTL, 'c3')).toBe(U);
    await s.releasePlacement('x', U, 'c1');
    await s.releasePlacement('x', U, 'c3');
    expect(await s.claimPlacement('x', V, undefined, 4, TTL, 'c4')).toBe(V);
  });

  it('a placement made with no claimer, then shared, goes with its one claimer, and its claimers expire with it', async () => {
    const { s, p } = await store();
    expect(await s.claimPlacement('x', U, undefined, 1, TTL)).toBe(U);
    // No claimer: no share recorded under the empty name, which no release would take back.
    expect(await env.redis.command(['EXISTS', `${p}placers:x`])).toBe(0);
    expect(await s.claimPlacement('x', U, undefined, 2, TTL, 'c1')).toBe(U);
    // The set the share made expires with the placement, not never.
    const left = await pttl(`${p}placers:x`);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(TTL);
    await s.releasePlacement('x', U, 'c1');
    expect(await s.claimPlacement('x', V, undefined, 3, TTL, 'c2')).toBe(V);
  });

  it('a claimer starts the claimers of a placement anew, and they expire with it', async () => {
    const { s, p } = await store();
    // A claimers set that outlived its placement (no expiry: a hand edit, or a layout before it had one).
    await env.redis.command(['SADD', `${p}placers:x`, 'old']);
    expect(await s.claimPlacement('x', U, undefined, 1, TTL, 'c1')).toBe(U);
    const left = await pttl(`${p}placers:x`);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(TTL);
    // Its one claimer gives it back: nothing left over holds it past that.
    await s.releasePlacement('x', U, 'c1');
    expect(await s.claimPlacement('x', V, undefined, 2, TTL, 'c2')).toBe(V);
  });
});

describe('a poll applied or refused (snapshot)', () => {
  const load = { waiting: 2, running: 1, activeAdapters: [], malformedLines: 0 };
  const health = async (p: string) => env.redis.command(['HGET', `${p}r:${U}`, 'health']);
  /** The entry's JSON as the script keeps it (its `t`, Redis time, set by the last change). */
  const entry = async (p: string, name: string) =>
    JSON.parse(String(await env.redis.command(['HGET', `${p}res:${U}`, name]))) as {
      t: number;
      state: string;
    };
  const names = async (s: RedisFleetStore) => (await s.residents(U)).map((r) => r.name).sort();

  it('a poll begun in the same ms as the one applied last is applied too (the memory store refuses only an earlier one)', async () => {
    const { s, p } = await store();
    const t0 = await s.sharedTime();
    await s.applySnapshot(U, { at: 2, startedAt: 1, sharedStartedAt: t0, ok: true, load });
    await s.applySnapshot(U, {
      at: 3,
      startedAt: 1,
      sharedStartedAt: t0,
      ok: true,
      load: { ...load, waiting: 5 },
    });
    expect(await env.redis.command(['HGET', `${p}r:${U}`, 'waiting'])).toBe('5');
  });

  it('a poll without a shared start is dated by its duration on the monotonic clock: a wall clock stepped back during it makes it no newer', async () => {
    const { s, p } = await store();
    const t0 = await s.sharedTime();
    // Another node's up poll, begun a second ago by Redis's clock.
    await s.applySnapshot(U, { at: 2, startedAt: 1, sharedStartedAt: t0 - 1_000, ok: true, load });
    // This node's failed poll took 10 s (its shared clock read failed): begun before that one. Its
    // wall clock was stepped back 9.9 s meanwhile, so by the wall the poll took 100 ms, and dated
    // so it overwrote the newer poll: a healthy replica read down.
    await s.applySnapshot(U, {
      at: 5_100,
      startedAt: 5_000,
      monoStartedAt: 20_000,
      monoAt: 30_000,
      ok: false,
      error: 'connect',
    });
    expect(await health(p)).toBe('up');
  });

  it('an up verdict never moves the verdict back: a failed poll begun before the latest verdict stays older news', async () => {
    const { s, p } = await store();
    const t0 = await s.sharedTime();
    const verdict = (at: number) =>
      s.applySnapshot(U, { at, startedAt: at, sharedStartedAt: t0 + at, ok: true, verdictOnly: true });
    const failed = (at: number) =>
      s.applySnapshot(U, { at: at + 1, startedAt: at, sharedStartedAt: t0 + at, ok: false, error: '500' });
    await verdict(200);
    await verdict(100); // handed on late
    await failed(150);
    expect(await health(p)).toBe('up');
    // Begun in the very ms of the verdict: not before it, so applied.
    await failed(200);
    expect(await health(p)).toBe('down');
  });

  it('an entry changed in the ms the registry read began is kept, one changed before it goes', async () => {
    const { s, p } = await store();
    const t0 = await s.sharedTime();
    const managed = () => true;
    const registry = [{ name: 'a', path: '/a' }];
    await s.applySnapshot(U, { at: 1, startedAt: 1, sharedStartedAt: t0, ok: true, registry, managed });
    const { t } = await entry(p, 'a');
    await s.applySnapshot(U, { at: 2, startedAt: 2, sharedStartedAt: t, ok: true, registry: [] });
    expect(await names(s)).toEqual(['a']);
    await s.applySnapshot(U, { at: 3, startedAt: 3, sharedStartedAt: t + 1, ok: true, registry: [] });
    expect(await names(s)).toEqual([]);
  });

  it('an adapter gone in the ms the registry read began is not brought back by it, one gone before is', async () => {
    const { s, p } = await store();
    const t0 = await s.sharedTime();
    const managed = () => true;
    const registry = [{ name: 'a', path: '/a' }];
    await s.applySnapshot(U, { at: 1, startedAt: 1, sharedStartedAt: t0, ok: true, registry, managed });
    await s.forget(U, 'a', 2);
    const gone = Number(await env.redis.command(['ZSCORE', `${p}gone:${U}`, 'a']));
    await s.applySnapshot(U, { at: 3, startedAt: 3, sharedStartedAt: gone, ok: true, registry, managed });
    expect(await names(s)).toEqual([]);
    await s.applySnapshot(U, { at: 4, startedAt: 4, sharedStartedAt: gone + 1, ok: true, registry, managed });
    expect(await names(s)).toEqual(['a']);
  });

  it("a static entry a configuration manages now is the router's; a load under way the registry lists stays the load", async () => {
    const { s } = await store();
    const t0 = await s.sharedTime();
    const registry = ['boot', 'a'].map((name) => ({ name, path: `/${name}` }));
    await s.applySnapshot(U, {
      at: 1,
      startedAt: 1,
      sharedStartedAt: t0,
      ok: true,
      registry: registry.slice(0, 1),
      managed: () => false,
    });
    const fence = await s.beginLoad(U, 'a', 2, 4, TTL);
    expect(fence).not.toBeNull();
    // A configuration that manages both registered since: boot was a router's load after all, and
    // a's entry (listed while its load ends) is left to the load, fence and all.
    await s.applySnapshot(U, {
      at: 3,
      startedAt: 3,
      sharedStartedAt: t0 + 10_000,
      ok: true,
      registry,
      managed: () => true,
    });
    const states = Object.fromEntries((await s.residents(U)).map((r) => [r.name, r.state]));
    expect(states).toEqual({ boot: 'loaded', a: 'loading' });
    expect(await s.finishLoad(U, 'a', fence!, true, 4)).toBe(true);
  });

  it('a restart event counts the loaded adapters that left the registry, and a poll that drops none makes none', async () => {
    const { s } = await store();
    const t0 = await s.sharedTime();
    const registry = ['a', 'b', 'boot'].map((name) => ({ name, path: `/${name}` }));
    const managed = (name: string) => name !== 'boot';
    await s.applySnapshot(U, { at: 1, startedAt: 1, sharedStartedAt: t0, ok: true, registry, managed });
    await s.applySnapshot(U, {
      at: 2,
      startedAt: 2,
      sharedStartedAt: t0 + 10_000,
      ok: true,
      registry,
      managed,
    });
    expect((await s.events(10)).filter((e) => e.op === 'replica-restart')).toEqual([]);
    // Two loaded ones and the static one vanished: two counted.
    await s.applySnapshot(U, { at: 3, startedAt: 3, sharedStartedAt: t0 + 20_000, ok: true, registry: [] });
    const restarts = (await s.events(10)).filter((e) => e.op === 'replica-restart');
    expect(restarts.map((e) => e.detail)).toEqual(['2 loaded adapter(s) left the registry']);
  });

  it('an up poll clears the last error and a KV usage its load no longer reports, as the memory store does', async () => {
    const { s } = await store();
    const t0 = await s.sharedTime();
    const poll = (at: number, ok: boolean, kvUsage?: number) =>
      s.applySnapshot(U, {
        at,
        startedAt: at,
        sharedStartedAt: t0 + at,
        ok,
        error: ok ? undefined : 'ECONNREFUSED',
        load: ok ? { ...load, kvUsage } : undefined,
      });
    await poll(1, true, 0.3);
    await poll(2, false);
    expect((await s.views([U]))[0]).toMatchObject({
      health: 'down',
      lastError: 'ECONNREFUSED',
      kvUsage: 0.3,
    });
    // Up again, on a load with no KV figure (llama.cpp has none): neither is the replica's any more.
    await poll(3, true);
    const [v] = await s.views([U]);
    expect(v).toMatchObject({ health: 'up' });
    expect(v!.lastError).toBeUndefined();
    expect(v!.kvUsage).toBeUndefined();
  });

  it('an up poll starts the run of upstream failures anew: a replica is marked down only by a whole run after it', async () => {
    const { s, p } = await store();
    const t0 = await s.sharedTime();
    const failures = async (n: number) => {
      for (let i = 0; i < n; i++) await s.reportOutcome(U, false, 1);
    };
    await failures(2);
    await s.applySnapshot(U, { at: 2, startedAt: 2, sharedStartedAt: t0, ok: true, load });
    // Two more in a row after the poll: under PASSIVE_FAILURE_LIMIT (3, memory-store.ts).
    await failures(2);
    expect(await health(p)).toBe('up');
    await failures(1);
    expect(await health(p)).toBe('down');
  });

  it("a poll with no shared start dates it from its own duration, back from Redis's time", async () => {
    const { s, p } = await store();
    const managed = () => true;
    const registry = [{ name: 'a', path: '/a' }];
    const now = Date.now();
    await s.applySnapshot(U, { at: now, startedAt: now, ok: true, registry, managed });
    // A poll that took ten minutes began before the entry's change: the entry is kept.
    await s.applySnapshot(U, { at: now + 1, startedAt: now + 1 - 600_000, ok: true, registry: [] });
    expect(await names(s)).toEqual(['a']);
    // An entry last changed long ago, missing from a poll of no duration: it goes.
    const old = await entry(p, 'a');
    await env.redis.command(['HSET', `${p}res:${U}`, 'a', JSON.stringify({ ...old, t: 1 })]);
    await s.applySnapshot(U, { at: now + 2, startedAt: now + 2, ok: true, registry: [] });
    expect(await names(s)).toEqual([]);
  });
});

describe("a replica's views (views, and viewsAndLease's first half)", () => {
  /** A view row as the script answers it: {url, spec, figures, entry, busy, all entries, all busy, own}. */
  type Row = [
    string,
    string,
    string[],
    string | null,
    string | null,
    string[] | null,
    string[] | null,
    string | null,
  ];

  it("the request path's views carry the adapter's entry and busy count, and no replica's whole residency unless asked", async () => {
    const { s, p } = await store();
    const fence = await s.beginLoad(U, 'a', 1, 4, TTL);
    expect(await s.finishLoad(U, 'a', fence!, true, 2)).toBe(true);
    await s.acquire({ id: 'l1', url: U, adapter: 'a', at: 3 });
    const rows = async (withRes: '0' | '1') =>
      (
        (await env.redis.command(['EVAL', scriptSource('views'), 0, p, 'a', withRes, '', U])) as [
          unknown,
          Row[],
        ]
      )[1];
    const [asked] = await rows('1');
    expect(asked![5]).toHaveLength(2); // a's entry, whole
    expect(asked![6]).toEqual(['a', '1']);
    // Not asked (every routing decision): the adapter's own entry and count, nothing more, so a
    // request's round trip does not grow with the adapters each replica holds.
    const [plain] = await rows('0');
    expect(plain![3]).toContain('"loaded"');
    expect(plain![4]).toBe('1');
    // No node named: none of its leases counted apart.
    expect(plain!.slice(5)).toEqual([null, null, null]);
    const [views] = (await env.redis.command([
      'EVAL',
      scriptSource('viewsAndLease'),
      0,
      p,
      'l2',
      U,
      'a',
      4,
      'n1',
      'a',
      U,
    ])) as [[unknown, Row[]]];
    // Lease 'l2' names no node ('<node>-<seq>'): none counted apart.
    expect(views[1][0]!.slice(5)).toEqual([null, null, null]);
  });
});

describe('what an up poll writes beside the registry (snapshot)', () => {
  it("an idle replica's poll leaves a base-model lease's stamp where it was; a busy one's renews it", async () => {
    const { s, p } = await store();
    await s.acquire({ id: 'base', url: U, adapter: null, at: 1 });
    // Stamped long ago (a request whose end was lost): only the replica's word renews it.
    await env.redis.command(['ZADD', `${p}lease-at`, 'XX', 5, 'base']);
    const stamp = async () => Number(await env.redis.command(['ZSCORE', `${p}lease-at`, 'base']));
    const poll = (at: number, running: number, waiting: number) =>
      s.applySnapshot(U, {
        at,
        ok: true,
        load: { waiting, running, activeAdapters: [], malformedLines: 0 },
      });
    // Nothing runs or waits: the lease is no request's the replica knows of, so it ages on and
    // the sweep reclaims it at the maximum age, not never.
    await poll(2, 0, 0);
    expect(await stamp()).toBe(5);
    await poll(3, 0, 1);
    expect(await stamp()).toBeGreaterThan(5);
  });

  it('an up poll with no llama.cpp list keeps the last one, as the memory store does', async () => {
    const { s } = await store();
    const W = 'http://10.0.0.3:8080';
    await s.upsertReplica({ url: W, backend: 'llamacpp', priority: 0 });
    const load = { waiting: 0, running: 0, activeAdapters: [], malformedLines: 0 };
    await s.applySnapshot(W, { at: 2, ok: true, load, llamaAdapters: [{ id: 0, path: '/a' }] });
    // A snapshot that read no /lora-adapters (not the poller's): no word on the list, so it stays.
    await s.applySnapshot(W, { at: 3, ok: true, load });
    const [v] = await s.views([W], { name: 'a', path: '/a' });
    expect(v!.adapter).toMatchObject({ state: 'static', llamaId: 0 });
  });
});

describe('an upstream outcome (outcome)', () => {
  it('an outcome for a replica not registered leaves nothing: registered after, it starts unknown', async () => {
    const { s } = await store();
    const W = 'http://10.0.0.3:8000';
    // A late outcome of a replica taken out of the configuration (or not yet in it).
    for (let i = 0; i < 5; i++) await s.reportOutcome(W, false, 10 + i);
    await s.upsertReplica({ url: W, backend: 'vllm', priority: 0 });
    expect((await s.views([W]))[0]).toMatchObject({ health: 'unknown', residentCount: 0 });
    expect((await s.events(10)).filter((e) => e.url === W)).toEqual([]);
  });
});
