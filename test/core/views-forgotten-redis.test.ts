/**
 * A read of a replica the shared state forgot never registers it again, over a real redis-server
 * (src/fleet/redis/failover-store.ts `views`, `viewsAndLease`; recovering-store.ts `reclaim`). Two
 * nodes route one plugin's configuration; both move to a new fleet, node b's forget check forgets
 * the old one in Redis, and node a's local copy still holds it (its own forget check a minute
 * apart). Node a then asks of the old fleet by another way than its prefetch (which asks only of
 * what it routes to since seeds 2892202, 2901338): the status page, the metrics' per-replica
 * gauges (a list read before the forget, views after), or a router's request through a lapsed
 * configuration. The short answer read as a state emptied, and node a registered its local copy's
 * replicas again, the old fleet with them: polled by every node until the next forget.
 *
 * An emptied state is told by the epoch; a reclaim after one registers only the replicas this node
 * routes to. A replica this node routes to that the state lacks (a restore from an older copy of
 * the same epoch, or one forgotten while this node was silent past node_ttl_ms) is still
 * registered again by the read that finds it missing.
 *
 * The lapse of a superseded configuration is at least 60 s of the node's monotonic time: each
 * node's clock is the wall clock with its monotonic line moved ahead by the test (`skip`); the
 * store's grace is Redis's own time (`node_ttl_ms` 500, `lease_max_age_ms` 1000), waited out.
 */
import { skippingClock } from './helpers';
import { parseRouterConfig } from '../../src/config/parse';
import type { RedisConfig } from '../../src/config/redis-schema';
import type { FleetStore } from '../../src/fleet/store';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { IdleReplicaApi } from '../helpers/idle-replicas';

const OLD = ['http://10.3.0.1:8000', 'http://10.3.0.2:8000'];
const NEW = ['http://10.3.1.1:8000', 'http://10.3.1.2:8000'];

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.close();
});

/**
 * Two nodes on `prefix`, both moved from OLD to NEW, the old fleet forgotten in Redis (node b's
 * forget check, each 200 ms) and still in node a's local copy (its forget check a minute apart),
 * which no longer claims it.
 */
async function movedFleet(prefix: string) {
  const redisConfig: RedisConfig = redis.config(prefix, { node_ttl_ms: 500, timeout: 2000 });
  const api = new IdleReplicaApi(() => Date.now());
  const config = (urls: readonly string[]) =>
    parseRouterConfig({
      base_model: 'base',
      replicas: urls.map((url) => ({ url })),
      adapter_path_template: '/adapters/{name}',
      lease_max_age_ms: 1000,
      redis: redisConfig,
    });
  const node = (retainEveryMs: number) => {
    const clock = skippingClock();
    const rt = new FleetRuntime({
      clock,
      api,
      log: silentLogger,
      seed: 1,
      redis: redisConfig,
      poller: { intervalMs: 100, jitter: 0, timeoutMs: 1000 },
      retainEveryMs,
    });
    return { clock, rt };
  };
  const a = node(60_000);
  const b = node(200);
  const specs = async () => ((await redis.command(['HKEYS', `${prefix}spec`])) as string[]).sort();
  const forgotten = async () =>
    ((await redis.command(['LRANGE', `${prefix}events`, '0', '-1'])) as string[]).filter((e) =>
      e.includes('replica-forgotten'),
    );
  new RouterService(config(OLD), a.rt, 'plugin-1');
  new RouterService(config(NEW), b.rt, 'plugin-1');
  let rounds = 0;
  a.rt.poller.addRoundListener(() => rounds++);
  await waitFor(() => OLD.every((u) => a.rt.poller.lastLoad.has(u)), 10_000, 'node a polls the old fleet');
  // Its first round over: that round takes the registration's claims as told (runtime-departures.ts).
  const after = rounds;
  await waitFor(() => rounds > after, 10_000, "node a's first round ends");
  // Node a takes the new configuration; the old one lapses at once, and node a's next round tells
  // both stores it routes to NEW only (its claim on OLD dropped in Redis and in its local copy).
  new RouterService(config(NEW), a.rt, 'plugin-1');
  a.clock.skip(61_000);
  await waitFor(async () => (await forgotten()).length === OLD.length, 10_000, 'Redis forgets the old fleet');
  expect(await specs()).toEqual([...NEW].sort());
  // Node a's local copy still lists it (its own forget check is a minute away).
  const local = (
    await (
      a.rt.store as unknown as FleetStore & { localReplicaSpecs(): Promise<{ url: string }[]> }
    ).localReplicaSpecs()
  ).map((s) => s.url);
  expect(local).toEqual(expect.arrayContaining(OLD));
  return { a, b, api, specs, stop: () => (a.rt.stop(), b.rt.stop()) };
}

it.each(['views', 'viewsAndLease'] as const)(
  '%s of a replica the shared state forgot registers no departed replica again',
  async (read) => {
    const { a, api, specs, stop } = await movedFleet(`forgot-${read}:`);
    try {
      const gone = Date.now();
      // What the status page or the metrics' gauges ask (a list read before the forget), or a
      // request through a lapsed configuration (a worker's instance Kong had not dropped).
      const urls = [...OLD, ...NEW];
      const views =
        read === 'views'
          ? await a.rt.store.views(urls)
          : (
              await a.rt.store.viewsAndLease!(urls, undefined, {
                id: 'lease-1',
                url: NEW[0]!,
                adapter: null,
                at: Date.now(),
              })
            ).views;
      if (read === 'viewsAndLease') await a.rt.store.release('lease-1', Date.now());
      // The state knows NEW only, and says so.
      expect(views.map((v) => v.url).sort()).toEqual([...NEW].sort());
      expect(await specs()).toEqual([...NEW].sort());
      // Nobody polls the old fleet again (counted from the replicas' calls).
      await new Promise((r) => setTimeout(r, 1000));
      expect([...api.polledIn(gone + 300)].sort()).toEqual([...NEW].sort());
    } finally {
      stop();
    }
  },
  30_000,
);

it("a reclaim after an emptied state registers only the replicas this node routes to, not its local copy's", async () => {
  const { b, specs, stop } = await movedFleet('forgot-flush:');
  try {
    // Node b gone, so that the registration after the FLUSHALL is node a's reclaim alone.
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
    // Its reclaim's registration is one pass over its list: what it wrote is there by now.
    await new Promise((r) => setTimeout(r, 500));
    expect(await specs()).toEqual([...NEW].sort());
  } finally {
    stop();
  }
}, 30_000);

it('a replica this node routes to, gone from the state with no emptying told, is registered again by the read that finds it missing', async () => {
  const { a, specs, stop } = await movedFleet('forgot-own:');
  try {
    // As a restore from an older copy of the same epoch would leave it (or a forget while this
    // node was silent past node_ttl_ms): the spec gone, the epoch the same.
    await redis.command(['HDEL', 'forgot-own:spec', NEW[1]!]);
    const views = await a.rt.store.views(NEW);
    expect(views.map((v) => v.url).sort()).toEqual([...NEW].sort());
    expect(await specs()).toEqual([...NEW].sort());
  } finally {
    stop();
  }
}, 30_000);
