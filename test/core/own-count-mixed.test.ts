/**
 * A fleet of mixed versions (a rolling upgrade): a node of the version before the per-node lease
 * counts (`P own:<url>`, src/fleet/redis/scripts/prelude.ts) takes, releases and reclaims leases
 * without them. Its expiry sweep reclaiming a newer node's lease left that node's count one above
 * its leases for good: the node then read another node's request as its own and let one more
 * request of a class bounded by `max_in_flight` join the replica, for as long as it ran, and the
 * field stayed after every lease there had ended. The newer nodes' sweep (`expire`, every poll
 * round) rebuilds a replica's per-node counts from its leases where they no longer add up to its
 * in-flight count. Real redis-server; the older node's sweep is this version's with the per-node
 * decrement taken out (git 069196a2^1, src/fleet/redis/scripts/prelude.ts `droplease`).
 */
import type { RedisConfig } from '../../src/config/redis-schema';
import { scriptSource } from '../../src/fleet/redis/scripts';
import { LeaseHandle } from '../../src/lease';
import { inFlightHere } from '../../src/router/in-flight-here';
import { RedisServer } from '../../harness/redis/server';
import { sharedNode } from '../helpers/shared-node';

const U = 'http://10.7.0.1:8000';
const SPEC = { url: U, backend: 'vllm' as const, priority: 0 };
const MAX_AGE_MS = 60_000;
/** What the older version's `droplease` lacks: the per-node count's decrement. */
const OWN_DECREMENT = `  if redis.call('HINCRBY', ownkey(lease.url), nodeof(id), -1) <= 0 then
    redis.call('HDEL', ownkey(lease.url), nodeof(id))
  end
`;

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.close();
});

const node = (config: RedisConfig) => sharedNode(config, SPEC);

/** An older node's expiry sweep on `prefix`, as its script ran it (no per-node counts). */
async function olderNodesSweep(prefix: string): Promise<string[]> {
  const current = scriptSource('expire');
  // The decrement as written now: the older script is this one without it.
  expect(current).toContain(OWN_DECREMENT);
  const older = current.replace(OWN_DECREMENT, '');
  const args = [prefix, Date.now(), MAX_AGE_MS, 60_000, 4 * MAX_AGE_MS];
  return (await redis.command(['EVAL', older, 0, ...args])) as string[];
}

describe('a fleet of mixed versions: per-node lease counts (real redis-server)', () => {
  it("an older node's sweep reclaiming a newer node's lease: that node's count is rebuilt at its next expiry round", async () => {
    const prefix = 'own-mixed:';
    const config = redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 });
    const a = await node(config);
    const b = await node(config);
    try {
      // Node a's lease, stamped long ago, reclaimed by an older node's sweep.
      const hung = await LeaseHandle.take(a, U, null);
      await redis.command(['ZADD', `${prefix}lease-at`, 'XX', '1', hung.lease.id]);
      expect((await olderNodesSweep(prefix)).length).toBe(1);
      await hung.lease.release(504);
      // Node b's request in flight there; node a's poll round runs its own sweep.
      const other = await LeaseHandle.take(b, U, null);
      await a.store.expireLeases(Date.now(), MAX_AGE_MS);

      const view = (await a.store.views([U]))[0]!;
      // A decision of node a counts node b's request: node a holds nothing there.
      expect(inFlightHere(a, U, view.inFlight, undefined, LeaseHandle.viewsMark(), view.ownInFlight)).toBe(1);
      expect({ inFlight: view.inFlight, ownInFlight: view.ownInFlight }).toEqual({
        inFlight: 1,
        ownInFlight: 0,
      });

      // Every lease ended: no count left behind.
      await other.lease.release(200);
      await b.store.expireLeases(Date.now(), MAX_AGE_MS);
      expect(await redis.command(['HGETALL', `${prefix}own:${U}`])).toEqual([]);
    } finally {
      for (const rt of [a, b]) await rt.store.close?.();
    }
  });
});
