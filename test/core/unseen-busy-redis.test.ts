/**
 * The unseen hold of a poll's reading (src/adapters/unseen-busy.ts) over the Redis scripts: what
 * the residency script writes when a poll's registry read adopts an adapter the emptied state did
 * not know (its `since` and `lastUsed` alike), and what a lease's release writes, as a real
 * redis-server keeps them (dst seed 1965638).
 */
import type { ReplicaWord } from '../../src/adapters/replica-word';
import { holdUnseenBusy } from '../../src/adapters/unseen-busy';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { busyReading } from '../helpers/unseen-hold';
import { RedisServer } from '../../harness/redis/server';

const U = 'http://10.0.0.1:8000';

let redis: RedisServer;
let store: RedisFleetStore;
let cases = 0;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});
// Each case on a state of its own (a prefix), its replica registered there. A connection of its
// own each case, so a bound a loaded machine can meet (the harness's 200 ms connect: seen failing
// in a run beside other suites) is no part of what a case asserts.
beforeEach(async () => {
  store = new RedisFleetStore(redis.config(`ub${++cases}:`, { timeout: 2000 }), 'A');
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
});
afterEach(async () => {
  await store.close();
});

const reading = busyReading;

/** A poll begun at `startedAt` whose registry lists `x`, running; the adapters it holds. */
async function pollHolds(
  startedAt: number,
  before?: () => Promise<void>,
  endedHere: ((url: string, adapter: string) => boolean) | null = null,
): Promise<string[]> {
  await store.applySnapshot(U, {
    at: startedAt + 5,
    startedAt,
    ok: true,
    load: reading(['x']),
    registry: [{ name: 'x', path: '/adapters/x' }],
    managed: () => true,
  });
  await before?.();
  const held: string[] = [];
  const word = { holdUnseen: (_url: string, name: string) => held.push(name) };
  await holdUnseenBusy(store, word as unknown as ReplicaWord, null, U, reading(['x']), endedHere);
  return held;
}

describe('a poll’s reading and the unseen hold, over Redis', () => {
  it('holds an adapter the poll itself adopted, running with no lease', async () => {
    const started = Date.now();
    expect(await pollHolds(started)).toEqual(['x']);
    expect((await store.residents(U)).find((r) => r.name === 'x')?.state).toBe('loaded');
  });

  it('holds nothing once a request of this node ended after the adoption, within the poll', async () => {
    const started = Date.now();
    const held = await pollHolds(
      started,
      async () => {
        await store.acquire({ id: 'mine', url: U, adapter: 'x', at: started + 6 });
        await store.release('mine', started + 7, 200);
      },
      (_u, name) => name === 'x',
    );
    expect(held).toEqual([]);
  });

  it('holds what runs once a lease of it was released within the poll with no request of this node ended', async () => {
    // The release's `lastUsed` past the adoption's `since`: another node's (review 64).
    const started = Date.now();
    const held = await pollHolds(started, async () => {
      await store.acquire({ id: 'theirs', url: U, adapter: 'x', at: started + 6 });
      await store.release('theirs', started + 7, 200);
    });
    expect(held).toEqual(['x']);
  });
});
