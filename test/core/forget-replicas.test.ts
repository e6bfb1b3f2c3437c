/**
 * Replicas that leave the fleet are forgotten (FleetStore.retainReplicas): a replica no node has
 * claimed for the grace, with nothing running on it, goes with every record of it; one a node
 * still claims, one with a lease, a load or an unload on it, and one nobody ever claimed (an older
 * version's registration) stay. Both stores: the in-process one (claims per node, as the
 * simulation's modelled Redis passes them) and the Redis scripts on a real redis-server, whose
 * keys under the prefix are read with SCAN for anything left of a forgotten replica.
 *
 * Time is the wall clock on both sides (Redis's TIME, the memory store's default clock): "the
 * grace passed" is a call whose `graceMs` is below the time slept since, "within the grace" one
 * whose `graceMs` is far above it, so no assertion depends on how fast the machine runs.
 */
import { randomBytes } from 'node:crypto';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { scriptSource } from '../../src/fleet/redis/scripts';
import type { FleetStore } from '../../src/fleet/store';
import type { ReplicaSnapshot, ReplicaSpec } from '../../src/fleet/types';
import { waitFor } from '../../harness/wait';
import { collectingLogger } from '../helpers/log';
import { useRedisStores } from '../helpers/redis-stores';

const U1 = 'http://10.0.0.1:8000';
const U2 = 'http://10.0.0.2:8000';
const spec = (url: string): ReplicaSpec => ({ url, backend: 'vllm', priority: 0 });
/** Far above anything a test sleeps: "within the grace". */
const LONG = 60_000;
const TTL = 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const env = useRedisStores();

/** One node's face on the shared state: its registration and its retain, as itself. */
interface Node {
  store: FleetStore;
  upsert(s: ReplicaSpec): Promise<void>;
  retain(urls: readonly string[], graceMs: number): Promise<string[]>;
  /** This node stops (its heartbeats with it, on Redis). */
  stop(): Promise<void>;
}

/** A shared state and its nodes, in process or in Redis. */
interface Fleet {
  /** Node `id`, its claims lapsing `nodeTtlMs` after its last claim or heartbeat. */
  node(id: string, nodeTtlMs?: number): Node;
  /** Everything the state keeps that names `url` (keys, fields, members), but the event list. */
  leftOf(url: string): Promise<string[]>;
  /** How many records the state keeps (Redis: keys under the prefix; memory: entries of its maps). */
  size(): Promise<number>;
  /** A replica registered as a node of an older version does: no claim. */
  upsertUnclaimed(s: ReplicaSpec): Promise<void>;
  /** Node `id` heartbeat `msAgo` (negative: ahead), as the scripts' `nodes` zset holds it. */
  heartbeat(id: string, msAgo: number): Promise<void>;
}

type MemoryInside = {
  replicas: Map<string, unknown>;
  roomMade: Map<string, unknown>;
  unloadTtls: Map<string, unknown>;
  placements: Map<string, unknown>;
  claims: {
    byUrl: Map<string, Map<string, number>>;
    byNode: Map<string, Set<string>>;
    lastClaimed: Map<string, number>;
  };
  leases: { leases: Map<string, { url: string }> };
  holders: { byName: Map<string, { tables: unknown[] }> };
};

function memoryFleet(): Fleet {
  const m = new MemoryFleetStore();
  const inside = m as unknown as MemoryInside;
  /** Heartbeats, as the simulation's modelled Redis passes them. */
  const beats = new Map<string, number>();
  const heartbeat = (n: string) => beats.get(n);
  return {
    node(id, nodeTtlMs = TTL) {
      return {
        store: m,
        upsert: (s) => m.upsertReplica(s, id),
        retain: (urls, graceMs) => m.retainReplicas(urls, graceMs, { node: id, nodeTtlMs, heartbeat }),
        stop: async () => {},
      };
    },
    async leftOf(url) {
      const left: string[] = [];
      const maps = {
        replicas: inside.replicas,
        roomMade: inside.roomMade,
        lastClaimed: inside.claims.lastClaimed,
      };
      for (const [name, map] of Object.entries(maps)) if (map.has(url)) left.push(name);
      if (inside.claims.byUrl.has(url)) left.push('claims');
      for (const [node, urls] of inside.claims.byNode) if (urls.has(url)) left.push(`claimed by ${node}`);
      for (const k of inside.unloadTtls.keys()) if (k.startsWith(url)) left.push(`unloadTtls ${k}`);
      for (const [id, l] of inside.leases.leases) if (l.url === url) left.push(`lease ${id}`);
      return left;
    },
    async size() {
      const c = inside.claims;
      let n =
        inside.replicas.size + inside.roomMade.size + inside.unloadTtls.size + inside.leases.leases.size;
      for (const h of inside.holders.byName.values()) n += h.tables.length;
      n += c.byUrl.size + c.byNode.size + c.lastClaimed.size;
      for (const nodes of c.byUrl.values()) n += nodes.size;
      return n;
    },
    upsertUnclaimed: (s) => m.upsertReplica(s, ''),
    heartbeat: async (id, msAgo) => void beats.set(id, Date.now() - msAgo),
  };
}

function redisFleet(): Fleet {
  const prefix = `fg${randomBytes(4).toString('hex')}:`;
  const redis = env.redis;
  const command = (args: [string, ...(string | number)[]]) => redis.command(args);
  async function keys(): Promise<string[]> {
    const out: string[] = [];
    let cursor = '0';
    for (let i = 0; i < 10_000; i++) {
      const [next, batch] = (await command(['SCAN', cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000])) as [
        string,
        string[],
      ];
      out.push(...batch);
      cursor = next;
      if (cursor === '0') return out;
    }
    throw new Error('SCAN did not end');
  }
  return {
    node(id, nodeTtlMs = TTL) {
      const s = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: nodeTtlMs, timeout: 2000 }), id);
      env.open.push(s);
      return {
        store: s,
        upsert: (x) => s.upsertReplica(x),
        retain: (urls, graceMs) => s.retainReplicas(urls, graceMs),
        stop: () => s.close(),
      };
    },
    async leftOf(url) {
      const left: string[] = [];
      for (const k of await keys()) {
        if (k.includes(url)) left.push(k);
        const type = (await command(['TYPE', k])) as string;
        const inside =
          type === 'hash'
            ? ((await command(['HGETALL', k])) as string[])
            : type === 'zset'
              ? ((await command(['ZRANGE', k, 0, -1])) as string[])
              : type === 'set'
                ? ((await command(['SMEMBERS', k])) as string[])
                : [];
        // The event list says it was forgotten: that is all that may name it.
        if (inside.some((x) => x.includes(url))) left.push(`${k} (${type})`);
      }
      return left;
    },
    async size() {
      return (await keys()).length;
    },
    async upsertUnclaimed(x) {
      // The upsert script as a node of an older version calls it: no node, so no claim.
      await command(['EVAL', scriptSource('upsert'), 0, prefix, x.url, JSON.stringify(x), 'e0', 0]);
    },
    async heartbeat(id, msAgo) {
      const [sec, usec] = (await command(['TIME'])) as [string, string];
      const now = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
      await command(['ZADD', `${prefix}nodes`, now - msAgo, id]);
    },
  };
}

/** A successful poll of a replica's figures (its start now), its registry not read. */
function poll(): ReplicaSnapshot {
  const at = Date.now();
  return {
    at,
    startedAt: at,
    ok: true,
    load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
  };
}

/**
 * Gives `url` a record of every kind the stores keep per replica: a load begun before the first
 * registry read (`unseen:`), residency and figures, a gone mark (a failed load), a room made by an
 * unload, a passive failure, a lease taken and released (`ls:`, `lease-at`... emptied again).
 */
async function busyHistory(s: FleetStore, url: string): Promise<void> {
  const now = Date.now();
  // Before any registry read: its name stays among the unseen (no poll here reads the registry).
  const early = await s.beginLoad(url, 'u', now, 10, LONG);
  await s.applySnapshot(url, poll());
  await s.finishLoad(url, 'u', early!, true, now + 1);
  const b = await s.beginLoad(url, 'b', now + 2, 10, LONG);
  await s.finishLoad(url, 'b', b!, true, now + 3);
  const c = await s.beginLoad(url, 'c', now + 4, 10, LONG);
  await s.finishLoad(url, 'c', c!, false, now + 5);
  // Room for d, on a replica full by the caller's limit: the room it made is kept (`made:`).
  const unload = await s.beginUnload(url, 'b', now + 6, LONG, 'd', 2);
  expect(unload).not.toBeNull();
  await s.finishUnload(url, 'b', unload!, true, now + 7);
  await s.reportOutcome(url, false, now + 8);
  await s.acquire({ id: `l-${url}`, url, adapter: 'a', at: now + 9 });
  await s.release(`l-${url}`, now + 10, 200);
}

const specsOf = async (s: FleetStore) => (await s.replicaSpecs()).map((x) => x.url).sort();

describe.each([
  ['memory', memoryFleet],
  ['redis', redisFleet],
] as const)('%s store: replicas no node routes to are forgotten', (_kind, make) => {
  it('a replica only node A claimed, which A stops listing: kept for the grace, then forgotten with every record of it', async () => {
    const f = make();
    const a = f.node('A');
    await a.upsert(spec(U1));
    await a.upsert(spec(U2));
    await busyHistory(a.store, U1);
    expect(await f.leftOf(U1)).not.toEqual([]);
    // One list asked with again and again, as a router does (the memory store keeps its records by list).
    const both = [U1, U2];
    expect(await a.store.views(both)).toHaveLength(2);

    expect(await a.retain([U2], LONG)).toEqual([]); // within the grace
    expect(await specsOf(a.store)).toEqual([U1, U2]);
    await sleep(5);
    expect(await a.retain([U2], 1)).toEqual([U1]);
    expect(await specsOf(a.store)).toEqual([U2]);
    expect(await f.leftOf(U1)).toEqual([]);
    expect(await a.store.views(both)).toHaveLength(1);
    expect((await a.store.events(1))[0]).toMatchObject({ url: U1, op: 'replica-forgotten', result: 'ok' });
    // Listed again later (a new configuration): registered afresh, nothing of the old record.
    await a.upsert(spec(U1));
    expect((await a.store.residents(U1)).map((r) => r.name)).toEqual([]);
    expect((await a.store.views(both, { name: 'u' })).map((v) => [v.residentCount, v.adapter])).toEqual([
      [0, undefined],
      [0, undefined],
    ]);
  });

  it('a replica node B still claims is kept; once B is dead (no claim or heartbeat for node_ttl_ms), forgotten after the grace', async () => {
    const f = make();
    const a = f.node('A');
    const b = f.node('B');
    await a.upsert(spec(U1));
    await b.upsert(spec(U1));
    expect(await a.retain([], 0)).toEqual([]);
    await sleep(5);
    expect(await a.retain([], 0)).toEqual([]); // B claims it
    expect(await specsOf(a.store)).toEqual([U1]);
    await b.stop();
    // A's claims lapse 300 ms after B's last sign of life, as A's node_ttl_ms says.
    const short = f.node('A', 300);
    await sleep(400);
    expect(await short.retain([], LONG)).toEqual([]); // B's claim lapsed; its last sign of life within the grace
    expect(await short.retain([], 1)).toEqual([U1]);
    expect(await f.leftOf(U1)).toEqual([]);
  });

  it('a replica with a lease on it (counted, or taken before it was registered) is kept until the lease ends', async () => {
    const f = make();
    const a = f.node('A');
    // Taken before its replica was registered (an emptied state): counted nowhere, still a request.
    await a.store.acquire({ id: 'early', url: U1, adapter: 'a', at: Date.now() });
    await a.upsert(spec(U1));
    await a.upsert(spec(U2));
    await a.store.acquire({ id: 'counted', url: U2, adapter: null, at: Date.now() });
    expect((await a.store.views([U1, U2])).map((v) => v.inFlight)).toEqual([0, 1]);
    await a.retain([], 0);
    await sleep(5);
    expect(await a.retain([], 0)).toEqual([]);
    await a.store.release('counted', Date.now());
    expect(await a.retain([], 0)).toEqual([U2]);
    await a.store.release('early', Date.now());
    expect(await a.retain([], 0)).toEqual([U1]);
    expect([...(await f.leftOf(U1)), ...(await f.leftOf(U2))]).toEqual([]);
  });

  it('a replica with a load or an unload under way is kept until it ends', async () => {
    const f = make();
    const a = f.node('A');
    await a.upsert(spec(U1));
    await a.upsert(spec(U2));
    const now = Date.now();
    const load = await a.store.beginLoad(U1, 'a', now, 4, LONG);
    const b = await a.store.beginLoad(U2, 'b', now, 4, LONG);
    await a.store.finishLoad(U2, 'b', b!, true, now + 1);
    const unload = await a.store.beginUnload(U2, 'b', now + 2, LONG);
    expect([load, unload].includes(null)).toBe(false);
    await a.retain([], 0);
    await sleep(5);
    expect(await a.retain([], 0)).toEqual([]);
    await a.store.finishLoad(U1, 'a', load!, true, now + 3);
    expect(await a.retain([], 0)).toEqual([U1]);
    await a.store.finishUnload(U2, 'b', unload!, true, now + 4);
    expect(await a.retain([], 0)).toEqual([U2]);
    expect([...(await f.leftOf(U1)), ...(await f.leftOf(U2))]).toEqual([]);
  });

  it('a replica nobody ever claimed (registered by an older version) is never forgotten', async () => {
    const f = make();
    const a = f.node('A');
    await f.upsertUnclaimed(spec(U1));
    await a.upsert(spec(U2));
    expect(await a.retain([], 0)).toEqual([]);
    await sleep(5);
    expect(await a.retain([], 0)).toEqual([U2]);
    expect(await specsOf(a.store)).toEqual([U1]);
  });

  it('a replica registered, then a retain without it in the same instant: kept (the grace)', async () => {
    const f = make();
    const a = f.node('A');
    await a.upsert(spec(U1));
    // The poller's round began before the configuration that lists U1 registered it.
    expect(await a.retain([], 10_000)).toEqual([]);
    expect(await specsOf(a.store)).toEqual([U1]);
    // Its next round lists it: claimed again, kept whatever the grace.
    expect(await a.retain([U1], 10_000)).toEqual([]);
    await sleep(5);
    expect(await a.retain([U1], 0)).toEqual([]);
    expect(await specsOf(a.store)).toEqual([U1]);
    // Dropped, past the grace, then registered again (a new configuration lists it): the
    // registration claims it, so the round that does not list it yet keeps it.
    await a.retain([], 10_000);
    await sleep(5);
    await a.upsert(spec(U1));
    expect(await a.retain([], 1)).toEqual([]);
    expect(await specsOf(a.store)).toEqual([U1]);
  });

  it('memory stays bounded: 200 address changes keep as many records as 2', async () => {
    const f = make();
    const a = f.node('A');
    const url = (i: number) => `http://10.1.${Math.floor(i / 250)}.${i % 250}:8000`;
    async function change(i: number): Promise<void> {
      await a.upsert(spec(url(i)));
      await busyHistory(a.store, url(i));
      // The old address is no longer configured; the grace (1 ms here) passes before the next round.
      expect(await a.retain([url(i)], 1)).toEqual([]);
      await sleep(3);
      expect(await a.retain([url(i)], 1)).toEqual(i === 0 ? [] : [url(i - 1)]);
    }
    await change(0);
    await change(1);
    const after2 = await f.size();
    for (let i = 2; i < 200; i++) await change(i);
    expect(await f.size()).toBe(after2);
    expect(await specsOf(a.store)).toEqual([url(199)]);
    for (const i of [0, 1, 100, 198]) expect(await f.leftOf(url(i))).toEqual([]);
  }, 60_000);

  it("a node's heartbeat keeps its claims live: a claim older than node_ttl_ms whose node heartbeats stays", async () => {
    const f = make();
    const b = f.node('B');
    await b.upsert(spec(U1));
    await b.stop();
    await f.heartbeat('B', -3_600_000);
    const a = f.node('A', 300);
    await sleep(400);
    expect(await a.retain([], 0)).toEqual([]);
    expect(await specsOf(a.store)).toEqual([U1]);
  });

  it('more live replicas due than one call looks at: the check still reaches the one to forget', async () => {
    const f = make();
    const b = f.node('B');
    // 105 replicas B claims and then only heartbeats for: live, their claims' stamps ageing past a
    // short grace (a grace under the retain interval), older than U1's.
    const many = Array.from({ length: 105 }, (_, i) => `http://10.9.0.${i + 1}:8000`);
    for (const u of many) await b.upsert(spec(u));
    await b.stop();
    const a = f.node('A');
    await a.upsert(spec(U1));
    expect(await a.retain([], LONG)).toEqual([]); // A no longer routes to U1: due once the grace passed
    // Later than U1's last claim on either side's clock (the memory fleet's heartbeats are Date.now()).
    await f.heartbeat('B', -1000);
    await sleep(20);
    // The first call looks at the 100 oldest due: B's, live. The next reaches U1 (failed before: each
    // call looked at the same 100 live ones, never at U1).
    expect(await a.retain([], 10)).toEqual([]);
    expect(await a.retain([], 10)).toEqual([U1]);
    expect(await specsOf(a.store)).toEqual([...many].sort());
  });

  it('more due since the same instant than one call looks at: the first call takes them in url order', async () => {
    const f = make();
    const a = f.node('A');
    // Redis's ZRANGEBYSCORE orders equal scores by member; the in-process twin sorts ties by url.
    const url = (i: number) => `http://r${String(i).padStart(3, '0')}:8000`;
    const urls = Array.from({ length: 101 }, (_, i) => url(i));
    for (let i = 0; i < 101; i++) await a.upsert(spec(url((i * 37) % 101)));
    expect(await a.retain([], LONG)).toEqual([]); // all dropped in one call: one instant
    await sleep(5);
    expect(await a.retain([], 1)).toEqual(urls.slice(0, 100));
    expect(await a.retain([], 1)).toEqual(urls.slice(100));
  });

  it("a dead node's last heartbeat counts as its last claim: the grace runs from it", async () => {
    const f = make();
    const b = f.node('B');
    await b.upsert(spec(U1));
    await b.stop();
    await sleep(1100);
    // B heartbeat 200 ms ago, after its claim (1.1 s ago): dead by A's node_ttl_ms (100), within a
    // grace of 1 s from that heartbeat, past it from the claim.
    await f.heartbeat('B', 200);
    const a = f.node('A', 100);
    expect(await a.retain([], 1000)).toEqual([]);
    expect(await specsOf(a.store)).toEqual([U1]);
    await sleep(850);
    expect(await a.retain([], 1000)).toEqual([U1]);
  });
});

describe('redis store: the claims of a node gone go with it (no record per node id ever seen)', () => {
  it("the expiry sweep drops a dead node's claims, a node leaving the state drops its own at once", async () => {
    const redis = env.redis;
    const prefix = `fn${randomBytes(4).toString('hex')}:`;
    const store = (id: string, nodeTtlMs = TTL) => {
      const s = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: nodeTtlMs, timeout: 2000 }), id);
      env.open.push(s);
      return s;
    };
    const members = async (key: string) =>
      ((await redis.command(['ZRANGE', `${prefix}${key}`, 0, -1])) as string[]).sort();
    const a = store('A', 300);
    await a.upsertReplica(spec(U1));
    // Five nodes that came and went (a Kong pod each, restarted): each claimed both replicas.
    for (const id of ['B1', 'B2', 'B3', 'B4', 'B5']) {
      const b = store(id);
      await b.upsertReplica(spec(U1));
      await b.upsertReplica(spec(U2));
      await b.close();
    }
    expect(await members(`claims:${U1}`)).toEqual(['A', 'B1', 'B2', 'B3', 'B4', 'B5']);
    await sleep(400);
    await a.retainReplicas([U1], LONG); // A's claim refreshed: its own stays live
    await a.expireLeases(Date.now(), LONG);
    expect(await members(`claims:${U1}`)).toEqual(['A']);
    expect(await members(`claims:${U2}`)).toEqual([]);
    expect(await redis.command(['KEYS', `${prefix}nc:B*`])).toEqual([]);
    // U2, claimed by dead nodes only, goes once the grace from their last sign of life passed.
    expect(await a.retainReplicas([U1], 1)).toEqual([U2]);
    // A node leaving the state (its runtime moved to other state) drops its claims at once.
    const c = store('C');
    await c.upsertReplica(spec(U1));
    expect(await members(`claims:${U1}`)).toEqual(['A', 'C']);
    await c.prune(() => [], true);
    expect(await members(`claims:${U1}`)).toEqual(['A']);
    expect(await redis.command(['KEYS', `${prefix}nc:C`])).toEqual([]);
  });
});

describe('the claims of a node the expiry sweep finds dead all go, those made after its last heartbeat too', () => {
  // Its last claim (a retain, a registration) came after its last heartbeat, within node_ttl_ms of
  // the sweep: left to `retain`, which looks only at replicas due (unclaimed for the grace), it
  // stayed for good on a replica a live node keeps claiming, with the dead node's `nc:` set.
  it('redis: none is left on a replica a live node keeps claiming', async () => {
    const redis = env.redis;
    const prefix = `fd${randomBytes(4).toString('hex')}:`;
    const store = (id: string) => {
      const s = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: 1000, timeout: 2000 }), id);
      env.open.push(s);
      return s;
    };
    const a = store('A');
    await a.upsertReplica(spec(U1));
    const d = store('D');
    await d.retainReplicas([U1], LONG);
    await d.close();
    // D's last heartbeat 1.5 s ago, its claim just now: dead at the sweep, its claim within the ttl.
    const [sec, usec] = (await redis.command(['TIME'])) as [string, string];
    await redis.command([
      'ZADD',
      `${prefix}nodes`,
      Number(sec) * 1000 + Math.floor(Number(usec) / 1000) - 1500,
      'D',
    ]);
    await a.expireLeases(Date.now(), LONG);
    // Long after, A still routing to U1 (its list every while, its sweeps).
    await sleep(1200);
    await a.retainReplicas([U1], LONG);
    await a.expireLeases(Date.now(), LONG);
    expect({
      claims: await redis.command(['ZRANGE', `${prefix}claims:${U1}`, 0, -1]),
      sets: ((await redis.command(['KEYS', `${prefix}nc:*`])) as string[]).sort(),
    }).toEqual({ claims: ['A'], sets: [`${prefix}nc:A`] });
  });

  it('memory (the modelled Redis): none is left on a replica a live node keeps claiming', async () => {
    const m = new MemoryFleetStore();
    const t0 = 1_000_000;
    await m.upsertReplica(spec(U1), 'A', t0);
    await m.retainReplicas([U1], LONG, { node: 'D', at: t0 + 1500, nodeTtlMs: 1000 });
    // The sweep at t0 + 2000: D's last heartbeat at t0 + 500.
    m.nodeGone('D', t0 + 2000, t0 + 500, 1000);
    await m.retainReplicas([U1], LONG, { node: 'A', at: t0 + 5000, nodeTtlMs: 1000 });
    const claims = (m as unknown as MemoryInside).claims;
    expect({ claims: [...(claims.byUrl.get(U1)?.keys() ?? [])], nodes: [...claims.byNode.keys()] }).toEqual({
      claims: ['A'],
      nodes: ['A'],
    });
  });
});

describe("memory (the modelled Redis): a gone node's claims are stamped with its last sign of life", () => {
  const G = 10_000;
  const t0 = 1_000_000;
  /** A store where node D alone claimed U1 at `claimAt`; node A routes elsewhere (U2). */
  async function world(claimAt: number) {
    const m = new MemoryFleetStore();
    await m.upsertReplica(spec(U2), 'A', t0);
    await m.upsertReplica(spec(U1), 'D', claimAt);
    const retainA = (at: number) => m.retainReplicas([U2], G, { node: 'A', at, nodeTtlMs: 1000 });
    return { m, retainA };
  }

  it('its last heartbeat after its last claim: the grace runs from the heartbeat', async () => {
    const { m, retainA } = await world(t0 + 100);
    m.nodeGone('D', t0 + 3000, t0 + 1500, 1000);
    expect([await retainA(t0 + 1500 + G - 1), await retainA(t0 + 1500 + G + 1)]).toEqual([[], [U1]]);
  });

  it('its last claim after its last heartbeat: the grace runs from the claim', async () => {
    const { m, retainA } = await world(t0 + 1500);
    m.nodeGone('D', t0 + 2000, t0 + 500, 1000);
    expect([await retainA(t0 + 1500 + G - 1), await retainA(t0 + 1500 + G + 1)]).toEqual([[], [U1]]);
  });

  it('leaving the state (no heartbeat: it routed there until then): the grace runs from its leaving', async () => {
    const { m, retainA } = await world(t0 + 100);
    m.nodeGone('D', t0 + 4000);
    expect([await retainA(t0 + 4000 + G - 1), await retainA(t0 + 4000 + G + 1)]).toEqual([[], [U1]]);
  });
});

describe('failover store: cut off from Redis, its local copy forgets by the same rule; back, its registration claims again', () => {
  it('forgets alone what this node stopped routing to, and registers only what it still routes to', async () => {
    const redis = env.redis;
    const prefix = `fo${randomBytes(4).toString('hex')}:`;
    const shared = new RedisFleetStore(redis.config(prefix, { timeout: 500 }), 'F');
    const s = new FailoverFleetStore(shared, collectingLogger(), { probeMs: 50, logEveryMs: 60_000 });
    env.open.push(s);
    await s.upsertReplica(spec(U1));
    await s.upsertReplica(spec(U2));
    await s.acquire({ id: 'L', url: U2, adapter: null, at: Date.now() });
    await redis.stop();
    try {
      await s.views([U1, U2]); // fails within its timeout: this node decides alone
      expect(s.mode()).toBe('local');
      expect(await s.retainReplicas([], LONG)).toEqual([]);
      await sleep(5);
      // U1 forgotten in the local copy; U2 kept there, its lease open.
      expect(await s.retainReplicas([], 1)).toEqual([U1]);
      expect((await s.local.replicaSpecs()).map((x) => x.url)).toEqual([U2]);
      // Routed to again meanwhile: claimed in the local copy.
      expect(await s.retainReplicas([U2], 1)).toEqual([]);
    } finally {
      await redis.start(); // empty: nothing was persisted
    }
    await waitFor(() => s.mode() === 'redis', 10_000, 'recovery');
    // Registered again: only what the local copy kept, claimed by this node there.
    expect(await specsOf(shared)).toEqual([U2]);
    expect(await redis.command(['ZRANGE', `${prefix}claims:${U2}`, 0, -1])).toEqual(['F']);
    await s.release('L', Date.now());
    expect(await s.retainReplicas([], 1)).toEqual([]);
    await sleep(5);
    expect(await s.retainReplicas([], 1)).toEqual([U2]);
    expect(await specsOf(shared)).toEqual([]);
  }, 30_000);
});
