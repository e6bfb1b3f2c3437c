/**
 * Failover suspicions from the last review, each turned into a test over a real redis-server.
 * Each case names the suspicion it checks and whether it failed on the code before its fix.
 */
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { ReplicaSnapshot, ReplicaSpec } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { TcpProxy } from '../../harness/net/tcp-proxy';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { snapshotWithA, vllmSpec } from './helpers';

const U1 = 'http://10.0.0.1:8000';
const U2 = 'http://10.0.0.2:8000';
/** Heartbeats every second: node_ttl_ms / 4. */
const NODE_TTL_MS = 4000;

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

const spec = vllmSpec;
/** A poll: adapter `a` loaded and in the registry, a request running. */
const poll = (at: number): ReplicaSnapshot => snapshotWithA(at, 1);

function node(
  prefix: string,
  id: string,
  o: { nodeTtlMs?: number; probeMs?: number; timeout?: number; port?: number } = {},
) {
  const config = redis.config(prefix, {
    node_ttl_ms: o.nodeTtlMs ?? NODE_TTL_MS,
    timeout: o.timeout ?? 2000,
    ...(o.port !== undefined && { port: o.port }),
  });
  const shared = new RedisFleetStore(config, id);
  const options = { probeMs: o.probeMs ?? 1000, logEveryMs: 60_000 };
  return { id, shared, s: new FailoverFleetStore(shared, silentLogger, options) };
}

const busy = async (prefix: string, url: string, adapter: string) =>
  Number((await redis.command(['HGET', `${prefix}busy:${url}`, adapter])) ?? 0);

describe('suspicion 1: two emptyings during one reclaim', () => {
  it("a second FLUSHALL between two replicas' registrations is another emptying: the idle node's lease is taken again into the second state", async () => {
    const P = 'fs1:';
    await redis.command(['FLUSHALL']);
    const a = node(P, 'A');
    // Half a heartbeat apart: B's reclaim never runs between A's two registrations (it would
    // register the first replica in the second state itself).
    await new Promise((r) => setTimeout(r, NODE_TTL_MS / 8));
    const b = node(P, 'B');
    try {
      for (const n of [a, b]) for (const u of [U1, U2]) await n.s.upsertReplica(spec(u));
      await a.s.applySnapshot(U1, poll(Date.now()));
      // Node A has a request running on U1 and then nothing to decide (idle): only its heartbeat
      // tells it of an emptying.
      expect(await a.s.acquire({ id: 'LA', url: U1, adapter: 'a', at: Date.now() })).toBe('loaded');
      const before = a.shared.currentEpoch;

      // The second emptying lands while A's reclaim registers its replicas: after U1, before U2.
      const upsert = a.shared.upsertReplica.bind(a.shared);
      let second = false;
      a.shared.upsertReplica = async (s: ReplicaSpec) => {
        await upsert(s);
        if (!second && s.url === U1) {
          second = true;
          await redis.command(['FLUSHALL']);
        }
      };
      await redis.command(['FLUSHALL']);
      await waitFor(() => second, 5000, "A's reclaim after the first FLUSHALL");
      await waitFor(() => a.shared.currentEpoch !== before, 5000, 'A on the new state');
      // B's heartbeat finds the state emptied and registers both replicas; its poll says `a` loaded.
      await waitFor(
        async () => Number(await redis.command(['HLEN', `${P}spec`])) === 2,
        5000,
        'both registered',
      );
      await b.s.applySnapshot(U1, poll(Date.now()));
      // Past the grace and every node's hold-off: A's request still runs on U1.
      await new Promise((r) => setTimeout(r, NODE_TTL_MS + 1500));
      expect(await busy(P, U1, 'a')).toBe(1);
      expect(await b.s.beginUnload(U1, 'a', Date.now(), 60_000, '\u0000trim', 0)).toBeNull();
    } finally {
      for (const n of [a, b]) await n.s.close();
    }
  }, 30_000);
});

describe('suspicions 3 and 5: lock ends replayed to a server that handed their fence out again', () => {
  it("an unload's end owed to the old server does not end another node's unload that the new server gave the same fence", async () => {
    const P = 'fs5:';
    await redis.command(['FLUSHALL']);
    // Heartbeats every 15 s: neither node learns of the restart but from its own calls.
    const h1 = node(P, 'H1', { nodeTtlMs: 60_000, probeMs: 50 });
    const h2 = node(P, 'H2', { nodeTtlMs: 60_000, probeMs: 50 });
    try {
      for (const n of [h1, h2]) await n.s.upsertReplica(spec(U1));
      await h1.s.applySnapshot(U1, poll(Date.now()));
      // Past the hold-off after the first heartbeats found no state here.
      await new Promise((r) => setTimeout(r, 200));
      // The fence counter runs an hour ahead of this server's clock: fences were handed out by a
      // server whose clock was ahead (a Sentinel switch to this one, whose clock lags), so each
      // fence here is the last one plus 1. The snapshot a restart comes back from is taken now.
      await redis.command(['SET', `${P}fence`, (Date.now() + 3_600_000) * 10]);
      await redis.command(['SAVE']);
      // H1's unload of `a` fails (the adapter stays loaded); the server acknowledges its end.
      const f1 = await h1.s.beginUnload(U1, 'a', Date.now(), 60_000);
      expect(f1).not.toBeNull();
      expect(await h1.s.finishUnload(U1, 'a', f1!, false, Date.now())).toBe(true);
      // The server restarts from the snapshot: H1's lock and its end are lost, the counter rolled back.
      await redis.stop();
      await redis.start();
      // H2 finds the new server first, recovers, and is granted an unload of `a` (vLLM unloads it).
      await h2.s.views([U1]);
      await waitFor(() => h2.s.mode() === 'redis', 5000, 'H2 back on the restarted server');
      await new Promise((r) => setTimeout(r, 200)); // past H2's hold-off
      const f2 = await h2.s.beginUnload(U1, 'a', Date.now(), 60_000);
      expect(f2).not.toBeNull();
      // H1 finds the restart: its recovery sends again the end the server lost.
      await h1.s.views([U1]);
      await waitFor(() => h1.s.mode() === 'redis', 5000, 'H1 back on the restarted server');
      // H2's unload is still under way: `a` must not read loaded (a request would go to it).
      const [v] = await h2.s.views([U1], { name: 'a' });
      expect(v?.adapter?.state).toBe('unloading');
      expect(await h2.s.finishUnload(U1, 'a', f2!, true, Date.now())).toBe(true);
    } finally {
      for (const n of [h1, h2]) await n.s.close();
    }
  }, 30_000);

  it('an end owed to the old server is dropped once the new server hands this node the same fence again', async () => {
    const P = 'fs3:';
    await redis.command(['FLUSHALL']);
    const h = node(P, 'H', { nodeTtlMs: 60_000, probeMs: 50, timeout: 300 });
    try {
      await h.s.upsertReplica(spec(U1));
      await h.s.applySnapshot(U1, poll(Date.now()));
      await new Promise((r) => setTimeout(r, 200)); // past the hold-off after the first heartbeat
      await redis.command(['SET', `${P}fence`, (Date.now() + 3_600_000) * 10]); // as above
      await redis.command(['SAVE']);
      const f1 = await h.s.beginUnload(U1, 'a', Date.now(), 60_000);
      expect(await h.s.finishUnload(U1, 'a', f1!, false, Date.now())).toBe(true);
      await redis.stop();
      await redis.start();
      // The node recovers on the restarted server (its replay finds no lock), then unloads `a` again:
      // the server hands it the same fence.
      await h.s.views([U1]);
      await waitFor(() => h.s.mode() === 'redis', 5000, 'back on the restarted server');
      await new Promise((r) => setTimeout(r, 200));
      const f2 = await h.s.beginUnload(U1, 'a', Date.now(), 60_000);
      expect(f2).toBe(f1);
      // A short outage: the recovery after it replays what is owed. The old end is not this unload's.
      redis.pause();
      await h.s.views([U1]);
      expect(h.s.mode()).toBe('local');
      redis.resume();
      await waitFor(() => h.s.mode() === 'redis', 5000, 'back after the pause');
      const [v] = await h.s.views([U1], { name: 'a' });
      expect(v?.adapter?.state).toBe('unloading');
      expect(await h.s.finishUnload(U1, 'a', f2!, true, Date.now())).toBe(true);
    } finally {
      await h.s.close();
    }
  }, 30_000);
});

describe('suspicion 2: a router configuration pushed while the node decides alone', () => {
  it('a runtime replaced on the same state while its store decides alone: the successor unloads nothing under the request it admitted alone', async () => {
    const P = 'fs2:';
    await redis.command(['FLUSHALL']);
    const proxy = await TcpProxy.start(redis.port);
    // The old runtime's store, through a link the test cuts; its probe comes only after a minute.
    const old = node(P, 'X', { probeMs: 60_000, timeout: 300, port: proxy.port });
    let next: ReturnType<typeof node> | null = null;
    try {
      await old.s.upsertReplica(spec(U1));
      await old.s.applySnapshot(U1, poll(Date.now()));
      // Its link is cut: it decides alone and admits a request on `a` (a local lease).
      proxy.cut('refuse');
      await old.s.acquire({ id: 'LX', url: U1, adapter: 'a', at: Date.now() });
      expect(old.s.mode()).toBe('local');
      proxy.restore();
      // Redis answers again, but the old store's probe has not come yet. A router configuration with
      // a new `timeout` arrives (same state, same node id): its store succeeds the old one.
      next = node(P, 'X', { probeMs: 50 });
      await next.s.succeed(old.s);
      await next.s.upsertReplica(spec(U1));
      await next.s.applySnapshot(U1, poll(Date.now()));
      await new Promise((r) => setTimeout(r, 200));
      // The request admitted alone still runs on `a`: no unload of it.
      expect(await next.s.beginUnload(U1, 'a', Date.now(), 60_000)).toBeNull();
    } finally {
      for (const n of [old, ...(next ? [next] : [])]) await n.s.close();
      await proxy.close();
    }
  }, 30_000);
});
