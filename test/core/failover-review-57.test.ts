/**
 * Review 57 of the failover changes (a retired runtime's lock ends sent as it leaves; the bounded
 * registration; the split into recovering-store.ts), each over a real redis-server. Each case
 * says how it failed on the code before its fix.
 */
import type { ReplicaApi } from '../../src/backends/replica-api';
import type { Clock } from '../../src/clock';
import { EndedLocks } from '../../src/fleet/redis/ended-locks';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { LoadEnd } from '../../src/fleet/store';
import type { ReplicaSnapshot, ReplicaSpec } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { stateInRedis } from '../helpers/redis-stores';
import { waitFor } from '../../harness/wait';
import { snapshotWithA, vllmSpec } from './helpers';
import { prefetchSettings } from '../helpers/prefetch-settings';

const U1 = 'http://10.0.0.1:8000';
const U2 = 'http://10.0.0.2:8000';

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

/** A poll: adapter `a` loaded and in the registry. */
const poll = (at: number): ReplicaSnapshot => snapshotWithA(at);

/** Heartbeats every 15 s: no heartbeat takes part in these cases. */
function node(prefix: string, id: string) {
  const shared = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 }), id);
  return { shared, s: new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 }) };
}

/** What a peer still on that state reads of `adapter` on U1 (undefined: not resident). */
const stateIn = (prefix: string, adapter: string) => stateInRedis(redis, prefix, U1, adapter);

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Prefetching on, planning at every round (test/core/prefetch-races.test.ts has the same). */
const PREFETCH_ON = prefetchSettings({ intervalMs: 0 });

describe('a lock a runtime retired for other state still holds when its store leaves', () => {
  // A prefetch's load or a trim after a poll runs in no decision and under no lease, so the
  // retired runtime may be drained (RuntimeDrain.drained) while one is under way: its store
  // leaves, and the call's end comes after. Before the fix the store had closed by then and the
  // end went nowhere: peers still on the old state read the adapter `loading` (or `unloading`)
  // until the lock's TTL (a minute here), and their requests for it waited.
  it.each([
    ['load', 'b', 'loaded'],
    ['unload', 'b', undefined],
  ] as const)(
    '%s: its end reaches the old state',
    async (op, adapter, after) => {
      const P = `r57-${op}:`;
      await redis.command(['FLUSHALL']);
      const old = node(P, 'X');
      try {
        await old.s.upsertReplica(vllmSpec(U1));
        await old.s.applySnapshot(U1, poll(Date.now()));
        if (op === 'unload') {
          // Loaded by this node first: what it unloads then.
          const f = await old.s.beginLoad(U1, adapter, Date.now(), 4, 60_000);
          expect(await old.s.finishLoad(U1, adapter, f!, true, Date.now())).toBe(true);
          // Past the hold-off the state's first registration began (a few probes of 50 ms).
          await waitFor(() => !old.s.unloadsHeldOff(), 5000, 'the hold-off over');
        }
        const fence =
          op === 'load'
            ? await old.s.beginLoad(U1, adapter, Date.now(), 4, 60_000)
            : await old.s.beginUnload(U1, adapter, Date.now(), 60_000);
        expect(fence).toBeGreaterThan(0);
        const leaving = old.s.leave(10_000);
        // The leave gets its chance to finish first (it did on the code before the fix).
        await Promise.race([leaving, pause(300)]);
        const current =
          op === 'load'
            ? await old.s.finishLoad(U1, adapter, fence!, true, Date.now())
            : await old.s.finishUnload(U1, adapter, fence!, true, Date.now());
        await leaving;
        expect(await stateIn(P, adapter)).toBe(after);
        expect(current).toBe(true);
      } finally {
        await old.s.close();
      }
    },
    30_000,
  );
});

describe('a lock asked by a runtime retired for other state when its store leaves', () => {
  // The prefetch's load asked its lock just before the runtime drained: the grant was on its way
  // when the store began to leave, so no lock was open yet. Before the fix the store left and
  // closed, the load went on, and its end went nowhere: `loading` until the lock's TTL.
  it('its end reaches the old state', async () => {
    const P = 'r57-asked:';
    await redis.command(['FLUSHALL']);
    const old = node(P, 'X');
    try {
      await old.s.upsertReplica(vllmSpec(U1));
      await old.s.applySnapshot(U1, poll(Date.now()));
      const asked = old.s.beginLoad(U1, 'b', Date.now(), 4, 60_000);
      const leaving = old.s.leave(10_000);
      const fence = await asked;
      expect(fence).toBeGreaterThan(0);
      await Promise.race([leaving, pause(300)]);
      const current = await old.s.finishLoad(U1, 'b', fence!, true, Date.now());
      await leaving;
      expect(await stateIn(P, 'b')).toBe('loaded');
      expect(current).toBe(true);
    } finally {
      await old.s.close();
    }
  }, 30_000);
});

describe("a predecessor's owed lock end adopted while the successor holds a lock under the same fence", () => {
  // A server that lost writes (a restart from a snapshot, a Sentinel switch) and whose fence counter
  // ran ahead of its clock hands a fence out again (prelude.ts `newfence`); the fence check of a
  // replayed end then takes the successor's lock for the predecessor's (one node id). `begin`
  // already drops an end owed under a fence handed out again; `adopt` did not: the predecessor's
  // end, replayed at once, marked the successor's load under way `loaded` (a request sent on it
  // gets the replica's 404 until the load lands).
  it('is not sent: the lock under way stays the successor’s', async () => {
    const P = 'r57-adopt:';
    await redis.command(['FLUSHALL']);
    const pred = node(P, 'X');
    const next = node(P, 'X');
    const peer = new RedisFleetStore(redis.config(P, { node_ttl_ms: 60_000 }), 'Y');
    try {
      await pred.s.upsertReplica(vllmSpec(U1));
      await pred.s.applySnapshot(U1, poll(Date.now()));
      // The counter ahead of the server's clock: the fence handed out is what the counter says.
      const ahead = Date.now() * 10 + 1e9;
      await redis.command(['SET', `${P}fence`, String(ahead)]);
      const fence = await pred.s.beginLoad(U1, 'b', Date.now(), 4, 60_000);
      expect(fence).toBe(ahead + 1);
      expect(await pred.s.finishLoad(U1, 'b', fence!, true, Date.now())).toBe(true);
      // Another node unloads `b`; then the counter goes back (the writes since were lost).
      const u = await peer.beginUnload(U1, 'b', Date.now(), 60_000);
      expect(u).not.toBeNull();
      expect(await peer.finishUnload(U1, 'b', u!, true, Date.now())).toBe(true);
      await redis.command(['SET', `${P}fence`, String(ahead)]);
      // The successor (a changed timeout: same state, same node id) loads `b` under the same fence.
      await next.s.succeed(pred.s);
      expect(await next.s.beginLoad(U1, 'b', Date.now(), 4, 60_000)).toBe(fence);
      // The predecessor has drained: its records go to the successor, which replays its ends.
      await next.s.adopt(pred.s);
      expect(await stateIn(P, 'b')).toBe('loading');
      expect(await next.s.finishLoad(U1, 'b', fence!, true, Date.now())).toBe(true);
    } finally {
      await pred.s.close();
      await next.s.close();
      await peer.close();
    }
  }, 30_000);
});

describe('a lock a runtime replaced on the same state still holds when it hands over', () => {
  // The same gap through the runtime, on the same state (a changed timeout): the retired runtime,
  // drained (no decision, no lease: a prefetch's load is neither), handed its records to its
  // successor and closed its store; the load's end came after and went nowhere. Before the fix
  // the adapter read `loading` to every node until the lock's TTL, this node's successor too
  // (its requests for it waited on that load).
  it('its end reaches the shared state', async () => {
    const P = 'r57-same:';
    await redis.command(['FLUSHALL']);
    const config = (timeout: number) => redis.config(P, { node_ttl_ms: 60_000, timeout });
    const old = new FleetRuntime({ redis: config(2000), leasePrefix: 'X', log: silentLogger });
    const next = new FleetRuntime({
      redis: config(2500),
      leasePrefix: 'X',
      leaseSeq: old.leaseSeq,
      log: silentLogger,
    });
    try {
      await old.store.upsertReplica(vllmSpec(U1));
      await old.store.applySnapshot(U1, poll(Date.now()));
      // The load a prefetch begins on the old runtime (through its store, as the manager does).
      const fence = await old.store.beginLoad(U1, 'b', Date.now(), 4, 60_000);
      expect(fence).toBeGreaterThan(0);
      const retiring = old.retire(next);
      await Promise.race([retiring, pause(300)]);
      const current = await old.store.finishLoad(U1, 'b', fence!, true, Date.now());
      await retiring;
      expect(await stateIn(P, 'b')).toBe('loaded');
      expect(current).toBe(true);
    } finally {
      old.stop();
      next.stop();
    }
  }, 30_000);
});

describe('EndedLocks across a hand-over on the same state', () => {
  function locks() {
    const t = { now: 1_000 };
    const clock: Clock = { now: () => t.now, after: () => () => undefined };
    const calls: string[] = [];
    const shared = {
      finishLoad: async (url: string, adapter: string, fence: number, ok: LoadEnd) =>
        void calls.push(`load ${adapter} ${fence} ${ok}`),
    } as unknown as SharedStore;
    return { t, calls, shared, clock };
  }

  it('drops the successor’s own end owed under a fence its predecessor holds a lock under', async () => {
    const { calls, shared, clock } = locks();
    const [pred, next] = [new EndedLocks(clock), new EndedLocks(clock)];
    next.begin(7, 500);
    next.end('load', U1, 'b', 7, false);
    pred.begin(7, 500); // handed out again to the predecessor's load, still under way
    next.adopt(pred);
    await next.replay(shared);
    expect(calls).toEqual([]);
    // The predecessor's lock is the successor's to wait for now, until its end or its TTL.
    expect(next.open).toBe(true);
    next.end('load', U1, 'b', 7, true);
    expect(next.open).toBe(false);
    await next.replay(shared);
    // Sent again as old news (ended-locks.ts): the lock ends, nothing is marked.
    expect(calls).toEqual(['load b 7 replayed']);
  });

  it('counts a lock open until its TTL only', () => {
    const { t, clock } = locks();
    const l = new EndedLocks(clock);
    expect(l.open).toBe(false);
    l.begin(-4, 500); // a local lock: no end owed to the shared store
    expect(l.open).toBe(false);
    l.begin(9, 500);
    t.now = 1_499;
    expect(l.open).toBe(true);
    t.now = 1_500;
    expect(l.open).toBe(false);
  });
});

describe('a registration emptied in each pass, begun by a heartbeat', () => {
  // The bounded registration throws; its callers are the recovery (returns false), `views` and
  // `viewsAndLease` (inside `decide`: degrade) and a heartbeat's reclaim (`reclaimShared`, caught:
  // degrade). This covers the last: no unhandled rejection (a plugin-server crash), the node decides
  // alone, and its probe registers once the state holds. Passed on the code as found.
  it('degrades, with no unhandled rejection, and the probe registers again', async () => {
    const P = 'r57-hb:';
    await redis.command(['FLUSHALL']);
    const a = node(P, 'A');
    const rejections: unknown[] = [];
    const onRejection = (err: unknown) => rejections.push(err);
    process.on('unhandledRejection', onRejection);
    try {
      for (const u of [U1, U2]) await a.s.upsertReplica(vllmSpec(u));
      const upsert = a.shared.upsertReplica.bind(a.shared);
      let emptying = true;
      a.shared.upsertReplica = async (s: ReplicaSpec) => {
        await upsert(s);
        if (emptying && s.url === U1) await redis.command(['FLUSHALL']);
      };
      await redis.command(['FLUSHALL']);
      // What the heartbeat does once its reply shows another epoch.
      a.shared.onStateLost?.();
      await waitFor(() => a.s.mode() === 'local', 5000, 'the node deciding alone');
      emptying = false;
      await waitFor(() => a.s.mode() === 'redis', 10_000, 'the probe registered again');
      expect(Number(await redis.command(['HLEN', `${P}spec`]))).toBe(2);
      await pause(100);
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
      await a.s.close();
    }
  }, 30_000);
});

describe('a poll round under way when its runtime is replaced', () => {
  // `retire` stops the poller, but a round already under way ends after it and tells its round
  // listeners: the replaced runtime's prefetcher planned and loaded again (a load under a lock
  // asked after its store had left or handed over, or a local lock once closed), beside its
  // successor's own planning. The guard is the prefetcher's own now (`Prefetcher.stop`, which
  // `retire` calls): the round listener ticks it, and a stopped prefetcher plans nothing.
  it('ticks no prefetch on the replaced runtime', async () => {
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    let scrapes = 0;
    const api = {
      scrape: async () => {
        scrapes++;
        await held;
        throw new Error('no answer');
      },
    } as unknown as ReplicaApi;
    const old = new FleetRuntime({ api, log: silentLogger, poller: { intervalMs: 10, jitter: 0 } });
    const next = new FleetRuntime({ api, log: silentLogger });
    try {
      await old.store.upsertReplica(vllmSpec(U1));
      // Prefetching on, with demand: a tick would plan (and count) at once.
      old.prefetcher.configure({ ...PREFETCH_ON });
      old.prefetcher.observe({ name: 'hot', path: '/a/hot' }, [U1], Date.now() - 1000);
      old.poller.start();
      await waitFor(() => scrapes > 0, 5000, 'a round under way');
      const retiring = old.retire(next);
      release();
      await retiring;
      await pause(50);
      expect(old.prefetcher.stats.ticks).toBe(0);
    } finally {
      release();
      old.stop();
      next.stop();
    }
  }, 30_000);
});
