/**
 * A replaced runtime's store closing while its probe's recovery hands leases back (the
 * simulation's seed 19811), over a real redis-server. The retake of a lease the node took while it
 * decided alone is on the wire when the lease's request ends; its release after the reply is the
 * only one the shared state gets.
 */
import net from 'node:net';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { Lease } from '../../src/fleet/types';
import { LeaseHandle } from '../../src/lease';
import { silentLogger } from '../../src/log';
import { FleetRuntime } from '../../src/runtime';
import { TcpProxy } from '../../harness/net/tcp-proxy';
import { waitFor } from '../../harness/wait';
import { useRedisStores } from '../helpers/redis-stores';
import { snapshotWithA, vllmSpec } from './helpers';

const U1 = 'http://10.0.0.1:8000';

const stores = useRedisStores();

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a lease re-taken by a replaced runtime's recovery as its request ends", () => {
  // Node X decides alone (Redis cut off) and takes a lease there; a `timeout_ms` change replaces
  // its runtime on the same state. Redis answers again over a slow link: the old store's probe
  // re-takes the lease, and the request ends while that retake is on the wire (released locally:
  // the lease was local). The old runtime has drained: its successor adopts its records and
  // prunes over its own link, ahead of the retake, and the old store closes. Before the fix the
  // retake then ran in Redis, its reply came to a closed link, and the release the recovery sends
  // for a lease ended meanwhile never went: the lease stayed open until lease_max_age_ms
  // (10 minutes by default), its adapter held against unloads by a request long gone.
  it('is released in the shared state before the old store closes', async () => {
    const { redis } = stores;
    const P = 'hb-close:';
    await redis.command(['FLUSHALL']);
    const proxy = await TcpProxy.start(redis.port);
    // One state (the same host and port in both records); only the old store's link is slow.
    let oldShared: RedisFleetStore | undefined;
    const old = new FleetRuntime({
      redis: redis.config(P, { node_ttl_ms: 60_000, timeout: 1000 }),
      sharedStore: (r, node) => (oldShared = new RedisFleetStore({ ...r, port: proxy.port }, node)),
      leasePrefix: 'X',
      log: silentLogger,
    });
    const next = new FleetRuntime({
      redis: redis.config(P, { node_ttl_ms: 60_000, timeout: 1500 }),
      leasePrefix: 'X',
      leaseSeq: old.leaseSeq,
      log: silentLogger,
    });
    try {
      await old.store.upsertReplica(vllmSpec(U1));
      await old.store.applySnapshot(U1, snapshotWithA(Date.now(), 1));
      proxy.cut('refuse');
      const { lease } = await LeaseHandle.take(old, U1, 'a');
      expect(old.store.mode?.()).toBe('local');
      let retaking = () => {};
      const retakeSent = new Promise<void>((r) => (retaking = r));
      const retake = oldShared!.retake.bind(oldShared);
      oldShared!.retake = (leases: readonly Lease[]) => {
        if (leases.some((l) => l.id === lease.id)) retaking();
        return retake(leases);
      };
      proxy.restore();
      proxy.delay(100);
      await retakeSent; // the probe's recovery (every second)
      await lease.release();
      await old.retire(next);
      // Whatever was on the wire has landed by now (100 ms each way).
      await pause(400);
      expect(await redis.command(['HKEYS', `${P}lease`])).toEqual([]);
    } finally {
      proxy.restore();
      old.stop();
      next.stop();
      await old.store.close?.();
      await next.store.close?.();
      await proxy.close();
    }
  }, 30_000);
});

describe('a store handing over', () => {
  // Its wait for the hand-back under way (above) is the last: told the state was lost after it (a
  // heartbeat's word), it began a reclaim, whose retakes the close then cut off as in seed 19811.
  // What is left is its successor's, which takes its records and its predecessors' leases again.
  it('begins no reclaim once it waited for the one under way', async () => {
    const { redis } = stores;
    const P = 'hb-over:';
    await redis.command(['FLUSHALL']);
    const shared = new RedisFleetStore(redis.config(P, { node_ttl_ms: 60_000 }), 'X');
    const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 });
    try {
      await s.upsertReplica(vllmSpec(U1));
      await s.handBackEnded();
      await redis.command(['FLUSHALL']);
      shared.onStateLost?.();
      await pause(500);
      expect(Number(await redis.command(['HLEN', `${P}spec`]))).toBe(0);
    } finally {
      await s.close();
    }
  });
});

// The test above relies on the proxy delivering a command sent just before its client closed, as
// TCP does (before, a delayed chunk was dropped with its link).
describe('the test proxy', () => {
  it('delivers what a client sent before it closed on a delayed link', async () => {
    const { redis } = stores;
    const proxy = await TcpProxy.start(redis.port);
    const key = 'proxy-close:k';
    await redis.command(['DEL', key]);
    try {
      proxy.delay(200);
      const socket = net.connect(proxy.port, '127.0.0.1');
      await new Promise((r) => socket.once('connect', r));
      socket.end(`SET ${key} 1\r\n`);
      await waitFor(async () => (await redis.command(['GET', key])) === '1', 5000, 'the SET landed');
    } finally {
      await proxy.close();
    }
  });
});
