/**
 * Review of the failover changes of 2026-12-06 (recovery gate, registration re-run, lock ends
 * naming their node, a successor held off by its predecessor), over a real redis-server. Each
 * case names the suspicion it checks and whether it failed on the code before its fix.
 */
import { RedisModel } from '../../dst/redis-model';
import { Scheduler } from '../../dst/scheduler';
import { VirtualClock } from '../../src/clock';
import type { RedisConfig } from '../../src/config/redis-schema';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { Lease, ReplicaSnapshot } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { seededRandom } from '../../src/random';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { switchedShared } from '../helpers/switched-shared';
import { snapshotWithA, vllmSpec } from './helpers';

const U1 = 'http://10.0.0.1:8000';
/** Heartbeats every second: node_ttl_ms / 4. */
const NODE_TTL_MS = 4000;

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

const spec = vllmSpec;
/** A poll: adapter `a` loaded and in the registry, a request running. */
const poll = (at: number): ReplicaSnapshot => snapshotWithA(at, 1);

/** The Redis store with a switch that fails admissions and pings, and hooks around `retake`. */
class HookedRedis extends RedisFleetStore {
  down = false;
  beforeRetake: (() => Promise<void>) | null = null;
  afterRetake: (() => Promise<void>) | null = null;

  override async acquire(lease: Lease) {
    if (this.down) throw new Error('shared store down');
    return super.acquire(lease);
  }

  override async ping() {
    if (this.down) throw new Error('shared store down');
    return super.ping();
  }

  override async retake(leases: readonly Lease[]) {
    await this.beforeRetake?.();
    const refused = await super.retake(leases);
    await this.afterRetake?.();
    return refused;
  }
}

function node(prefix: string, id: string) {
  const config = redis.config(prefix, { node_ttl_ms: NODE_TTL_MS, timeout: 2000 });
  const shared = new HookedRedis(config, id);
  return {
    id,
    shared,
    s: new FailoverFleetStore(shared, silentLogger, { probeMs: 200, logEveryMs: 60_000 }),
  };
}

const busy = async (prefix: string, url: string, adapter: string) =>
  Number((await redis.command(['HGET', `${prefix}busy:${url}`, adapter])) ?? 0);

describe('suspicion 2: the shared state emptied during a recovery, after its registration', () => {
  it("an idle node's leases are counted in the state that replaced the one its recovery registered in", async () => {
    const P = 'fr2:';
    await redis.command(['FLUSHALL']);
    const a = node(P, 'A');
    const b = node(P, 'B');
    try {
      for (const n of [a, b]) await n.s.upsertReplica(spec(U1));
      await a.s.applySnapshot(U1, poll(Date.now()));
      // A request runs on U1 from before the outage; A decides alone for one more.
      expect(await a.s.acquire({ id: 'LA1', url: U1, adapter: 'a', at: Date.now() })).toBe('loaded');
      a.shared.down = true;
      await a.s.acquire({ id: 'LA2', url: U1, adapter: 'a', at: Date.now() });
      expect(a.s.mode()).toBe('local');
      // A's recovery has registered U1 and re-takes its leases: the state is emptied just before
      // (the retake counts them nowhere, U1 unknown there), and B registers U1 again right after.
      // A's heartbeat finds the new state while its recovery still runs (A decides alone).
      let emptied = false;
      a.shared.beforeRetake = async () => {
        if (emptied) return;
        emptied = true;
        await redis.command(['FLUSHALL']);
      };
      a.shared.afterRetake = async () => {
        if (a.shared.afterRetake === null) return;
        a.shared.afterRetake = null;
        await b.s.upsertReplica(spec(U1));
        const epoch = b.shared.currentEpoch;
        await waitFor(() => a.shared.currentEpoch === epoch, 5000, "A's heartbeat on B's state");
      };
      a.shared.down = false;
      await waitFor(() => emptied && a.shared.afterRetake === null, 5000, "A's recovery");
      await waitFor(() => a.s.mode() === 'redis', 5000, 'A back');
      // A is idle from here on: both its requests still run on U1, and must be counted there
      // (else B, past the grace, may unload `a` under them).
      await waitFor(async () => (await busy(P, U1, 'a')) === 2, 5000).catch(() => undefined);
      expect(await busy(P, U1, 'a')).toBe(2);
    } finally {
      for (const n of [a, b]) await n.s.close();
    }
  }, 30_000);
});

describe("suspicion 3: the simulation's Redis refuses another node's lock under the same fence, as the scripts do", () => {
  // The scripts' `othernodes` (src/fleet/redis/scripts/prelude.ts) refuse a node's end of a lock
  // another node holds under its fence; the simulated Redis (dst/redis-model.ts) ended it, so the
  // simulation could never show a break the scripts fixed, nor one they cause.
  it("a load's end owed to a server that lost it does not end another node's load the new primary gave the same fence", async () => {
    const random = seededRandom(1);
    const m = new RedisModel(new Scheduler(random), {} as RedisConfig, random);
    await m.apply('upsert', [spec(U1), 0, 'epoch-1', 0]);
    await m.apply('heartbeat', ['n0', 0]);
    await m.apply('heartbeat', ['n1', 0]);
    // n0's load lock, lost in a switch to a replica that missed that one write.
    const f0 = (await m.apply('beginLoad', [U1, 'a', 10, 8000, 'n0', 4])) as number;
    m.switchPrimary(1);
    await waitFor(() => !m.down, 1000, 'the replica promoted');
    // The new primary's clock and counter give n1's load of the same adapter the same fence.
    const f1 = await m.apply('beginLoad', [U1, 'a', 10, 8000, 'n1', 4]);
    expect(f1).toBe(f0);
    // n0's end (its load failed), replayed to the new primary: not n1's, refused.
    expect(await m.apply('finishLoad', [U1, 'a', f0, false, 20, 'n0'])).toBe(false);
    expect((await m.store.views([U1], { name: 'a' }))[0]?.adapter?.state).toBe('loading');
    expect(await m.apply('finishLoad', [U1, 'a', f1, true, 30, 'n1'])).toBe(true);
  });
});

describe("suspicion 1: a predecessor's owed lock ends adopted during its successor's recovery", () => {
  // The shared side: the in-process store behind a switch that fails every call; `onPrune` runs
  // when a recovery prunes (after it sent the lock ends it owed).
  function fakeShared() {
    const inner = new MemoryFleetStore();
    const sh = {
      inner,
      down: false,
      onPrune: null as (() => void) | null,
      store: null as unknown as SharedStore,
    };
    const extra: Record<string, unknown> = {
      ping: async () => 'PONG',
      prune: async () => {
        sh.onPrune?.();
        return 0;
      },
    };
    sh.store = switchedShared(inner, extra, () => sh.down);
    return sh;
  }

  it("the end of a load the predecessor made alone reaches the shared store, though adopted after the recovery's replay", async () => {
    const clock = new VirtualClock();
    const sh = fakeShared();
    const options = (probeMs: number) => ({ probeMs, logEveryMs: 60_000, recoveryWaitMs: 200 });
    // The predecessor (a runtime replaced for a changed timeout) probes late: its own recovery does not run here.
    const pred = new FailoverFleetStore(sh.store, silentLogger, options(60_000), clock);
    await pred.upsertReplica(spec(U1));
    await pred.applySnapshot(U1, snapshotWithA(1));
    const fence = await pred.beginLoad(U1, 'b', 2, 4, 60_000);
    expect(fence).toBeGreaterThan(0);
    // Redis is cut off: the load's end (it succeeded) stays owed.
    sh.down = true;
    expect(await pred.finishLoad(U1, 'b', fence!, true, 3)).toBe(false);
    const next = new FailoverFleetStore(sh.store, silentLogger, options(1000), clock);
    await next.succeed(pred);
    expect(next.mode()).toBe('local');
    sh.down = false;
    // The predecessor drains while its successor's recovery runs, after that recovery sent its owed ends.
    let adopted = false;
    sh.onPrune = () => {
      if (adopted) return;
      adopted = true;
      void next.adopt(pred);
    };
    await clock.run(clock.now() + 1000);
    expect(adopted).toBe(true);
    expect(next.mode()).toBe('redis');
    await pred.close();
    // The load ended on the replica: Redis must not read it `loading` until the lock's TTL. A
    // replayed end marks nothing (dst seed 1534246): the lock ends, the next poll reads the replica.
    expect((await sh.inner.views([U1], { name: 'b' }))[0]?.adapter?.state).toBeUndefined();
  });
});
