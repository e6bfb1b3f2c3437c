/**
 * A node that finds the shared state emptied takes its open leases again in a bounded number of
 * round trips, not one per lease: each call of the walk is a window in which its link may turn slow
 * or break, and the leases not taken yet count nowhere until its probe recovers (the simulation's
 * seed 72667: two of four taken again when its link turned slow). Counted at the server (`INFO
 * commandstats`: every store operation is one script call) on a real redis-server.
 */
import { randomBytes } from 'node:crypto';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { RETAKE_BATCH } from '../../src/fleet/store';
import { silentLogger } from '../../src/log';
import { RedisServer } from '../../harness/redis/server';
import { snapshotWithA } from './helpers';

const U = 'http://10.0.0.1:8000';

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

/** Script calls the server has run so far (EVALSHA, and EVAL where a script was not cached). */
async function scriptCalls(): Promise<number> {
  const info = (await redis.command(['INFO', 'commandstats'])) as string;
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) n += Number(m[1]);
  return n;
}

/**
 * A node holding `leases` open leases on `a`, then a FLUSHALL it finds from its next views call:
 * the script calls its reclaim made (that views call's included), and its leases counted after.
 */
async function reclaimWith(leases: number): Promise<{ calls: number; inFlight: number; busy: number }> {
  // No heartbeat during the count (every node_ttl_ms / 4): the reclaim's calls alone.
  const prefix = `rt${randomBytes(4).toString('hex')}:`;
  const shared = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: 600_000, timeout: 5000 }), 'n0');
  const s = new FailoverFleetStore(shared, silentLogger);
  try {
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    await s.applySnapshot(U, snapshotWithA(1));
    for (let i = 0; i < leases; i++) await s.acquire({ id: `L${i}`, url: U, adapter: 'a', at: 2 });
    await redis.command(['FLUSHALL']);
    const before = await scriptCalls();
    expect((await s.views([U])).map((v) => v.url)).toEqual([U]);
    const calls = (await scriptCalls()) - before;
    expect(s.mode()).toBe('redis');
    // Counted on the replica and on its adapter (what an unload of `a` is refused by).
    const busy = Number((await redis.command(['HGET', `${prefix}busy:${U}`, 'a'])) ?? 0);
    return { calls, inFlight: (await shared.views([U]))[0]!.inFlight, busy };
  } finally {
    await s.close();
  }
}

it('takes its open leases again after an emptied state in one call per batch, not one per lease', async () => {
  const one = await reclaimWith(1);
  const many = await reclaimWith(RETAKE_BATCH + 44);
  expect([one.inFlight, one.busy]).toEqual([1, 1]);
  expect([many.inFlight, many.busy]).toEqual([RETAKE_BATCH + 44, RETAKE_BATCH + 44]);
  // RETAKE_BATCH + 44 leases take two calls, one lease one: one call more, whatever else the reclaim makes.
  expect(many.calls - one.calls).toBe(1);
}, 60_000);
