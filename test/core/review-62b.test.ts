/**
 * Review of 867b0e5 (a replayed load end, `LoadEnd` 'replayed') and f0f8090 (an acquire with no
 * answer: HeldLease.unansweredOn). Each suspicion's schedule, run against the memory store or a
 * real redis-server (the three-store line of store-line.ts).
 */
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { EndedLocks } from '../../src/fleet/redis/ended-locks';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { FleetStore } from '../../src/fleet/store';
import { waitFor } from '../../harness/wait';
import { useRedisStores } from '../helpers/redis-stores';
import { HandClock, snapshotWithA, vllmSpec } from './helpers';
import { startStoreLine, U1, type StoreLine } from './store-line';

const stores = useRedisStores();

const stateOf = async (store: FleetStore, name: string) =>
  (await store.views([U1], { name }))[0]?.adapter?.state;

/** A registry read of U1 begun at `startedAt` listing `names` beside `a` (`managed`: which a configuration loads). */
const poll = (startedAt: number, names: string[], managed: (name: string) => boolean = () => true) => ({
  ...snapshotWithA(startedAt + 50),
  startedAt,
  sharedStartedAt: startedAt,
  registry: [{ name: 'a', path: '/adapters/a' }, ...names.map((n) => ({ name: n, path: `/adapters/${n}` }))],
  managed: (name: string) => managed(name),
});

/**
 * Every time of a case on one line, stepped by hand: the ends the nodes replay are stamped on it, as
 * are the registry reads. A read stamped with Date.now() against ends stamped on systemClock (a
 * monotonic line from the process's start) was "begun after" the replayed end on one line and before
 * it on the other once the wall clock had been stepped or slewed since the process started (the
 * second case failed in a CI replay with `Received: undefined`).
 */
const caseClock = () => new HandClock(Date.now());

/**
 * Two servers of one state: `primary` takes every write, `promoted` (a Sentinel switch's replica,
 * or a restart from a snapshot) lacks those after node 2's load lock of `b` was granted. Both are
 * driven alike up to there, so the promoted one hands out the same fences.
 */
async function twoServers(t0: number) {
  const primary = new MemoryFleetStore();
  const promoted = new MemoryFleetStore();
  const both = async <T>(f: (s: MemoryFleetStore) => Promise<T>): Promise<T> => {
    const r = await f(primary);
    await f(promoted);
    return r;
  };
  await both((s) => s.upsertReplica(vllmSpec(U1)));
  await both((s) => s.applySnapshot(U1, { ...snapshotWithA(t0), sharedStartedAt: t0 }));
  return { primary, promoted, both };
}

describe('a replayed load end (867b0e5)', () => {
  // Node 2 loads `b` (lock F) and ends it; node 1 then unloads `b` (lock G) at tU, marking it gone.
  // Both ends are lost: the promoted server still reads node 2's `loading` lock. Node 1's replayed
  // unload end is refused (G is not the lock there); node 2's replayed load end drops the entry. A
  // registry read begun before tU (the load landed, the unload not yet), its answer slow, is then
  // applied. Before, it re-adopted `b`, which the replica no longer holds (the gone mark that stops it
  // on the primary went with the lost writes): failed first with `Received: "loaded"`. The replayed
  // end now marks it gone as a failed load's does: only a read begun after it adopts it again.
  it("keeps a registry read begun before another node's lost unload from re-adopting it", async () => {
    const clock = caseClock();
    const t0 = clock.now() - 5_000;
    const { primary, promoted, both } = await twoServers(t0);
    const node2 = new EndedLocks(clock);
    const node1 = new EndedLocks(clock);
    const f = node2.begin(await both((s) => s.beginLoad(U1, 'b', t0 + 100, 4)), 60_000)!;
    expect(f).toBeGreaterThan(0);
    // On the primary only (lost by the switch):
    expect(await primary.finishLoad(U1, 'b', f, true, t0 + 300)).toBe(true);
    node2.end('load', U1, 'b', f, true);
    const tU = t0 + 1_000;
    const g = node1.begin(await primary.beginUnload(U1, 'b', tU), 60_000)!;
    expect(await primary.finishUnload(U1, 'b', g, true, tU + 50)).toBe(true);
    node1.end('unload', U1, 'b', g, true);
    // The read begun at t0 + 500 on the primary would not bring it back:
    await primary.applySnapshot(U1, poll(t0 + 500, ['b']));
    expect(await stateOf(primary, 'b')).toBeUndefined();
    // The switch: each node replays its ends to the promoted server.
    await node1.replay(promoted as unknown as SharedStore);
    await node2.replay(promoted as unknown as SharedStore);
    expect(await stateOf(promoted, 'b')).toBeUndefined();
    await promoted.applySnapshot(U1, poll(t0 + 500, ['b']));
    expect(await stateOf(promoted, 'b')).toBeUndefined();
  });

  // Holds up: a start-up adapter's load ended 'static'; its replayed end drops it, and the next
  // registry read (begun after it) classifies it by `managed` as that load did (replica-word.ts startUpEntry): static
  // again, never `loaded` (so never evictable). 'static' is only ever ended when `managed` is known.
  it('re-adopts a start-up adapter as static after its replayed end dropped it', async () => {
    const clock = caseClock();
    const t0 = clock.now() - 5_000;
    const { primary, promoted, both } = await twoServers(t0);
    const node = new EndedLocks(clock);
    const f = node.begin(await both((s) => s.beginLoad(U1, 's', t0 + 100, 4)), 60_000)!;
    expect(await primary.finishLoad(U1, 's', f, 'static', t0 + 300)).toBe(true);
    node.end('load', U1, 's', f, 'static');
    await node.replay(promoted as unknown as SharedStore);
    expect(await stateOf(promoted, 's')).toBeUndefined();
    // Begun 1 ms after the replayed end, on the clock that stamped it.
    await promoted.applySnapshot(
      U1,
      poll(clock.step(1), ['s'], (n) => n !== 's'),
    );
    expect(await stateOf(promoted, 's')).toBe('static');
  });
});

describe('a release behind an unanswered retake (f0f8090)', () => {
  /** The stores' bound on a call: the retake's reply is held past it, every other call answered well within. */
  const TIMEOUT_MS = 1000;

  /**
   * P's lease, re-taken by S, its reply held on S's link past S's timeout: landed, answered late,
   * open again. Before, S's link was slowed to 0.15 s with a 0.1 s timeout: on a loaded machine S's
   * registration before the retake overran 0.1 s too, S decided alone, the retake was never sent,
   * and the case waited out its 10 s (0 of 3 passed at a load average of 13 on 2 cores).
   */
  async function retakeLandedLate(line: StoreLine): Promise<void> {
    await line.takeLease();
    const timedOut = line.onRetakeHeld();
    await line.emptyState();
    await timedOut;
    await line.s.handBackEnded();
    line.slowLink.restore();
    // Answered on S's link after the held reply: the late answer has reached S.
    await line.sShared.sharedTime();
  }

  // As review-61.test.ts's shared case, but the retake's reply is held past S's timeout only:
  // the retake lands, answered late, before P's request ends. P's release goes first over S's link
  // (`unansweredOn`) and finds the lease the retake took. Before, it went with no status, and P's
  // own release, carrying the upstream's 503, then found nothing: Redis counted no failure (passive
  // health) and the log phase got no `Released` (no waiter for room woken, no registry read afresh
  // after a 404: log-phase.ts afterRelease). Failed first with `Received: null` (no passive count).
  it('counts the upstream status once and answers, the retake having landed first', async () => {
    const line = await startStoreLine(stores.redis, 'r62b-status:', { timeoutMs: TIMEOUT_MS, cutP: false });
    try {
      await retakeLandedLate(line);
      expect(await line.leaseKeys()).toEqual([line.lease.id]);
      const released = await line.p.release(line.lease.id, Date.now(), 503);
      expect(await line.leaseKeys()).toEqual([]);
      expect(await stores.redis.command(['HGET', `r62b-status:r:${U1}`, 'passive'])).toBe('1');
      expect(released).toBeDefined();
    } finally {
      await line.close();
    }
  }, 10_000);

  // As above, but P's own release is held back until the one behind the retake has found the lease:
  // P's finds nothing, and the answer is the other's (waited for in the log phase: a status).
  it('answers with the release behind the retake when that one finds the lease first', async () => {
    const line = await startStoreLine(stores.redis, 'r62b-behind:', { timeoutMs: TIMEOUT_MS, cutP: false });
    try {
      await retakeLandedLate(line);
      const release = line.pShared.release.bind(line.pShared);
      line.pShared.release = async (...a) => {
        // Until the release behind the retake, over S's restored link, has found the lease.
        await waitFor(
          async () => ((await line.leaseKeys()) as string[]).length === 0,
          5000,
          'the lease released',
        );
        return release(...a);
      };
      const released = await line.p.release(line.lease.id, Date.now(), 503);
      expect(await line.leaseKeys()).toEqual([]);
      // The status went with the release that found the lease (the first case leaves which one that is to the race).
      expect(await stores.redis.command(['HGET', `r62b-behind:r:${U1}`, 'passive'])).toBe('1');
      expect(released).toBeDefined();
    } finally {
      await line.close();
    }
  }, 10_000);
});
