/**
 * A runtime retired for a changed `redis` record on the same state (one node id: its successor
 * adopted its configurations) may still end a poll round under way, and each round ends with the
 * departures' retain (src/runtime-departures.ts). Its list is stale: it lacks what the successor
 * registered since. Told to Redis, it dropped the node's claim on the successor's new replica,
 * whose own first round takes its list as told (no retain for RETAIN_EVERY_MS, 30 s). With the
 * grace under 30 s (`lease_max_age_ms` and `node_ttl_ms` below it), a node that has not taken the
 * change yet (a rolling change) forgot that replica: every view then left it out, and nothing
 * registered it again while the successor's configuration routed there. Over a real redis-server.
 */
import { parseRouterConfig } from '../../src/config/parse';
import type { RedisConfig } from '../../src/config/redis-schema';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { IdleReplicaApi } from '../helpers/idle-replicas';

const PREFIX = 'retired:';
const OLD = 'http://10.3.0.1:8000';
const NEW = 'http://10.3.1.1:8000';

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.close();
});

it("a retired runtime's last round leaves the node's claim on its successor's new replica", async () => {
  // Same state, another record (a changed timeout): a successor with the same node id.
  const record = (timeout: number): RedisConfig => redis.config(PREFIX, { node_ttl_ms: 500, timeout });
  const config = (url: string, timeout: number) =>
    parseRouterConfig({
      base_model: 'base',
      replicas: [{ url }],
      lease_max_age_ms: 1000,
      redis: record(timeout),
    });
  const runtime = (timeout: number, retainEveryMs?: number) =>
    new FleetRuntime({
      api: new IdleReplicaApi(() => Date.now()),
      log: silentLogger,
      seed: 1,
      redis: record(timeout),
      leasePrefix: 'node-n',
      poller: { intervalMs: 100, jitter: 0, timeoutMs: 1000 },
      retainEveryMs,
    });
  const specs = async () => (await redis.command(['HKEYS', `${PREFIX}spec`])) as string[];
  // Its forget check due at every round: the round that ends after the retirement is one where it was.
  const old = runtime(2000, 0);
  const next = runtime(2500);
  try {
    const first = new RouterService(config(OLD, 2000), old, 'plugin-1');
    await waitFor(() => old.poller.lastLoad.has(OLD), 10_000, 'the old replica polled');
    // A request of the old configuration still under way: the retired runtime drains it, its store open.
    const held = await first.route({
      path: '/v1/chat/completions',
      body: JSON.stringify({ model: 'base', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(held.kind).toBe('proxy');
    void old.retire(next);
    new RouterService(config(NEW, 2500), next, 'plugin-1');
    await waitFor(async () => (await specs()).includes(NEW), 10_000, 'the new replica registered');
    // The retired runtime's round under way ends now.
    await old.poller.afterRound?.();
    // Past the grace (max(node_ttl_ms, lease_max_age_ms): 1 s), a node still on the old
    // configuration routes to neither and runs its forget check.
    await new Promise((r) => setTimeout(r, 1500));
    const other = new RedisFleetStore(record(2000), 'node-m');
    try {
      const forgotten = await other.retainReplicas([], 1000);
      expect({ forgotten, listed: (await specs()).includes(NEW) }).toEqual({ forgotten: [], listed: true });
    } finally {
      await other.close();
    }
  } finally {
    old.stop();
    next.stop();
  }
});
