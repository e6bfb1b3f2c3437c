import { randomBytes } from 'node:crypto';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { collectingLogger } from '../helpers/log';
import { snapshotWithA } from './helpers';

const U = 'http://10.0.0.1:8000';

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

/** A store (node `node`, probing every `probeMs`, `node_ttl_ms` as long) holding `a` loaded on U. */
function storeWithA(probeMs: number, node: string): FailoverFleetStore {
  const shared = new RedisFleetStore(
    redis.config(`${node}${randomBytes(4).toString('hex')}:`, { node_ttl_ms: probeMs }),
    node,
  );
  return new FailoverFleetStore(shared, collectingLogger(), { probeMs, logEveryMs: 60_000 });
}

/** Registers U with `a` loaded, then Redis restarts empty: `s` decides alone until its probe finds it back. */
async function backEmpty(s: FailoverFleetStore): Promise<void> {
  await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await s.applySnapshot(U, snapshotWithA(1));
  await redis.stop();
  await s.views([U]); // fails within its timeout: this node decides alone
  expect(s.mode()).toBe('local');
  await redis.start();
  await waitFor(() => s.mode() === 'redis', 10_000, 'recovery');
}

describe('FailoverFleetStore over a real redis-server', () => {
  it('decides locally while Redis is gone (no unloads), then hands its leases back and shares again', async () => {
    const log = collectingLogger();
    const shared = new RedisFleetStore(redis.config(`f${randomBytes(4).toString('hex')}:`), 'n1');
    const s = new FailoverFleetStore(shared, log, { probeMs: 50, logEveryMs: 60_000 });
    try {
      await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
      const snapshot = snapshotWithA;
      await s.applySnapshot(U, snapshot(1));
      expect(s.mode()).toBe('redis');
      expect(await s.acquire({ id: 'L1', url: U, adapter: 'a', at: 2 })).toBe('loaded');

      await redis.stop();
      // The first call after Redis went away fails within its timeout and degrades the node.
      expect(await s.acquire({ id: 'L2', url: U, adapter: 'a', at: 3 })).toBe('loaded');
      expect(s.mode()).toBe('local');
      // Alone, it cannot see the other nodes' requests: nothing is unloaded.
      expect(await s.beginUnload(U, 'a', 4, 60_000)).toBeNull();
      // It still loads into a free slot, on its local state (kept warm by the polls).
      const f = await s.beginLoad(U, 'b', 4, 4, 60_000);
      expect(f).not.toBeNull();
      expect(await s.finishLoad(U, 'b', f!, true, 5)).toBe(true);
      await s.applySnapshot(U, snapshot(6));
      expect((await s.views([U], { name: 'a' }))[0]).toMatchObject({ health: 'up', inFlight: 1 });
      // A shared lease released while Redis is away is replayed later, not lost.
      expect(await s.release('L1', 7, 200)).toMatchObject({ id: 'L1', adapter: 'a' });
      expect(log.lines.filter((l) => l.startsWith('error:'))).toHaveLength(1);

      await redis.start(); // empty: nothing was persisted
      await waitFor(() => s.mode() === 'redis', 10_000, 'recovery');
      expect(log.lines.some((l) => /shared fleet state is back/.test(l))).toBe(true);
      // The replica is registered again and the open local lease now counts in Redis.
      expect(await shared.replicaSpecs()).toEqual([{ url: U, backend: 'vllm', priority: 0 }]);
      expect(await shared.inFlightTotal()).toBe(1);
      expect((await shared.views([U]))[0]!.inFlight).toBe(1);
      expect(await s.release('L2', 8, 200)).toMatchObject({ id: 'L2' });
      expect(await shared.inFlightTotal()).toBe(0);
      expect((await shared.views([U]))[0]!.inFlight).toBe(0);
      expect(await s.inFlightTotal()).toBe(0);
    } finally {
      await s.close();
    }
  });
  it('treats a Redis that hangs like one that is gone: each call bounded by the timeout, then local until it answers', async () => {
    const log = collectingLogger();
    const shared = new RedisFleetStore(redis.config(`h${randomBytes(4).toString('hex')}:`), 'n2');
    const s = new FailoverFleetStore(shared, log, { probeMs: 50, logEveryMs: 60_000 });
    try {
      await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
      expect(await s.acquire({ id: 'H1', url: U, adapter: null, at: 1 })).toBeUndefined();
      redis.pause();
      try {
        // The call does not wait for Redis to answer: it times out and this node decides alone.
        expect(await s.views([U])).toHaveLength(1);
        expect(s.mode()).toBe('local');
        expect(log.lines.filter((l) => /unavailable/.test(l))).toHaveLength(1);
        expect((await s.views([U]))[0]!.url).toBe(U);
      } finally {
        redis.resume();
      }
      await waitFor(() => s.mode() === 'redis', 10_000, 'recovery');
      expect(await s.release('H1', 2, 200)).toMatchObject({ id: 'H1' });
      expect(await shared.inFlightTotal()).toBe(0);
    } finally {
      await s.close();
    }
  });
  it('registers its replicas again when Redis loses them without a disconnect (FLUSHALL)', async () => {
    const shared = new RedisFleetStore(redis.config(`r${randomBytes(4).toString('hex')}:`), 'n3');
    const s = new FailoverFleetStore(shared, collectingLogger());
    try {
      await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
      await shared.client.flushall();
      expect((await s.views([U])).map((v) => v.url)).toEqual([U]);
      expect(s.mode()).toBe('redis');
      expect(await shared.replicaSpecs()).toEqual([{ url: U, backend: 'vllm', priority: 0 }]);
    } finally {
      await s.close();
    }
  });
  it('unloads nothing for two probe intervals after Redis is back: peers hit by the same outage may still decide alone', async () => {
    const probeMs = 1500;
    // Redis comes back empty: for node_ttl_ms no node unloads either (every node's heartbeat
    // re-takes its leases meanwhile); shorter than the hold-off here, so the hold-off is what shows.
    const s = storeWithA(probeMs, 'n4');
    try {
      await backEmpty(s);
      await s.applySnapshot(U, snapshotWithA(2)); // Redis came back empty: a poll tells it again
      // Back, but a peer's own probe finds Redis up to a probe interval later; until then it
      // routes to what its polls saw loaded and cannot see this node's unload.
      expect(await s.beginUnload(U, 'a', 3, 60_000)).toBeNull();
      await new Promise((r) => setTimeout(r, 2 * probeMs + 50));
      expect(await s.beginUnload(U, 'a', 4, 60_000)).not.toBeNull();
    } finally {
      await s.close();
    }
  });

  // The simulation's seed 264535: a node deciding alone while Redis was emptied takes its state back
  // at its probe and holds off its unloads from then. Its registration there read the new epoch and
  // left "the state was lost" noted; the next views call (a poll, a request) took the state back
  // again and held unloads off anew: a request alone on an idle fleet waited for room 880 ms longer.
  it('holds off its unloads once for an outage that emptied Redis, not again at its next views', async () => {
    const probeMs = 1500;
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
    const s = storeWithA(probeMs, 'n5');
    try {
      await backEmpty(s); // the recovery registers the replica anew
      const back = Date.now();
      await s.applySnapshot(U, snapshotWithA(2));
      await sleep(probeMs / 2);
      expect((await s.views([U])).map((v) => v.url)).toEqual([U]);
      await sleep(back + 2 * probeMs + 100 - Date.now());
      expect(await s.beginUnload(U, 'a', 4, 60_000)).not.toBeNull();
    } finally {
      await s.close();
    }
  });
});
