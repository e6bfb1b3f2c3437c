/**
 * A load or unload lock's fence must not be handed out again after the state was emptied
 * (FLUSHALL, a restart without persistence) or rolled back (a restart from an older snapshot):
 * a node whose lock was wiped still holds its fence in memory, and its `holds`, `finishLoad` or
 * after-load undo would otherwise pass against another node's new lock on the same replica and
 * adapter (ending that load, or unloading the adapter under its request).
 */
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { RedisServer } from '../../harness/redis/server';

const U = 'http://10.0.0.1:8000';
const P = 'fr:';
const TTL = 60_000;

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

const node = (id: string) => new RedisFleetStore(redis.config(P, { node_ttl_ms: 60_000, timeout: 2000 }), id);

/** A's load lock is wiped by `wipe`; B then begins a load of the same adapter on the same replica. */
async function staleFenceAfter(wipe: () => Promise<void>): Promise<void> {
  const before = node('A');
  let stale: number | null;
  try {
    await before.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    stale = await before.beginLoad(U, 'x', Date.now(), 4, TTL);
    expect(stale).not.toBeNull();
  } finally {
    await before.close();
  }
  await wipe();
  // New connections (a restart is said once to each old one as ServerSwitched); A keeps its fence.
  const [a, b] = [node('A'), node('B')];
  try {
    await b.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const fresh = await b.beginLoad(U, 'x', Date.now(), 4, TTL);
    expect(fresh).not.toBeNull();

    // A's checks name its old fence: none may pass against B's lock.
    expect(await a.holds(U, 'x', stale!)).toBe(false);
    expect(await a.finishLoad(U, 'x', stale!, false, Date.now())).toBe(false);
    expect(fresh).not.toBe(stale);
    expect(await b.holds(U, 'x', fresh!)).toBe(true);
    expect(await b.finishLoad(U, 'x', fresh!, true, Date.now())).toBe(true);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
}

it('Redis: a fence handed out before a FLUSHALL is not handed out again after it', async () => {
  await redis.command(['FLUSHALL']);
  await staleFenceAfter(async () => {
    await redis.command(['FLUSHALL']);
  });
});

it('Redis: a fence handed out after the last snapshot is not handed out again after a restart from it', async () => {
  await redis.command(['FLUSHALL']);
  await redis.command(['SAVE']);
  await staleFenceAfter(async () => {
    // Killed without saving: it comes back from the snapshot taken before A's load.
    await redis.stop();
    await redis.start();
  });
});

it('memory store: a store begun anew later (the simulated FLUSHALL) does not repeat an earlier fence', async () => {
  const t = Date.now();
  const before = new MemoryFleetStore();
  await before.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  const stale = await before.beginLoad(U, 'x', t, 4);
  const after = new MemoryFleetStore();
  await after.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  const fresh = await after.beginLoad(U, 'x', t + 1, 4);
  expect(await after.holds(U, 'x', stale!)).toBe(false);
  expect(await after.finishLoad(U, 'x', stale!, false, t + 2)).toBe(false);
  expect(fresh).not.toBe(stale);
  expect(await after.holds(U, 'x', fresh!)).toBe(true);
});
