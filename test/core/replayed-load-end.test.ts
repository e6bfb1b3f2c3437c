/**
 * A load's end sent again (src/fleet/redis/ended-locks.ts `replay`) is old news: the replica may
 * have changed since the load ended (dst seed 1534246: Redis back from a snapshot still holding
 * node 2's `loading` lock of `code`; node 1 had unloaded `code` since, and that unload was lost
 * too). The replay ends the lock, so no request waits on `loading` until its TTL (dst seed
 * 1002201), but marks nothing loaded: the adapter is forgotten there and marked gone, as after a
 * failed load, and the next poll begun after it reads what the replica holds. Against the memory
 * store and the Lua scripts both.
 */
import { EndedLocks } from '../../src/fleet/redis/ended-locks';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { FleetStore } from '../../src/fleet/store';
import { useRedisStores } from '../helpers/redis-stores';
import { HandClock, snapshotWithA, vllmSpec } from './helpers';

const U1 = 'http://10.0.0.1:8000';

/**
 * A registry read of U1 begun at `startedAt` (on the shared store's clock: `sharedStartedAt`),
 * answered at `at`, that lists `b` beside `a`.
 */
const pollListingB = (at: number, startedAt: number, sharedStartedAt = startedAt) => ({
  ...snapshotWithA(at),
  startedAt,
  sharedStartedAt,
  registry: [
    { name: 'a', path: '/adapters/a' },
    { name: 'b', path: '/adapters/b' },
  ],
});

const stateOf = async (store: FleetStore) => (await store.views([U1], { name: 'b' }))[0]?.adapter?.state;

/**
 * Node X's load of `b` landed and X recorded its end, but the store lost that end (a restart from
 * an older snapshot, a Sentinel switch): it still reads X's `loading` lock. The replica changed
 * since (another node unloaded `b`, also lost). X, finding the server changed, replays its ends.
 */
async function replayedOnRollback(
  store: FleetStore,
  clock: HandClock,
  firstPollAt = clock.now(),
): Promise<void> {
  await store.upsertReplica(vllmSpec(U1));
  await store.applySnapshot(U1, { ...snapshotWithA(firstPollAt), sharedStartedAt: firstPollAt });
  const locks = new EndedLocks(clock);
  const fence = locks.begin(await store.beginLoad(U1, 'b', clock.now(), 4, 60_000), 60_000);
  expect(fence).toBeGreaterThan(0);
  locks.end('load', U1, 'b', fence!, true);
  expect(await stateOf(store)).toBe('loading');
  await locks.replay(store as SharedStore);
}

/**
 * A read begun 1 ms after the replayed end on each clock that may have stamped its gone mark: the
 * node's (the memory store marks it at the end's time, read from `clock` by EndedLocks) and the
 * shared store's where it keeps one (the scripts mark it at Redis's TIME and compare
 * `sharedStartedAt`). One case's times all come from those clocks: Date.now() is neither, and off
 * SystemClock's line by whatever the wall clock was stepped or slewed since the process started.
 */
async function begunAfter(store: FleetStore, clock: HandClock): Promise<[number, number]> {
  const startedAt = clock.step(1);
  const shared = await store.sharedTime?.();
  return [startedAt, shared === undefined ? startedAt : shared + 1];
}

function theRule(open: () => Promise<FleetStore>) {
  it('a replayed load end ends the lock but marks nothing loaded: the replica may have changed since', async () => {
    const store = await open();
    await replayedOnRollback(store, new HandClock(Date.now()));
    expect(await stateOf(store)).toBeUndefined();
  });

  it('the adapter a replayed load end forgot is gone: only a poll begun after it adopts it again', async () => {
    const store = await open();
    const clock = new HandClock(Date.now());
    const t0 = clock.now() - 2_000;
    await replayedOnRollback(store, clock, t0);
    // Begun after the first poll, before the load's lock was granted and its end replayed: it may
    // have read the registry before another node's lost unload (test/core/review-62b.test.ts).
    await store.applySnapshot(U1, pollListingB(clock.now(), t0 + 500));
    expect(await stateOf(store)).toBeUndefined();
    const [startedAt, sharedStartedAt] = await begunAfter(store, clock);
    await store.applySnapshot(U1, pollListingB(clock.now(), startedAt, sharedStartedAt));
    expect(await stateOf(store)).toBe('loaded');
  });
}

describe('a replayed load end, memory store', () => {
  theRule(async () => new MemoryFleetStore());
});

describe('a replayed load end, Redis scripts (real redis-server)', () => {
  const servers = useRedisStores();
  let n = 0;
  theRule(async () => {
    const { redis, open } = servers;
    const s = new RedisFleetStore(redis.config(`rle${n++}:`, { node_ttl_ms: 60_000, timeout: 2000 }), 'X');
    open.push(s);
    return s;
  });
});
