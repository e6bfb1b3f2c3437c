/**
 * A node whose own registration begins the shared state anew after it was emptied (a router
 * configuration registered after a FLUSHALL, before any node re-registered): the epoch it reads
 * from then on is the one that registration noted, so its heartbeat never finds the state
 * changed. Over a real redis-server.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { Lease, ReplicaSnapshot } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';

const U = 'http://10.0.0.1:8000';
const SPEC = { url: U, backend: 'vllm' as const, priority: 0 };
const TTL = 60_000;

let redis: RedisServer;
let admin: Redis;
const stores: FailoverFleetStore[] = [];

beforeAll(async () => {
  redis = await RedisServer.start();
  admin = new Redis({ host: '127.0.0.1', port: redis.port, lazyConnect: true });
  await admin.connect();
});
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  admin.disconnect();
  await redis.close();
});

/** A poll of U: adapter `a` in its registry, no request reported running. */
const poll = (): ReplicaSnapshot => ({
  at: Date.now(),
  ok: true,
  load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
  registry: [{ name: 'a', path: '/adapters/a' }],
  managed: () => true,
});

async function node(p: string, id: string): Promise<{ s: FailoverFleetStore; shared: RedisFleetStore }> {
  const shared = new RedisFleetStore(redis.config(p, { node_ttl_ms: 400 }), id);
  const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 });
  stores.push(s);
  await s.upsertReplica(SPEC);
  return { s, shared };
}

const lease = (id: string): Lease => ({ id, url: U, adapter: 'a', at: Date.now() });

it('an idle node whose own registration is the first after a FLUSHALL takes its leases again: no peer unloads under them', async () => {
  const p = `ore${randomBytes(4).toString('hex')}:`;
  const a = await node(p, 'nA');
  const b = await node(p, 'nB');
  await a.s.applySnapshot(U, poll());
  // A's request is on its way to the replica; A has no other decision to make.
  expect(await a.s.acquire(lease('A1'))).toBe('loaded');
  await admin.flushall();
  // A router configuration registered on A now (a Kong configuration push): its replica's
  // registration is the first after the FLUSHALL and begins the new state.
  await a.s.upsertReplica(SPEC);
  // B's heartbeat finds the new epoch and B takes its (no) leases back; its poll adopts `a`.
  await b.s.views([U], { name: 'a' });
  await b.s.applySnapshot(U, poll());
  await waitFor(async () => (await b.shared.inFlightTotal()) === 1, 3000, "A's lease counted again");
  // Past the grace (node_ttl_ms) a peer's unload of `a` is refused: A's request still runs.
  await new Promise((r) => setTimeout(r, 500));
  expect(await b.s.beginUnload(U, 'a', Date.now(), TTL)).toBeNull();
});
