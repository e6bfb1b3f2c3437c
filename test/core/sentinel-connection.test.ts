/**
 * The fleet store's Redis connections through Sentinel (src/fleet/redis/connection.ts), against
 * a real primary, replica and three redis-sentinel processes (harness/redis/sentinel.ts), in the
 * moment a failover is most likely to meet a client: while it is still asking a sentinel where
 * the primary is. Sentinel 0, the one a client asks first, is stopped (SIGSTOP: it accepts
 * connections and answers nothing, as on a starved host) before the primary goes, and stays
 * so: the reconnect waits on it for the whole timeout while the two others fail over.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { RedisConfig } from '../../src/config/redis-schema';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { silentLogger } from '../../src/log';
import { MASTER_NAME, redisCall, SentinelSet } from '../../harness/redis/sentinel';
import { waitFor } from '../../harness/wait';

const U = 'http://10.0.0.1:8000';
const SPEC = { url: U, backend: 'vllm' as const, priority: 0 };

let set: SentinelSet | undefined;
const stores: FailoverFleetStore[] = [];
const clients: Redis[] = [];

afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  for (const c of clients.splice(0)) c.disconnect();
  await set?.close();
  set = undefined;
});

/** Clients subscribed on sentinel `port` (ioredis's failover detector holds one per connection). */
async function subscribers(port: number): Promise<number> {
  const list = String(await redisCall(port, 'CLIENT', 'LIST'));
  return list.split('\n').filter((l) => / sub=[1-9]/.test(l)).length;
}

it('shares state in the new primary after a failover announced while it was asking a sentinel for the primary', async () => {
  set = await SentinelSet.start();
  const s = set;
  const prefix = `sc${randomBytes(4).toString('hex')}:`;
  // Longer than the failover takes, so the reconnects are still waiting on the stopped
  // sentinel when +switch-master arrives.
  const timeout = 8000;
  const config: RedisConfig = {
    sentinel_master: MASTER_NAME,
    sentinel_role: 'master',
    sentinel_nodes: s.sentinelPorts.map((port) => ({ host: '127.0.0.1', port })),
    port: 6379,
    database: 0,
    ssl: false,
    ssl_verify: false,
    prefix,
    timeout,
    node_ttl_ms: 10_000,
  };
  const shared = new RedisFleetStore(config, 'n1');
  const store = new FailoverFleetStore(shared, silentLogger, { probeMs: 100, logEveryMs: 60_000 });
  stores.push(store);
  let woken = 0;
  store.onRemoteChange = () => woken++;
  await store.upsertReplica(SPEC);
  expect(store.mode()).toBe('redis');
  // Both connections (commands, and the subscriber that wakes waiters for room) subscribed to
  // +switch-master on the two sentinels that will fail the primary over.
  for (const i of [1, 2])
    await waitFor(
      async () => (await subscribers(s.sentinelPorts[i]!)) >= 2,
      10_000,
      `detectors on sentinel ${i}`,
    );

  s.pause(0);
  await redisCall(s.primary.port, 'SHUTDOWN', 'NOSAVE').catch(() => undefined);
  // Failed over at once by sentinel 1 (no vote to split between the two left running), well
  // within the timeout the reconnects now spend on sentinel 0.
  await redisCall(s.sentinelPorts[1]!, 'SENTINEL', 'FAILOVER', MASTER_NAME);
  await waitFor(
    async () => (await s.primaryPort(1).catch(() => s.primary.port)) === s.replica.port,
    30_000,
    'sentinel 1 naming the replica the primary',
  );

  // Back to shared decisions in the new primary: a call there degrades the node first if the
  // old connection is still seen, then the probe recovers it.
  await waitFor(
    async () => {
      await store.views([U]);
      return store.mode() === 'redis';
    },
    30_000,
    'the node sharing state in the new primary',
  );
  expect(shared.client.status).toBe('ready');
  expect(shared.client.stream?.remotePort).toBe(s.replica.port);
  // The subscriber follows too: another node's change published there wakes this one.
  const other = new Redis({ host: '127.0.0.1', port: s.replica.port });
  clients.push(other);
  const before = woken;
  await waitFor(
    async () => (await other.publish(`${prefix}changed`, '1')) >= 1 && woken > before,
    30_000,
    'a change published in the new primary reaching the subscriber',
  );
}, 120_000);
