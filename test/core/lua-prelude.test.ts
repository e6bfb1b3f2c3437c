/**
 * The prelude's helpers (src/fleet/redis/scripts/prelude.ts: the entries and their counts, the
 * locks, the leases' drop, the gone marks, the event list) case by case, against a real
 * redis-server, where the other real-Redis suites let a mutant through (`npm run mutation:lua --
 * prelude`, docs/reliability/mutation-testing.md, "The Lua"). lua-scripts.test.ts holds the
 * scripts' own cases, lua-residency.test.ts and lua-load-locks.test.ts theirs.
 */
import { randomBytes } from 'node:crypto';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { waitFor } from '../../harness/wait';
import { useRedisStores } from '../helpers/redis-stores';

const U = 'http://10.0.0.1:8000';
const TTL = 60_000;

const env = useRedisStores();

/** A node's store on a prefix of its own (a fresh state), the replica registered. */
async function store(): Promise<{ s: RedisFleetStore; p: string }> {
  const p = `lp${randomBytes(4).toString('hex')}:`;
  const s = new RedisFleetStore(env.redis.config(p, { node_ttl_ms: 60_000, timeout: 2000 }), 'n1');
  env.open.push(s);
  await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  return { s, p };
}
const cmd = (...args: [string, ...(string | number)[]]) => env.redis.command(args);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Loads `name` (no limit): it ends loaded. */
async function loaded(s: RedisFleetStore, name: string): Promise<void> {
  const f = await s.beginLoad(U, name, 1, 100, TTL);
  expect(await s.finishLoad(U, name, f!, true, 2)).toBe(true);
}

/** `s`'s wake-ups on the change channel from now: subscribed, and any wake-up so far let pass first. */
async function changesFrom(s: RedisFleetStore, p: string): Promise<jest.Mock> {
  const woken = jest.fn();
  s.onRemoteChange = woken;
  await waitFor(async () => (await env.redis.subscribers(`${p}changed`)) === 1, 5000, 'subscribed');
  await sleep(200);
  woken.mockClear();
  return woken;
}

describe("Redis's clock (now_ms)", () => {
  it('stamps in the milliseconds of TIME, as a node reads it (sharedTime): never before, never after', async () => {
    // A poll's start read with TIME is compared with the entries' stamps (residency.ts snapshot): a
    // stamp a millisecond early made an entry changed after the read began look older than it.
    const { s, p } = await store();
    // Many times: a stamp a millisecond early shows only when the three calls share a millisecond.
    for (let i = 0; i < 200; i++) {
      const before = await s.sharedTime();
      await s.acquire({ id: `l${i}`, url: U, adapter: null, at: i });
      const after = await s.sharedTime();
      const stamp = Number(await cmd('ZSCORE', `${p}lease-at`, `l${i}`));
      expect(stamp).toBeGreaterThanOrEqual(before);
      expect(stamp).toBeLessThanOrEqual(after);
    }
  });
});

describe('the locks (lock, unlock, unlockstale, endchange)', () => {
  it('a load and an unload that end take their locks out: none left for the sweep to find', async () => {
    const { s, p } = await store();
    const locks = async () => [await cmd('HLEN', `${p}lock`), await cmd('ZCARD', `${p}lock-until`)];
    const load = await s.beginLoad(U, 'a', 1, 4, TTL);
    expect(await locks()).toEqual([1, 1]);
    expect(await s.finishLoad(U, 'a', load!, true, 2)).toBe(true);
    expect(await locks()).toEqual([0, 0]);
    const unload = await s.beginUnload(U, 'a', 3, TTL);
    expect(await locks()).toEqual([1, 1]);
    expect(await s.finishUnload(U, 'a', unload!, true, 4)).toBe(true);
    expect(await locks()).toEqual([0, 0]);
  });

  it('a finish refused because its change is over takes out the lock that change left behind', async () => {
    // A lock whose entry is gone or holds another fence (a state rolled back, a reply lost): the
    // holder's finish is refused, and ends that lock rather than leave it to the sweep.
    const { s, p } = await store();
    const fa = await s.beginLoad(U, 'a', 1, 4, TTL);
    const fb = await s.beginLoad(U, 'b', 2, 4, TTL);
    await cmd('HDEL', `${p}res:${U}`, 'a');
    await cmd(
      'HSET',
      `${p}res:${U}`,
      'b',
      JSON.stringify({ state: 'loading', since: 2, lastUsed: 2, fence: 7 }),
    );
    expect(await s.finishLoad(U, 'a', fa!, true, 3)).toBe(false);
    expect(await s.finishLoad(U, 'b', fb!, true, 3)).toBe(false);
    expect(await cmd('HLEN', `${p}lock`)).toBe(0);
    expect(await cmd('ZCARD', `${p}lock-until`)).toBe(0);
  });

  it("each fence is above the last one handed out, though that one is ahead of Redis's clock", async () => {
    // A state from a Redis whose clock ran ahead (a failover): the fences go on up from the last
    // one, never back to Redis's time, where they could repeat one a holder still names.
    const { s, p } = await store();
    const ahead = (await s.sharedTime()) * 10 + 10_000_000;
    await cmd('SET', `${p}fence`, ahead);
    const fa = await s.beginLoad(U, 'a', 1, 4, TTL);
    const fb = await s.beginLoad(U, 'b', 2, 4, TTL);
    expect(fa).toBeGreaterThan(ahead);
    expect(fb).toBeGreaterThan(fa!);
    // Each its own lock: one's finish leaves the other's.
    expect(await s.finishLoad(U, 'a', fa!, true, 3)).toBe(true);
    expect(await s.holds(U, 'b', fb!)).toBe(true);
  });

  it("an end or holds naming its node is taken only by that node's lock under the fence (othernodes)", async () => {
    // A server that lost a node's lock may hand its fence out again to another node; the end the
    // first node owes the old lock must not end the new one (failover-suspects.test.ts, 3 and 5).
    const { s, p } = await store();
    const other = new RedisFleetStore(env.redis.config(p, { node_ttl_ms: 60_000, timeout: 2000 }), 'n2');
    env.open.push(other);
    const state = async (name: string) => (await s.views([U], { name }))[0]!.adapter?.state;
    const load = await s.beginLoad(U, 'a', 1, 4, TTL);
    // n2 naming itself: neither holds n1's lock nor ends its load.
    expect(await other.holds(U, 'a', load!, true)).toBe(false);
    expect(await other.finishLoad(U, 'a', load!, true, 2, true)).toBe(false);
    expect(await state('a')).toBe('loading');
    // n1 naming itself holds and ends it.
    expect(await s.holds(U, 'a', load!, true)).toBe(true);
    expect(await s.finishLoad(U, 'a', load!, true, 3, true)).toBe(true);
    expect(await state('a')).toBe('loaded');
    const unload = await s.beginUnload(U, 'a', 4, TTL);
    expect(await other.finishUnload(U, 'a', unload!, true, 5, true)).toBe(false);
    expect(await state('a')).toBe('unloading');
    // Naming no node, any holder's lock is taken, as the memory store takes it.
    expect(await other.holds(U, 'a', unload!)).toBe(true);
    expect(await other.finishUnload(U, 'a', unload!, true, 6)).toBe(true);
    expect(await cmd('HLEN', `${p}lock`)).toBe(0);
  });
});

describe("a lease's drop (droplease)", () => {
  it('a released lease leaves no key behind, and its adapter is busy until its last lease goes', async () => {
    const { s, p } = await store();
    await loaded(s, 'a');
    await s.acquire({ id: 'l1', url: U, adapter: 'a', at: 3 });
    await s.acquire({ id: 'l2', url: U, adapter: 'a', at: 3 });
    expect((await s.release('l1', 4))!.adapterIdle).toBe(false);
    // One request still runs on a: busy, so no node unloads it under that request.
    expect(await cmd('HGET', `${p}busy:${U}`, 'a')).toBe('1');
    expect(await s.beginUnload(U, 'a', 5, TTL)).toBeNull();
    expect((await s.release('l2', 6))!.adapterIdle).toBe(true);
    // Nothing left: no count (a '0' field no script takes out), no lease, no id in the sets that
    // the sweep (by age), a prune (by node) or a poll (renewals by adapter) walk.
    expect(await cmd('HGETALL', `${p}busy:${U}`)).toEqual([]);
    expect(await cmd('HGET', `${p}r:${U}`, 'inFlight')).toBe('0');
    expect(await cmd('HLEN', `${p}lease`)).toBe(0);
    expect(await cmd('ZCARD', `${p}lease-at`)).toBe(0);
    expect(await cmd('ZCARD', `${p}lease-t0`)).toBe(0);
    expect(await cmd('EXISTS', `${p}nl:n1`)).toBe(0);
    expect(await cmd('EXISTS', `${p}ls:${U}|a`)).toBe(0);
    expect(await s.release('l2', 7)).toBeUndefined();
  });

  it("an adapter's last lease released wakes the change channel: its unload may go now", async () => {
    const { s, p } = await store();
    await loaded(s, 'a');
    await s.acquire({ id: 'l1', url: U, adapter: 'a', at: 3 });
    const woken = await changesFrom(s, p);
    await s.release('l1', 4);
    await waitFor(() => woken.mock.calls.length > 0, 5000, 'woken by the last release');
  });

  it('a lease taken before its replica was registered uncounts nothing at its release', async () => {
    // Counted nowhere (an emptied state: the node re-took it before any registration): the counts
    // the registration starts at 0 stay there, not -1 (a replica read emptier than it is).
    const { s, p } = await store();
    const V = 'http://10.0.0.2:8000';
    await s.acquire({ id: 'early', url: V, adapter: 'a', at: 1 });
    await s.upsertReplica({ url: V, backend: 'vllm', priority: 0 });
    await s.release('early', 2);
    expect(await cmd('HGET', `${p}r:${V}`, 'inFlight')).toBe('0');
    expect(await cmd('HGETALL', `${p}busy:${V}`)).toEqual([]);
  });
});

describe('the events (pushevent, event)', () => {
  it('the event list keeps the newest 200, as the memory store does', async () => {
    const { s } = await store();
    for (let i = 1; i <= 201; i++)
      await s.pushEvent({ at: i, url: U, adapter: 'a', op: 'load', result: 'ok', detail: String(i) });
    const kept = await s.events(1000);
    expect(kept).toHaveLength(200);
    expect(kept[0]!.at).toBe(2);
    expect(kept[199]!.at).toBe(201);
  });
});

describe('passive health (outcome)', () => {
  it('the failure that marks a replica down says so in the event list, once', async () => {
    const { s } = await store();
    for (let at = 1; at <= 4; at++) await s.reportOutcome(U, false, at);
    const down = (await s.events(10)).filter((e) => e.op === 'replica-down');
    expect(down).toEqual([
      {
        at: 3,
        url: U,
        adapter: '',
        op: 'replica-down',
        result: 'error',
        detail: '3 upstream failures in a row',
      },
    ]);
  });
});

describe('the live nodes (livenodes)', () => {
  /** The heartbeat script's reply, {epoch, {nodes, epoch age}} (redis-store.ts reads it so). */
  const beat = async (s: RedisFleetStore, p: string) => {
    const scripts = s.client as unknown as Record<string, (...a: string[]) => Promise<unknown>>;
    return (await scripts.heartbeat!(p, 'n1')) as [string | null, [number, number]];
  };

  it("reads the state's age from its epoch, by Redis's clock: young, old, unknown, emptied", async () => {
    // live-nodes.ts: younger than node_ttl_ms (or emptied, 0) the count is a floor only; an age
    // past it, or -1 (an older state's keys, its start unknown), is a whole count.
    const { s, p } = await store();
    const [, young] = await beat(s, p);
    expect(young[0]).toBe(1);
    expect(young[1]).toBeGreaterThanOrEqual(0);
    expect(young[1]).toBeLessThan(60_000);
    await cmd('SET', `${p}epoch-at`, (await s.sharedTime()) - 120_000);
    expect((await beat(s, p))[1][1]).toBeGreaterThanOrEqual(120_000);
    await cmd('DEL', `${p}epoch-at`);
    expect((await beat(s, p))[1][1]).toBe(-1);
    // Emptied, no registration since: no epoch, age 0, the count of a state just begun (not whole).
    await cmd('DEL', `${p}epoch`);
    expect(await beat(s, p)).toEqual([null, [1, 0]]);
  });
});

describe('the gone marks (markgone)', () => {
  it('keep the newest 256 per replica, as the memory store does', async () => {
    const { s, p } = await store();
    const names = Array.from({ length: 257 }, (_, i) => `g${i}`);
    // Loaded entries written at once (the counts do not matter here), then each forgotten: gone.
    await s.client.hset(
      `${p}res:${U}`,
      ...names.flatMap((n) => [n, JSON.stringify({ state: 'loaded', since: 1, lastUsed: 1 })]),
    );
    for (const n of names) await s.forget(U, n, 2);
    const kept = (await cmd('ZRANGE', `${p}gone:${U}`, 0, -1)) as string[];
    expect(kept).toHaveLength(256);
    expect(kept).not.toContain('g0');
    expect(kept).toContain('g256');
  });
});
