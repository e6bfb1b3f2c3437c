/**
 * What a process keeps of a replica that left (dst/replica-records.ts walks a runtime's records for
 * it): once `forgetReplica` (src/runtime-departures.ts) dropped the replica, nothing names it but
 * the bounded records listed in BOUNDED. Each case leaves one kind of record the simulation found
 * kept past the forget (dst/process-audit.ts: seeds 3120491, 3120343, 3120006, 3123801), then forgets the
 * replica and walks the runtime for it.
 */
import { randomBytes } from 'node:crypto';
import { monotonic, VirtualClock } from '../../src/clock';
import { UNSEEN_HOLD_MS } from '../../src/adapters/replica-word';
import { silentLogger } from '../../src/log';
import { names, recordsNaming } from '../../dst/replica-records';
import { FleetRuntime } from '../../src/runtime';
import { forgetReplica } from '../../src/runtime-departures';
import { IdleReplicaApi } from '../helpers/idle-replicas';
import { useRedisStores } from '../helpers/redis-stores';

const U1 = 'http://10.0.0.1:8000';
const U2 = 'http://10.0.0.2:8000';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function runtime(): FleetRuntime {
  const clock = new VirtualClock();
  return new FleetRuntime({ clock, api: new IdleReplicaApi(() => clock.now()), log: silentLogger, seed: 1 });
}

describe('names', () => {
  it('a URL whole, in a composite key or a label set, not the start of a longer address', () => {
    expect(names(U1, U1)).toBe(true);
    expect(names(`${U1}\u0000sql`, U1)).toBe(true);
    expect(names(`replica:${U1},adapter:sql`, U1)).toBe(true);
    expect(names(`${U1}/v1/models`, U1)).toBe(true);
    expect(names('http://10.0.0.1:80001', 'http://10.0.0.1:8000')).toBe(false);
    expect(names('http://10.0.0.10:8000', 'http://10.0.0.1')).toBe(false);
    expect(names('http://10.0.0.1:9000', 'http://10.0.0.1')).toBe(false);
  });
});

describe('recordsNaming, without Redis', () => {
  it('finds a record the runtime keeps of a replica (the walk reaches into its parts)', () => {
    const rt = runtime();
    rt.poller.maxModelLen.set(U1, 4096);
    rt.manager.backoff.fail(U1, 'sql', { backoffBaseMs: 1000, backoffMaxMs: 1000 }, 'load failed');
    expect(recordsNaming(rt, U1)).toEqual(
      expect.arrayContaining([expect.stringContaining('maxModelLen'), expect.stringContaining('backoff')]),
    );
    expect(recordsNaming(rt, U2)).toEqual([]);
  });

  it("a failed load's backoff (seed 3120491): gone with the replica, the other replica's kept", () => {
    const rt = runtime();
    const policy = { backoffBaseMs: 1000, backoffMaxMs: 1000 };
    rt.manager.backoff.fail(U1, 'sql', policy, 'load failed');
    rt.manager.backoff.fail(U2, 'sql', policy, 'load failed');
    rt.manager.backoff.fail(U1, 'chat', policy, 'load failed');
    expect(forgetReplica(rt, U1)).toBe(true);
    expect(recordsNaming(rt, U1)).toEqual([]);
    expect(rt.manager.backoff.holdsOff(U2, 'sql')).toBe(true);
  });

  it('an unseen hold past its time (seed 3120343): gone with the replica; a live one keeps it a round', () => {
    const rt = runtime();
    const now = monotonic(rt.clock);
    rt.manager.replicaWord.holdUnseen(U1, 'sql', now - UNSEEN_HOLD_MS - 1);
    expect(forgetReplica(rt, U1)).toBe(true);
    expect(recordsNaming(rt, U1)).toEqual([]);
    // Within its hold, a request another router sent may still run there: tried again next round.
    rt.manager.replicaWord.holdUnseen(U2, 'sql', now);
    expect(forgetReplica(rt, U2)).toBe(false);
  });

  it("an adapter's prefetch demand (seed 3123801): no longer names the replica, still the other", () => {
    const rt = runtime();
    rt.prefetcher.demand.observe({ name: 'team' }, [U1, U2], 0);
    expect(forgetReplica(rt, U1)).toBe(true);
    expect(recordsNaming(rt, U1)).toEqual([]);
    expect(rt.prefetcher.demand.snapshot(0)[0]!.demand.urls).toEqual([U2]);
  });
});

describe('recordsNaming, with Redis', () => {
  const env = useRedisStores();

  it("a lock's end owed to a server that may have missed it (seed 3120006): kept within its TTL, gone past it", async () => {
    const prefix = `rr${randomBytes(4).toString('hex')}:`;
    const rt = new FleetRuntime({ redis: env.redis.config(prefix), log: silentLogger, seed: 1 });
    try {
      await rt.store.upsertReplica({ url: U1, backend: 'vllm', priority: 0 });
      // A TTL of 1 s: the check within it comes at once, even on a loaded machine (at 30 ms a
      // stalled event loop passed it first), and the one past it after a sleep of more.
      const fence = await rt.store.beginLoad(U1, 'sql', rt.clock.now(), 4, 1_000);
      expect(fence).not.toBeNull();
      await rt.store.finishLoad(U1, 'sql', fence!, true, rt.clock.now());
      // Within the lock's TTL a server restored from an older copy may still hold it: kept.
      expect(forgetReplica(rt, U1)).toBe(false);
      // This node stops claiming it; past the grace, the store forgets it, then the process does.
      expect(await rt.store.retainReplicas([], 60_000)).toEqual([]);
      await sleep(1_100);
      expect(await rt.store.retainReplicas([], 1)).toEqual([U1]);
      expect(forgetReplica(rt, U1)).toBe(true);
      expect(recordsNaming(rt, U1)).toEqual([]);
    } finally {
      rt.poller.stop();
      await rt.store.close?.();
    }
  }, 20_000);
});
