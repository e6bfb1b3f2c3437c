/**
 * A request whose lease the store reclaimed by age while it still ran (sent into a replica that
 * hangs: no poll finds it running, nothing renews its lease) still counts against a class bounded by
 * `max_in_flight` on its node, on top of the other nodes' requests in the view, over a real
 * redis-server (src/router/in-flight-here.ts; the views count the reading node's leases apart,
 * ReplicaView.ownInFlight). Before, the view counted only the other node's request, and the node's
 * own open lease only kept the count from falling below the node's own: a third batch request went
 * at `max_in_flight: 2` (docs/reliability/explored-schedules.md, seed 3169793).
 */
import type { RedisConfig } from '../../src/config/redis-schema';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { FleetStore } from '../../src/fleet/store';
import type { ReplicaView } from '../../src/fleet/types';
import { LeaseHandle } from '../../src/lease';
import { silentLogger } from '../../src/log';
import { inFlightHere } from '../../src/router/in-flight-here';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { sharedNode } from '../helpers/shared-node';

const U = 'http://10.7.0.1:8000';
const SPEC = { url: U, backend: 'vllm' as const, priority: 0 };
/** The store's reclaim age here: a lease stamped at 1 (Redis time) is far past it. */
const MAX_AGE_MS = 60_000;

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.close();
});

const node = (config: RedisConfig) => sharedNode(config, SPEC);

/** What a decision of a bounded class on `rt` judges on `U` (placement.ts): its views read now. */
async function judged(rt: FleetRuntime): Promise<{ view: ReplicaView; inFlight: number }> {
  const mark = LeaseHandle.viewsMark();
  const view = (await rt.store.views([U]))[0]!;
  return { view, inFlight: inFlightHere(rt, U, view.inFlight, undefined, mark, view.ownInFlight) };
}

describe('a lease reclaimed by age while its request runs (real redis-server)', () => {
  it("is still counted on its node, on top of another node's request in the view: a third at max_in_flight 2 waits", async () => {
    const prefix = 'own-reclaimed:';
    const config = redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 });
    const a = await node(config);
    const b = await node(config);
    try {
      // Node a's batch request, sent into a hang: its lease, stamped long ago, is reclaimed by age.
      const hung = await LeaseHandle.take(a, U, null);
      await redis.command(['ZADD', `${prefix}lease-at`, 'XX', '1', hung.lease.id]);
      const reclaimed = await b.store.expireLeases(Date.now(), MAX_AGE_MS);
      expect(reclaimed.map((l) => l.id)).toEqual([hung.lease.id]);
      // Node b's batch request in flight there, in every view.
      const other = await LeaseHandle.take(b, U, null);

      const { view, inFlight } = await judged(a);
      // Both requests: a third batch request of node a at max_in_flight 2 waits.
      expect(inFlight).toBe(2);
      // The view counts node b's request only; node a's is still open in node a's process.
      expect(view).toMatchObject({ inFlight: 1, ownInFlight: 0 });
      expect(LeaseHandle.openOn(a, U)).toBe(1);
      // Node b's own view: node a's request is lost to it (the store reclaimed it, as documented).
      expect((await judged(b)).inFlight).toBe(1);

      // Given back (its log phase came): node a counts node b's request alone.
      await expect(hung.lease.release(504)).resolves.toBeUndefined();
      expect((await judged(a)).inFlight).toBe(1);
      await other.lease.release(200);
      expect((await judged(a)).inFlight).toBe(0);
      expect((await judged(b)).inFlight).toBe(0);
    } finally {
      for (const rt of [a, b]) await rt.store.close?.();
    }
  });

  it("counts a node's leases the view shows once: neither its own again nor as another node's", async () => {
    const prefix = 'own-counted:';
    const config = redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 });
    const a = await node(config);
    const b = await node(config);
    try {
      const mine = [await LeaseHandle.take(a, U, null), await LeaseHandle.take(a, U, 'x')];
      const theirs = await LeaseHandle.take(b, U, null);
      const { view, inFlight } = await judged(a);
      expect(view).toMatchObject({ inFlight: 3, ownInFlight: 2 });
      expect(inFlight).toBe(3);
      expect((await judged(b)).view.ownInFlight).toBe(1);
      // The request's own guessed lease, in the views now, is not counted against it.
      const view2 = (await a.store.views([U]))[0]!;
      expect(
        inFlightHere(a, U, view2.inFlight, mine[0]!.lease, LeaseHandle.viewsMark(), view2.ownInFlight),
      ).toBe(2);
      for (const h of [...mine, theirs]) await h.lease.release(200);
      expect((await judged(a)).view).toMatchObject({ inFlight: 0, ownInFlight: 0 });
    } finally {
      for (const rt of [a, b]) await rt.store.close?.();
    }
  });
});

/**
 * Both stores count a replica's leases per node alike (the node each lease id names): taken,
 * taken again, reclaimed by age, released; the simulation's Redis is the in-process store, read with
 * the node named per call (dst/redis-model.ts).
 */
describe('the views count the reading node’s leases apart, in both stores', () => {
  /** `old`: taken long ago by the caller's clock (the in-process store ages a lease by it). */
  const lease = (id: string, adapter: string | null = null, old = false) => ({
    id,
    url: U,
    adapter,
    at: old ? 1 : Date.now(),
  });
  type Side = {
    store: FleetStore;
    read: (node: string) => Promise<ReplicaView>;
    /** Stamps the leases long ago (Redis ages them on its own clock), for the expiry to reclaim. */
    age: (ids: string[]) => Promise<void>;
    close: () => Promise<void>;
  };
  const cases: [string, () => Promise<Side>][] = [
    [
      'memory',
      async () => {
        const store = new MemoryFleetStore();
        await store.upsertReplica(SPEC);
        return {
          store,
          read: async (n) => (await store.views([U], undefined, false, n))[0]!,
          age: async () => undefined,
          close: async () => undefined,
        };
      },
    ],
    [
      'redis',
      async () => {
        const prefix = `own-both-${Math.random().toString(36).slice(2, 8)}:`;
        const config = redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 });
        const stores = new Map(
          ['na', 'nb', 'nc'].map((n) => [n, new RedisFleetStore(config, n, silentLogger)]),
        );
        const store = stores.get('na')!;
        await store.upsertReplica(SPEC);
        return {
          store,
          read: async (n) => (await stores.get(n)!.views([U]))[0]!,
          age: async (ids) => {
            for (const id of ids) await redis.command(['ZADD', `${prefix}lease-at`, 'XX', '1', id]);
          },
          close: async () => {
            for (const s of stores.values()) await s.close();
          },
        };
      },
    ],
  ];
  it.each(cases)('%s', async (_name, make) => {
    const { store, read, age, close } = await make();
    try {
      await store.acquire(lease('na-0'));
      await store.acquire(lease('na-1', 'x', true));
      await store.acquire(lease('nb-0', 'x', true));
      // Taken again (a retake): counted once.
      await store.acquire(lease('na-1', 'x', true));
      expect(await read('na')).toMatchObject({ inFlight: 3, ownInFlight: 2 });
      expect(await read('nb')).toMatchObject({ inFlight: 3, ownInFlight: 1 });
      expect(await read('nc')).toMatchObject({ inFlight: 3, ownInFlight: 0 });
      // The views with a lease: the lease's node's, read before it is taken.
      const { views } = await store.viewsAndLease!([U], undefined, lease('nb-1'));
      expect(views[0]).toMatchObject({ inFlight: 3, ownInFlight: 1 });
      await store.release('na-0', 2);
      expect(await read('na')).toMatchObject({ inFlight: 3, ownInFlight: 1 });
      expect(await read('nb')).toMatchObject({ inFlight: 3, ownInFlight: 2 });
      // Reclaimed by age: the node's count falls with the replica's.
      await age(['na-1', 'nb-0']);
      const gone = await store.expireLeases(Date.now(), MAX_AGE_MS);
      expect(gone.map((l) => l.id).sort()).toEqual(['na-1', 'nb-0']);
      expect(await read('na')).toMatchObject({ inFlight: 1, ownInFlight: 0 });
      expect(await read('nb')).toMatchObject({ inFlight: 1, ownInFlight: 1 });
      await store.release('nb-1', 3);
      expect(await read('nb')).toMatchObject({ inFlight: 0, ownInFlight: 0 });
    } finally {
      await close();
    }
  });
});
