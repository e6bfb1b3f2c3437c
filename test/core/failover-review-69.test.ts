/**
 * What a runtime replaced for a changed `redis` record hands its successor of the replicas, over a
 * real redis-server (src/fleet/redis/failover-store.ts `succeed`, src/runtime.ts `carrySpends`).
 * The successor's local copy knows its predecessor's replicas (a stale worker's configuration still
 * decides there, seed 3044962), but a replica the node left is no replica it routes to: a reclaim or
 * a read finding the state without it registers only those (recovering-store.ts `routesTo`,
 * test/core/views-forgotten-redis.test.ts), and a copy must not make the successor claim one.
 *
 * Two nodes route one plugin's configuration; both move from OLD to NEW, node b's forget check
 * forgets OLD in Redis, and node a's local copy still holds it, unclaimed (its own forget check a
 * minute apart). Then node a's `redis` record changes: same state (another timeout), or another
 * prefix. The lapse of a superseded configuration is at least 60 s of the node's monotonic time:
 * each node's clock is the wall clock with its monotonic line moved ahead by the test (`skip`).
 */
import { skippingClock } from './helpers';
import { parseRouterConfig } from '../../src/config/parse';
import type { RedisConfig } from '../../src/config/redis-schema';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { IdleReplicaApi } from '../helpers/idle-replicas';

const OLD = ['http://10.4.0.1:8000', 'http://10.4.0.2:8000'];
const NEW = ['http://10.4.1.1:8000', 'http://10.4.1.2:8000'];

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Node a and node b on `prefix`, both moved from OLD to NEW, OLD forgotten in Redis and kept in node a's local copy. */
async function movedFleet(prefix: string) {
  const record = (p: string, timeout: number): RedisConfig => redis.config(p, { node_ttl_ms: 500, timeout });
  const api = new IdleReplicaApi(() => Date.now());
  const config = (urls: readonly string[], redisConfig: RedisConfig) =>
    parseRouterConfig({
      base_model: 'base',
      replicas: urls.map((url) => ({ url })),
      adapter_path_template: '/adapters/{name}',
      lease_max_age_ms: 1000,
      redis: redisConfig,
    });
  const node = (retainEveryMs: number, redisConfig: RedisConfig, leasePrefix?: string) => {
    const clock = skippingClock();
    const rt = new FleetRuntime({
      clock,
      api,
      log: silentLogger,
      seed: 1,
      redis: redisConfig,
      leasePrefix,
      poller: { intervalMs: 100, jitter: 0, timeoutMs: 1000 },
      retainEveryMs,
    });
    return { clock, rt };
  };
  const a = node(60_000, record(prefix, 2000), 'node-a');
  const b = node(200, record(prefix, 2000));
  const specs = async (p = prefix) => ((await redis.command(['HKEYS', `${p}spec`])) as string[]).sort();
  const forgotten = async () =>
    ((await redis.command(['LRANGE', `${prefix}events`, '0', '-1'])) as string[]).filter((e) =>
      e.includes('replica-forgotten'),
    );
  new RouterService(config(OLD, record(prefix, 2000)), a.rt, 'plugin-1');
  new RouterService(config(NEW, record(prefix, 2000)), b.rt, 'plugin-1');
  let rounds = 0;
  a.rt.poller.addRoundListener(() => rounds++);
  await waitFor(() => OLD.every((u) => a.rt.poller.lastLoad.has(u)), 10_000, 'node a polls the old fleet');
  const after = rounds;
  await waitFor(() => rounds > after, 10_000, "node a's first round ends");
  // Node a takes the new configuration; the old one lapses at once, and node a's next round tells
  // both stores it routes to NEW only (its claim on OLD dropped in Redis and in its local copy).
  new RouterService(config(NEW, record(prefix, 2000)), a.rt, 'plugin-1');
  a.clock.skip(61_000);
  await waitFor(async () => (await forgotten()).length === OLD.length, 10_000, 'Redis forgets the old fleet');
  expect(await specs()).toEqual([...NEW].sort());
  const local = (await a.rt.store.localReplicaSpecs!()).map((s) => s.url);
  expect(local).toEqual(expect.arrayContaining(OLD));
  /** Node a's `redis` record changes to `to`: its successor, with the new configuration, as Kong's next instance. */
  const changeRecord = async (to: RedisConfig, retainEveryMs = 60_000) => {
    const next = node(retainEveryMs, to, 'node-a');
    void a.rt.retire(next.rt);
    new RouterService(config(NEW, to), next.rt, 'plugin-1');
    // The hand-over's registrations and copies are done (a few store calls).
    await sleep(300);
    return next;
  };
  return { a, b, api, record, specs, changeRecord, stop: () => (a.rt.stop(), b.rt.stop()) };
}

describe("a same-state successor's copy of its predecessor's replicas", () => {
  it('a read of a replica the state forgot registers no departed replica again', async () => {
    const { record, specs, changeRecord, api, stop } = await movedFleet('r69-views:');
    const next = await changeRecord(record('r69-views:', 2500));
    try {
      const gone = Date.now();
      // The status page or a lapsed configuration's request asking of every replica ever listed.
      const views = await next.rt.store.views([...OLD, ...NEW]);
      expect(views.map((v) => v.url).sort()).toEqual([...NEW].sort());
      expect(await specs()).toEqual([...NEW].sort());
      await sleep(1000);
      expect([...api.polledIn(gone + 300)].sort()).toEqual([...NEW].sort());
    } finally {
      stop();
      next.rt.stop();
    }
  }, 30_000);

  it("a reclaim after an emptied state registers only the replicas this node routes to, not its predecessor's copy's", async () => {
    const { b, record, specs, changeRecord, stop } = await movedFleet('r69-flush:');
    const next = await changeRecord(record('r69-flush:', 2500));
    try {
      b.rt.stop();
      await redis.command(['FLUSHALL']);
      await waitFor(
        async () => {
          const now = await specs();
          return NEW.every((u) => now.includes(u));
        },
        10_000,
        "node a's heartbeat finds the state emptied and registers its replicas again",
      );
      await sleep(500);
      expect(await specs()).toEqual([...NEW].sort());
    } finally {
      stop();
      next.rt.stop();
    }
  }, 30_000);
});

describe("a same-state successor's copy of a replica the node left", () => {
  // Not the successor's: the current runtime's local copy is what dst/process-audit.ts walks for a
  // replica due forgotten, and what the successor's first poll round lists before any answer.
  it("is not in the successor's local copy, nor registered anywhere", async () => {
    const { record, specs, changeRecord, stop } = await movedFleet('r69-forget:');
    const next = await changeRecord(record('r69-forget:', 2500), 200);
    try {
      const local = async () => (await next.rt.store.localReplicaSpecs!()).map((s) => s.url).sort();
      expect(await local()).toEqual([...NEW].sort());
      // Its forget checks (every 200 ms) and polls go on: nothing brings it back.
      await sleep(1500);
      expect(await local()).toEqual([...NEW].sort());
      expect(await specs()).toEqual([...NEW].sort());
    } finally {
      stop();
      next.rt.stop();
    }
  }, 30_000);
});

describe("the successor's copy beside its own registration", () => {
  // The copy read the successor's copy, then wrote: a registration of the successor's own (a newer
  // configuration's settings for the same replica) landing in between was overwritten by the
  // predecessor's older spec, and the node decided alone on the old settings.
  it.each([0, 1, 2, 3, 4, 5, 6, 7, 8])(
    'a registration %i ticks into the hand-over keeps its spec',
    async (ticks) => {
      const prefix = `r69-race-${ticks}:`;
      const U = 'http://10.4.2.1:8000';
      const store = (timeout: number) =>
        new FailoverFleetStore(
          new RedisFleetStore(redis.config(prefix, { timeout }), 'node-a', silentLogger),
          silentLogger,
        );
      const pred = store(2000);
      const next = store(2500);
      try {
        await pred.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
        const succeeded = next.succeed(pred);
        for (let i = 0; i < ticks; i++) await Promise.resolve();
        await next.upsertReplica({ url: U, backend: 'vllm', priority: 1 });
        await succeeded;
        expect((await next.local.replicaSpecs()).map((s) => [s.url, s.priority])).toEqual([[U, 1]]);
      } finally {
        await pred.close();
        await next.close();
      }
    },
  );
});

describe('a record change to other state carries the spends, not the old fleet', () => {
  // FleetRuntime.carrySpends registered on the new state every replica the old state listed before
  // carrying the spends (the registration dates them by the epoch): another node's replicas and one
  // this node had left too, each claimed in this node's name there. Every node on the new state
  // polled them, and the node's first retain there is RETAIN_EVERY_MS away, then the grace.
  it("registers on the new state only the replicas this node's configurations route to", async () => {
    const record = (p: string): RedisConfig => redis.config(p, { node_ttl_ms: 500, timeout: 2000 });
    const [P1, P2] = ['r69-carry-1:', 'r69-carry-2:'];
    const MINE = 'http://10.4.3.1:8000';
    const LEFT = 'http://10.4.3.2:8000';
    const THEIRS = 'http://10.4.3.3:8000';
    const api = new IdleReplicaApi(() => Date.now());
    const config = (urls: readonly string[], redisConfig: RedisConfig) =>
      parseRouterConfig({
        base_model: 'base',
        replicas: urls.map((url) => ({ url })),
        // The replica node a leaves stays registered on the old state through the test.
        lease_max_age_ms: 600_000,
        redis: redisConfig,
      });
    const node = (redisConfig: RedisConfig, leasePrefix: string) => {
      const clock = skippingClock();
      const rt = new FleetRuntime({
        clock,
        api,
        log: silentLogger,
        seed: 1,
        redis: redisConfig,
        leasePrefix,
        poller: { intervalMs: 100, jitter: 0, timeoutMs: 1000 },
        retainEveryMs: 0,
      });
      return { clock, rt };
    };
    const specs = async (p: string) => ((await redis.command(['HKEYS', `${p}spec`])) as string[]).sort();
    const a = node(record(P1), 'node-a');
    const b = node(record(P1), 'node-b');
    const next = node(record(P2), 'node-a');
    try {
      new RouterService(config([LEFT], record(P1)), a.rt, 'plugin-1');
      new RouterService(config([THEIRS], record(P1)), b.rt, 'plugin-2');
      await waitFor(() => a.rt.poller.lastLoad.has(LEFT), 10_000, 'node a polls its replica');
      // Node a moves to MINE; the old configuration lapses, and its next round drops its claim on LEFT.
      new RouterService(config([MINE], record(P1)), a.rt, 'plugin-1');
      // Past the lapse grace (the longest lease_max_age_ms), on node a's monotonic line only.
      a.clock.skip(601_000);
      await waitFor(
        () => !a.rt.routesTo(LEFT) && a.rt.poller.lastLoad.has(MINE),
        10_000,
        'node a routes to MINE only',
      );
      await sleep(300);
      expect(await specs(P1)).toEqual([MINE, LEFT, THEIRS].sort());
      // Node a's record changes to another prefix: the new runtime, Kong's next instance on it.
      new RouterService(config([MINE], record(P2)), next.rt, 'plugin-1');
      void a.rt.retire(next.rt);
      await sleep(500);
      expect(await specs(P2)).toEqual([MINE]);
    } finally {
      a.rt.stop();
      b.rt.stop();
      next.rt.stop();
    }
  }, 30_000);
});
