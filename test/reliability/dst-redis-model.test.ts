/**
 * The simulation's Redis model (dst/redis-model.ts) ends load and unload locks as the `expire`
 * script does (src/fleet/redis/scripts/leases.ts): those of nodes found silent in that call (in
 * `nodes`, last heartbeat older than nodeTtl) and those past their expiry, not those of a node
 * simply absent from `nodes`, as every node is right after a FLUSHALL until its next heartbeat.
 */
import { RedisModel } from '../../dst/redis-model';
import { Scheduler } from '../../dst/scheduler';
import type { RedisConfig } from '../../src/config/redis-schema';
import { seededRandom } from '../../src/random';

const URL = 'http://replica-1:8000';
const NODE_TTL = 2000;

function model(): RedisModel {
  const random = seededRandom(1);
  return new RedisModel(new Scheduler(random), {} as RedisConfig, random);
}

async function registered(m: RedisModel): Promise<void> {
  await m.apply('upsert', [{ url: URL, backend: 'vllm', priority: 0 }, 0, 'epoch-1', 0]);
}

describe('the simulated Redis ends locks as the expire script does', () => {
  it("keeps the load lock of a node that has not heartbeated since the state was emptied (dst seed 10's kind)", async () => {
    const m = model();
    await registered(m);
    await m.apply('heartbeat', ['n2', 0]);
    const fence = await m.apply('beginLoad', [URL, 'chat', 10, 8000, 'n0', 1]);
    expect(fence).not.toBeNull();
    await m.apply('expireLeases', [100, 4000, NODE_TTL, 60_000]);
    // n0's load is still under way: n2 must not get the same adapter's load lock.
    expect(await m.apply('beginLoad', [URL, 'chat', 110, 8000, 'n2', 1])).toBeNull();
  });

  it('ends the load lock of a node whose heartbeat is older than nodeTtl', async () => {
    const m = model();
    await registered(m);
    await m.apply('heartbeat', ['n0', 0]);
    await m.apply('heartbeat', ['n2', 2900]);
    expect(await m.apply('beginLoad', [URL, 'chat', 10, 8000, 'n0', 1])).not.toBeNull();
    await m.apply('expireLeases', [3000, 4000, NODE_TTL, 60_000]);
    expect(await m.apply('beginLoad', [URL, 'chat', 3010, 8000, 'n2', 1])).not.toBeNull();
  });
});
