/**
 * Unit test of EndedLocks (src/fleet/redis/ended-locks.ts, one module), written against the
 * survivors of its mutation run (docs/reliability/mutation-testing.md): the ends of the locks this
 * node was granted in the shared store, sent again while each lock's TTL may still hold it there
 * (a server that missed the last writes), and only those: never a local lock's (negative fence),
 * never one not begun there, each once per replay, and none past its TTL. The last cases run the
 * replay against a real redis-server, where the scripts' fence check decides.
 */
import { systemClock, type Clock } from '../../src/clock';
import { EndedLocks } from '../../src/fleet/redis/ended-locks';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { LoadEnd } from '../../src/fleet/store';
import { stateInRedis, useRedisStores } from '../helpers/redis-stores';
import { snapshotWithA, vllmSpec } from './helpers';

const U = 'http://a:8000';

function setup() {
  const t = { now: 1_000 };
  const clock: Clock = { now: () => t.now, after: () => () => undefined };
  const calls: string[] = [];
  const shared = {
    finishLoad: async (url: string, adapter: string, fence: number, ok: LoadEnd, at: number) =>
      void calls.push(`load ${url} ${adapter} ${fence} ${ok} ${at}`),
    finishUnload: async (url: string, adapter: string, fence: number, ok: boolean, at: number) =>
      void calls.push(`unload ${url} ${adapter} ${fence} ${ok} ${at}`),
  } as unknown as SharedStore;
  return { t, calls, shared, locks: new EndedLocks(clock) };
}

describe('EndedLocks', () => {
  it('replays the ends of shared locks, load and unload, at the time of the replay, at every replay', async () => {
    const { t, calls, shared, locks } = setup();
    expect(locks.begin(7, 500)).toBe(7);
    expect(locks.begin(8, 500)).toBe(8);
    locks.end('load', U, 'a', 7, true);
    locks.end('unload', U, 'b', 8, false);
    t.now = 1_200;
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} a 7 replayed 1200`, `unload ${U} b 8 false 1200`]);
    calls.length = 0;
    t.now = 1_300;
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} a 7 replayed 1300`, `unload ${U} b 8 false 1300`]);
  });

  it('never replays a lock not begun in the shared store, a local one, or one ended twice twice', async () => {
    const { calls, shared, locks } = setup();
    expect(locks.begin(null, 500)).toBeNull();
    expect(locks.begin(-3, 500)).toBe(-3);
    expect(locks.begin(0, 500)).toBe(0);
    locks.end('load', U, 'x', -3, true);
    locks.end('load', U, 'y', 0, true);
    locks.end('load', U, 'z', 9, true); // never begun
    locks.begin(5, 500);
    locks.end('load', U, 'a', 5, true);
    locks.end('load', U, 'a', 5, true);
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} a 5 replayed 1000`]);
  });

  it('forgets an end once its lock’s TTL has passed, at the TTL exactly', async () => {
    const { t, calls, shared, locks } = setup();
    locks.begin(5, 500);
    locks.begin(6, 800);
    locks.end('load', U, 'a', 5, true);
    locks.end('load', U, 'b', 6, true);
    t.now = 1_499;
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} a 5 replayed 1499`, `load ${U} b 6 replayed 1499`]);
    calls.length = 0;
    t.now = 1_500;
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} b 6 replayed 1500`]);
    calls.length = 0;
    t.now = 1_800;
    await locks.replay(shared);
    expect(calls).toEqual([]);
  });

  it('an end recorded after others expired keeps only the live ones', async () => {
    const { t, calls, shared, locks } = setup();
    locks.begin(5, 100);
    locks.end('load', U, 'a', 5, true);
    t.now = 1_100;
    locks.begin(6, 100);
    locks.end('unload', U, 'b', 6, true);
    await locks.replay(shared);
    expect(calls).toEqual([`unload ${U} b 6 true 1100`]);
  });

  // The second run (docs/reliability/mutation-testing.md, ended-locks.ts at the review-57 code):
  // a lock begun after another ended, and a hand-over keeping the successor's own ends.
  it('a lock begun after another ended keeps that end owed; a fence handed out again drops the old end only', async () => {
    const { calls, shared, locks } = setup();
    locks.begin(5, 500);
    locks.end('load', U, 'a', 5, true);
    locks.begin(6, 500);
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} a 5 replayed 1000`]);
    calls.length = 0;
    locks.end('unload', U, 'b', 6, true);
    // Fence 5 handed out again (a server that lost the lock, its counter rolled back): the end
    // owed to the old lock would end the new one, this node's own to the scripts.
    locks.begin(5, 500);
    await locks.replay(shared);
    expect(calls).toEqual([`unload ${U} b 6 true 1000`]);
  });

  it('a hand-over keeps the successor’s own ends, and marks ends unsent only when some came over', async () => {
    const { calls, shared, locks } = setup();
    const clock: Clock = { now: () => 1_000, after: () => () => undefined };
    expect(locks.unsent).toBe(false);
    locks.begin(5, 500);
    locks.end('load', U, 'a', 5, true);
    locks.adopt(new EndedLocks(clock)); // a predecessor that owes nothing
    expect(locks.unsent).toBe(false);
    const pred = new EndedLocks(clock);
    pred.begin(8, 500);
    pred.end('unload', U, 'b', 8, false);
    locks.adopt(pred);
    expect(locks.unsent).toBe(true);
    await locks.replay(shared);
    expect(locks.unsent).toBe(false);
    expect(calls).toEqual([`load ${U} a 5 replayed 1000`, `unload ${U} b 8 false 1000`]);
  });
});

/**
 * Against a real redis-server: the Lua's fence check is what stands between a replayed end and a
 * lock handed out again under the same fence (a server that lost writes, its counter run ahead of
 * its clock: prelude.ts `newfence`), another node's or this node's own.
 */
describe('EndedLocks replayed to a real redis-server', () => {
  const servers = useRedisStores();
  const U1 = 'http://10.0.0.1:8000';

  async function nodes(prefix: string) {
    const { redis, open } = servers;
    await redis.command(['FLUSHALL']);
    const store = (id: string) => {
      const s = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 }), id);
      open.push(s);
      return s;
    };
    const [x, y] = [store('X'), store('Y')];
    await x.upsertReplica(vllmSpec(U1));
    await x.applySnapshot(U1, snapshotWithA(Date.now()));
    // The fence counter ahead of the server's clock: each fence handed out is the counter's next.
    const ahead = Date.now() * 10 + 1e9;
    const rollBack = () => redis.command(['SET', `${prefix}fence`, String(ahead)]);
    await rollBack();
    return { x, y, rollBack, fence: ahead + 1, locks: new EndedLocks(systemClock) };
  }
  const stateOf = (prefix: string) => stateInRedis(servers.redis, prefix, U1, 'b');

  it("a load's end never ends another node's load under the same fence", async () => {
    const P = 'mel-load:';
    const { x, y, rollBack, fence, locks } = await nodes(P);
    expect(locks.begin(await x.beginLoad(U1, 'b', Date.now(), 4, 60_000), 60_000)).toBe(fence);
    expect(await x.finishLoad(U1, 'b', fence, true, Date.now())).toBe(true);
    locks.end('load', U1, 'b', fence, true);
    const u = await y.beginUnload(U1, 'b', Date.now(), 60_000);
    expect(await y.finishUnload(U1, 'b', u!, true, Date.now())).toBe(true);
    await rollBack();
    expect(await y.beginLoad(U1, 'b', Date.now(), 4, 60_000)).toBe(fence);
    await locks.replay(x);
    // Y's load is under way: read `loaded`, a request sent on it gets the replica's 404.
    expect(await stateOf(P)).toBe('loading');
    expect(await y.finishLoad(U1, 'b', fence, true, Date.now())).toBe(true);
  }, 30_000);

  it("an unload's end never ends another node's unload under the same fence", async () => {
    const P = 'mel-unload:';
    const { x, y, rollBack, fence, locks } = await nodes(P);
    const f0 = await x.beginLoad(U1, 'b', Date.now(), 4, 60_000);
    expect(await x.finishLoad(U1, 'b', f0!, true, Date.now())).toBe(true);
    await rollBack();
    expect(locks.begin(await x.beginUnload(U1, 'b', Date.now(), 60_000), 60_000)).toBe(fence);
    expect(await x.finishUnload(U1, 'b', fence, true, Date.now())).toBe(true);
    locks.end('unload', U1, 'b', fence, true);
    const f1 = await y.beginLoad(U1, 'b', Date.now(), 4, 60_000);
    expect(await y.finishLoad(U1, 'b', f1!, true, Date.now())).toBe(true);
    await rollBack();
    expect(await y.beginUnload(U1, 'b', Date.now(), 60_000)).toBe(fence);
    await locks.replay(x);
    // Y's unload is under way: read gone, another node would load it again beside it.
    expect(await stateOf(P)).toBe('unloading');
    expect(await y.finishUnload(U1, 'b', fence, true, Date.now())).toBe(true);
  }, 30_000);

  it("an end owed under a fence handed out again to this node's own new load is dropped: it stays loading", async () => {
    const P = 'mel-own:';
    const { x, y, rollBack, fence, locks } = await nodes(P);
    expect(locks.begin(await x.beginLoad(U1, 'b', Date.now(), 4, 60_000), 60_000)).toBe(fence);
    expect(await x.finishLoad(U1, 'b', fence, true, Date.now())).toBe(true);
    locks.end('load', U1, 'b', fence, true);
    const u = await y.beginUnload(U1, 'b', Date.now(), 60_000);
    expect(await y.finishUnload(U1, 'b', u!, true, Date.now())).toBe(true);
    await rollBack();
    expect(locks.begin(await x.beginLoad(U1, 'b', Date.now(), 4, 60_000), 60_000)).toBe(fence);
    await locks.replay(x);
    expect(await stateOf(P)).toBe('loading');
    expect(await x.finishLoad(U1, 'b', fence, true, Date.now())).toBe(true);
  }, 30_000);
});
