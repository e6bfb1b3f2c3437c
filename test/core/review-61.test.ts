/**
 * Review of 0f89d86 (HeldLeases.retakeUnanswered), over a real redis-server: a lease still held as
 * its retake gets no answer is marked `uncertain`, and its release, once its request ends, waits in
 * `pendingReleases`. Those travel with the store's records to its successor (`adopt`), which sends
 * them over its own link: ahead of the retake still on the old link.
 */
import { AdapterManager } from '../../src/adapters/manager';
import type { LoadOutcome, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { silentLogger } from '../../src/log';
import { adapterPolicy } from '../helpers/adapter-policy';
import { useRedisStores } from '../helpers/redis-stores';
import { startStoreLine, U1 } from './store-line';

const stores = useRedisStores();

// As test/core/hand-back-close.test.ts's "a reclaim whose retake times out", but P's request ends
// only after S's retake timed out: the lease was still held then, so retakeUnanswered marked it
// `uncertain` instead of releasing it behind the retake. Its release is then P's pending one, which
// N adopts and replays over N's own link, ahead of the retake still on S's link (held there until
// S has closed: store-line.ts onRetakeOnTheWire).
describe('a lease still held as its retake times out, ended before its store is adopted', () => {
  it('leaves no lease of the node in the shared state once the retake lands', async () => {
    const line = await startStoreLine(stores.redis, 'r61-uncertain:', { timeoutMs: 1000, cutP: true });
    try {
      await line.takeLease();
      const timedOut = line.onRetakeOnTheWire().unanswered;
      await line.emptyState();
      await timedOut;
      await line.s.handBackEnded(); // the reclaim has ended (failed)
      // The request ends now: released in P's local store, its shared release pending.
      await line.p.release(line.lease.id, Date.now());
      await line.retireP();
      // N replayed it over its own link: released, until the retake lands.
      expect(await line.leaseKeys()).toEqual([]);
      await line.retireS();
      await line.retakeLands();
      expect(await line.leaseKeys()).toEqual([]);
    } finally {
      await line.close();
    }
  }, 30_000);
});

// The same with P answering all along: its lease is shared, so retakeUnanswered marks nothing, and
// P's request's release goes over P's own link at once, ahead of S's retake of it.
describe("a shared lease whose retake over a successor's link times out", () => {
  it('leaves no lease of the node in the shared state once the retake lands', async () => {
    const line = await startStoreLine(stores.redis, 'r61-shared:', { timeoutMs: 1000, cutP: false });
    try {
      await line.takeLease();
      expect(line.p.mode?.()).not.toBe('local');
      const timedOut = line.onRetakeOnTheWire().unanswered;
      await line.emptyState();
      await timedOut;
      await line.s.handBackEnded();
      await line.p.release(line.lease.id, Date.now());
      await line.retireP();
      await line.retireS();
      await line.retakeLands();
      expect(await line.leaseKeys()).toEqual([]);
    } finally {
      await line.close();
    }
  }, 30_000);
});

// Suspicion on 39a1f16 (the keep timer, call-keep.ts): a joiner that gave up on a load still under way (its own
// bound passed) is asked no more by that load's timer: a fresh lease taken then would be for a
// request already answered, never given back.
describe('a request that gave up on a load it joined', () => {
  it("is asked no more by that load's timer", async () => {
    const clock = new VirtualClock();
    const store = new MemoryFleetStore();
    await store.upsertReplica({ url: U1, backend: 'vllm', priority: 0 });
    await store.applySnapshot(U1, { at: 0, ok: true, registry: [] });
    const api = {
      scrape: () => Promise.reject(new Error('not used')),
      loadAdapter: async (): Promise<LoadOutcome> => {
        await sleep(clock, 5000);
        return 'loaded';
      },
      unloadAdapter: async (): Promise<UnloadOutcome> => 'unloaded',
    } as ReplicaApi;
    const mgr = new AdapterManager(store, api, clock, silentLogger);
    const a = { name: 'a', path: '/adapters/a' };
    const load = mgr.ensure(U1, a, adapterPolicy({ loadTimeoutMs: 10_000 }));
    await clock.run(clock.now() + 100);
    const asked: number[] = [];
    const joined = mgr.ensure(
      U1,
      a,
      adapterPolicy({
        queueTimeoutMs: 100,
        loadTimeoutMs: 1000,
        keepLease: () => void asked.push(clock.now()),
      }),
    );
    let gaveUpAt = Infinity;
    const outcome = joined.catch((err: Error) => {
      gaveUpAt = clock.now();
      return err.message;
    });
    await clock.run();
    expect(await load).toBe('loaded');
    expect(await outcome).toMatch(/still under way|wait/);
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.filter((t) => t >= gaveUpAt)).toEqual([]);
  });
});
