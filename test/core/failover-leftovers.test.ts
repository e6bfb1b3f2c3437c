/**
 * The failover review's leftovers, each over a real redis-server: a lock end owed by a runtime
 * retired for other state, and a registration the shared state keeps emptying under. Each case
 * says how it failed on the code before its fix.
 */
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { ReplicaSnapshot, ReplicaSpec } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { TcpProxy } from '../../harness/net/tcp-proxy';
import { RedisServer } from '../../harness/redis/server';
import { stateInRedis } from '../helpers/redis-stores';
import { waitFor } from '../../harness/wait';
import { snapshotWithA, vllmSpec } from './helpers';

const U1 = 'http://10.0.0.1:8000';
const U2 = 'http://10.0.0.2:8000';

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

/** Heartbeats every 15 s: no heartbeat takes part in these cases. */
function node(prefix: string, id: string, o: { probeMs: number; timeout: number; port?: number }) {
  const config = redis.config(prefix, {
    node_ttl_ms: 60_000,
    timeout: o.timeout,
    ...(o.port !== undefined && { port: o.port }),
  });
  const shared = new RedisFleetStore(config, id);
  const options = { probeMs: o.probeMs, logEveryMs: 60_000 };
  return { id, shared, s: new FailoverFleetStore(shared, silentLogger, options) };
}

/** What a peer still on that state reads of `adapter` on U1. */
const stateIn = (prefix: string, adapter: string) => stateInRedis(redis, prefix, U1, adapter);

describe('a lock end owed by a runtime retired for other state', () => {
  it('reaches the old state once it answers, while the retired store leaves it', async () => {
    const P = 'fl1:';
    await redis.command(['FLUSHALL']);
    const proxy = await TcpProxy.start(redis.port);
    // The cut refuses (each call fails at once): the bound on a call is no part of the case, and
    // 300 ms let a loaded machine's load lock go local (a negative fence) before the cut.
    const old = node(P, 'X', { probeMs: 50, timeout: 2000, port: proxy.port });
    try {
      await old.s.upsertReplica(spec(U1));
      await old.s.applySnapshot(U1, poll(Date.now()));
      const fence = await old.s.beginLoad(U1, 'b', Date.now(), 4, 60_000);
      expect(fence).toBeGreaterThan(0);
      // Redis is cut off when the load lands: its end is owed to the shared state.
      proxy.cut('refuse');
      expect(await old.s.finishLoad(U1, 'b', fence!, true, Date.now())).toBe(false);
      expect(old.s.mode()).toBe('local');
      // The `redis` record changes to other state; the runtime has no request left, so its store
      // leaves at once (its probe stops), and the old Redis answers again after.
      const leaving = old.s.leave(10_000);
      proxy.restore();
      await leaving;
      // Peers not yet moved still decide on the old state: `b` must not read loading there until
      // the lock's TTL (a minute here). The end sent late is old news (dst seed 1534246): it ends
      // the lock and forgets the adapter there; a peer's next poll or load finds it.
      expect(await stateIn(P, 'b')).toBeUndefined();
      expect(await redis.command(['HEXISTS', `${P}lock`, String(fence)])).toBe(0);
    } finally {
      await old.s.close();
      await proxy.close();
    }
  }, 30_000);
});

describe('a registration the shared state keeps emptying under', () => {
  it('gives up after a few passes as a failed write does, and the probe registers once the state holds', async () => {
    const P = 'fl2:';
    await redis.command(['FLUSHALL']);
    const a = node(P, 'A', { probeMs: 500, timeout: 2000 });
    try {
      for (const u of [U1, U2]) await a.s.upsertReplica(spec(u));
      await a.s.applySnapshot(U1, poll(Date.now()));
      // Every write of U1 is followed by a FLUSHALL: each pass of the registration sees the epoch
      // move between its two writes. 40 at most, so that the code before the bound ends too.
      const upsert = a.shared.upsertReplica.bind(a.shared);
      let emptying = true;
      let u1Writes = 0;
      a.shared.upsertReplica = async (s: ReplicaSpec) => {
        await upsert(s);
        if (s.url !== U1) return;
        u1Writes++;
        if (emptying && u1Writes < 40) await redis.command(['FLUSHALL']);
      };
      await redis.command(['FLUSHALL']);
      // The views find the replicas gone and register them again (the reclaim).
      const views = await a.s.views([U1, U2]);
      const passes = u1Writes;
      emptying = false;
      expect(views).toHaveLength(2);
      expect(passes).toBeLessThanOrEqual(3);
      // Failed as a write fails: the node decides alone until its probe registers again.
      expect(a.s.mode()).toBe('local');
      await waitFor(() => a.s.mode() === 'redis', 10_000, 'the probe registered again');
      expect(Number(await redis.command(['HLEN', `${P}spec`]))).toBe(2);
    } finally {
      await a.s.close();
    }
  }, 30_000);
});
