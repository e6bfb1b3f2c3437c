/**
 * Review of 0f89d86 (HeldLeases.retakeUnanswered), over a real redis-server: a lease still held as
 * its retake gets no answer is marked `uncertain`, and its release, once its request ends, waits in
 * `pendingReleases`. Those travel with the store's records to its successor (`adopt`), which sends
 * them over its own link: ahead of the retake still on the old link.
 */
import { AdapterManager } from '../../src/adapters/manager';
import type { LoadOutcome, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { Lease } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { TcpProxy } from '../../harness/net/tcp-proxy';
import { adapterPolicy } from '../helpers/adapter-policy';
import { useRedisStores } from '../helpers/redis-stores';
import { vllmSpec } from './helpers';

const U1 = 'http://10.0.0.1:8000';

const stores = useRedisStores();

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

// As test/core/hand-back-close.test.ts's "a reclaim whose retake times out", but P's request ends
// only after S's retake timed out: the lease was still held then, so retakeUnanswered marked it
// `uncertain` instead of releasing it behind the retake. Its release is then P's pending one, which
// N adopts and replays over N's own link, 1.5 s ahead of the retake still on S's slow link.
describe('a lease still held as its retake times out, ended before its store is adopted', () => {
  it('leaves no lease of the node in the shared state once the retake lands', async () => {
    const { redis } = stores;
    const prefix = 'r61-uncertain:';
    await redis.command(['FLUSHALL']);
    const cutLink = await TcpProxy.start(redis.port);
    const slowLink = await TcpProxy.start(redis.port);
    const cfg = redis.config(prefix, { node_ttl_ms: 60_000, timeout: 300 });
    const options = { probeMs: 60_000, logEveryMs: 60_000 };
    const p = new FailoverFleetStore(
      new RedisFleetStore({ ...cfg, port: cutLink.port }, 'X'),
      silentLogger,
      options,
    );
    const sShared = new RedisFleetStore({ ...cfg, port: slowLink.port }, 'X');
    const s = new FailoverFleetStore(sShared, silentLogger, options);
    const n = new FailoverFleetStore(new RedisFleetStore(cfg, 'X'), silentLogger, options);
    try {
      for (const store of [p, s, n]) await store.upsertReplica(vllmSpec(U1));
      await s.succeed(p);
      await n.succeed(s);
      cutLink.cut('refuse');
      const lease: Lease = { id: 'X-1', url: U1, adapter: null, at: Date.now() };
      await p.acquire(lease);
      let unanswered = () => {};
      const timedOut = new Promise<void>((r) => (unanswered = r));
      const retake = sShared.retake.bind(sShared);
      sShared.retake = (leases: readonly Lease[]) => {
        if (!leases.some((l) => l.id === lease.id)) return retake(leases);
        slowLink.delay(1500);
        const sent = retake(leases);
        sent.catch(() => unanswered());
        return sent;
      };
      await redis.command(['FLUSHALL']);
      sShared.onStateLost?.();
      await timedOut;
      await s.handBackEnded(); // the reclaim has ended (failed)
      // The request ends now: released in P's local store, its shared release pending.
      await p.release(lease.id, Date.now());
      await p.ownCallsEnded();
      await n.adopt(p);
      await p.close();
      // N replayed it over its own link: released, until the retake lands.
      expect(await redis.command(['HKEYS', `${prefix}lease`])).toEqual([]);
      await s.ownCallsEnded();
      await n.adopt(s);
      await s.close();
      await pause(2500);
      expect(await redis.command(['HKEYS', `${prefix}lease`])).toEqual([]);
    } finally {
      slowLink.restore();
      cutLink.restore();
      for (const store of [p, s, n]) await store.close();
      await slowLink.close();
      await cutLink.close();
    }
  }, 30_000);
});

// The same with P answering all along: its lease is shared, so retakeUnanswered marks nothing, and
// P's request's release goes over P's own link at once, 1.5 s ahead of S's retake of it.
describe("a shared lease whose retake over a successor's link times out", () => {
  it('leaves no lease of the node in the shared state once the retake lands', async () => {
    const { redis } = stores;
    const prefix = 'r61-shared:';
    await redis.command(['FLUSHALL']);
    const slowLink = await TcpProxy.start(redis.port);
    const cfg = redis.config(prefix, { node_ttl_ms: 60_000, timeout: 300 });
    const options = { probeMs: 60_000, logEveryMs: 60_000 };
    const p = new FailoverFleetStore(new RedisFleetStore(cfg, 'X'), silentLogger, options);
    const sShared = new RedisFleetStore({ ...cfg, port: slowLink.port }, 'X');
    const s = new FailoverFleetStore(sShared, silentLogger, options);
    const n = new FailoverFleetStore(new RedisFleetStore(cfg, 'X'), silentLogger, options);
    try {
      for (const store of [p, s, n]) await store.upsertReplica(vllmSpec(U1));
      await s.succeed(p);
      await n.succeed(s);
      const lease: Lease = { id: 'X-1', url: U1, adapter: null, at: Date.now() };
      await p.acquire(lease);
      expect(p.mode?.()).not.toBe('local');
      let unanswered = () => {};
      const timedOut = new Promise<void>((r) => (unanswered = r));
      const retake = sShared.retake.bind(sShared);
      sShared.retake = (leases: readonly Lease[]) => {
        if (!leases.some((l) => l.id === lease.id)) return retake(leases);
        slowLink.delay(1500);
        const sent = retake(leases);
        sent.catch(() => unanswered());
        return sent;
      };
      await redis.command(['FLUSHALL']);
      sShared.onStateLost?.();
      await timedOut;
      await s.handBackEnded();
      await p.release(lease.id, Date.now());
      await p.ownCallsEnded();
      await n.adopt(p);
      await p.close();
      await s.ownCallsEnded();
      await n.adopt(s);
      await s.close();
      await pause(2500);
      expect(await redis.command(['HKEYS', `${prefix}lease`])).toEqual([]);
    } finally {
      slowLink.restore();
      for (const store of [p, s, n]) await store.close();
      await slowLink.close();
    }
  }, 30_000);
});

// Suspicion on 39a1f16 (keepDuring): a joiner that gave up on a load still under way (its own
// bound passed) is asked no more by that load's timer: a fresh lease taken then would be for a
// request already answered, never given back.
describe('a request that gave up on a load it joined', () => {
  it("is asked no more by that load's timer", async () => {
    const clock = new VirtualClock();
    const store = new MemoryFleetStore();
    await store.upsertReplica({ url: U1, backend: 'vllm', priority: 0 });
    await store.applySnapshot(U1, { at: 0, ok: true, registry: [] });
    const api = {
      scrape: () => Promise.reject(new Error('not used')),
      loadAdapter: async (): Promise<LoadOutcome> => {
        await sleep(clock, 5000);
        return 'loaded';
      },
      unloadAdapter: async (): Promise<UnloadOutcome> => 'unloaded',
    } as ReplicaApi;
    const mgr = new AdapterManager(store, api, clock, silentLogger);
    const a = { name: 'a', path: '/adapters/a' };
    const load = mgr.ensure(U1, a, adapterPolicy({ loadTimeoutMs: 10_000 }));
    await clock.run(clock.now() + 100);
    const asked: number[] = [];
    const joined = mgr.ensure(
      U1,
      a,
      adapterPolicy({
        queueTimeoutMs: 100,
        loadTimeoutMs: 1000,
        keepLease: () => void asked.push(clock.now()),
      }),
    );
    let gaveUpAt = Infinity;
    const outcome = joined.catch((err: Error) => {
      gaveUpAt = clock.now();
      return err.message;
    });
    await clock.run();
    expect(await load).toBe('loaded');
    expect(await outcome).toMatch(/still under way|wait/);
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.filter((t) => t >= gaveUpAt)).toEqual([]);
  });
});
