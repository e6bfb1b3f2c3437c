/**
 * Replicas that leave the fleet, end to end over a real redis-server: two nodes (runtimes with
 * their own node ids) route one plugin's configuration; the fleet's addresses change, and one node
 * takes the new configuration before the other (a rolling change). The old replicas stay, and are
 * polled, while the other node still routes to them; once neither does, past the lapse and the
 * store's grace, Redis keeps nothing of them, no node polls them (counted from the replica calls
 * made, not the router's counters) and neither process keeps its readings of them.
 *
 * The lapse of a superseded configuration is at least 60 s of the node's monotonic time
 * (src/fleet/node-claim.ts MIN_LAPSE_MS): each node's clock is the wall clock with its monotonic
 * line moved ahead by the test (`skip`), so the lapse passes at once; the store's grace is Redis's
 * own time (`node_ttl_ms` 500 and `lease_max_age_ms` 1000: about 1 s), waited out for real.
 *
 * A prefetch tick on demand a request through the old configuration left (its replicas) asks the
 * store only of the replicas the node still routes to: asked of one the store forgot, the failover
 * store read the short answer as a state emptied and registered its local copy's replicas again
 * (the simulation's seeds 2892202 and 2901338).
 */
import { skippingClock } from './helpers';
import { parseRouterConfig } from '../../src/config/parse';
import type { RedisConfig } from '../../src/config/redis-schema';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { IdleReplicaApi } from '../helpers/idle-replicas';

const OLD = ['http://10.2.0.1:8000', 'http://10.2.0.2:8000'];
const NEW = ['http://10.2.1.1:8000', 'http://10.2.1.2:8000'];
const PREFIX = 'departed:';

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.close();
});

it('a replica two nodes left goes from Redis and from both processes; kept while one still routes to it', async () => {
  const redisConfig: RedisConfig = redis.config(PREFIX, { node_ttl_ms: 500, timeout: 2000 });
  const api = new IdleReplicaApi(() => Date.now());
  const config = (urls: readonly string[]) =>
    parseRouterConfig({
      base_model: 'base',
      replicas: urls.map((url) => ({ url })),
      lease_max_age_ms: 1000,
      redis: redisConfig,
    });
  const node = () => {
    const clock = skippingClock();
    const rt = new FleetRuntime({
      clock,
      api,
      log: silentLogger,
      seed: 1,
      redis: redisConfig,
      poller: { intervalMs: 100, jitter: 0, timeoutMs: 1000 },
      // Its forget check each 200 ms (30 s by default: RETAIN_EVERY_MS).
      retainEveryMs: 200,
    });
    return { clock, rt };
  };
  const a = node();
  const b = node();
  const keysNaming = async (urls: readonly string[]) => {
    const keys = (await redis.command(['KEYS', `${PREFIX}*`])) as string[];
    const specs = (await redis.command(['HKEYS', `${PREFIX}spec`])) as string[];
    return [...keys, ...specs].filter((k) => urls.some((u) => k.includes(u)));
  };
  try {
    // Both nodes route the old fleet (one plugin, Kong's `__plugin_id` the same on both).
    new RouterService(config(OLD), a.rt, 'plugin-1');
    new RouterService(config(OLD), b.rt, 'plugin-1');
    await waitFor(() => OLD.every((u) => a.rt.poller.lastLoad.has(u)), 10_000, 'node a polls the old fleet');

    // Node a takes the new configuration; its old one lapses at once (its monotonic line skips
    // the 60 s), and Redis's grace passes. Node b still routes the old fleet: kept, and polled.
    new RouterService(config(NEW), a.rt, 'plugin-1');
    a.clock.skip(61_000);
    await waitFor(() => NEW.every((u) => a.rt.poller.lastLoad.has(u)), 10_000, 'node a polls the new fleet');
    await new Promise((r) => setTimeout(r, 2000));
    const kept = Date.now();
    await new Promise((r) => setTimeout(r, 500));
    expect([...api.polledIn(kept - 1)].sort()).toEqual([...OLD, ...NEW].sort());
    expect((await redis.command(['HKEYS', `${PREFIX}spec`])) as string[]).toEqual(
      expect.arrayContaining([...OLD, ...NEW]),
    );

    // Node b takes it too: once its old configuration lapsed and the grace passed, Redis forgets
    // the old fleet, nobody polls it, and neither process keeps its readings.
    new RouterService(config(NEW), b.rt, 'plugin-1');
    b.clock.skip(61_000);
    await waitFor(async () => (await keysNaming(OLD)).length === 0, 10_000, 'Redis forgets the old fleet');
    await waitFor(
      () => OLD.every((u) => !a.rt.poller.lastLoad.has(u) && !b.rt.poller.lastLoad.has(u)),
      5000,
      'both nodes drop their readings of the old fleet',
    );
    const gone = Date.now();
    await new Promise((r) => setTimeout(r, 1000));
    expect([...api.polledIn(gone - 1)].sort()).toEqual([...NEW].sort());
    expect(await keysNaming(OLD)).toEqual([]);
    expect(((await redis.command(['HKEYS', `${PREFIX}spec`])) as string[]).sort()).toEqual([...NEW].sort());
    // The event list says so, once per replica.
    const events = ((await redis.command(['LRANGE', `${PREFIX}events`, '0', '-1'])) as string[]).filter((e) =>
      e.includes('replica-forgotten'),
    );
    expect(events).toHaveLength(OLD.length);
    // Nor does either store keep when it last polled them (what a node owes the shared store
    // after deciding alone, recovering-store.ts `seenDown`): one entry per address ever polled.
    const seen = (rt: FleetRuntime) =>
      [
        ...(rt.store as unknown as { seenDown: { dated: Map<string, unknown> } }).seenDown.dated.keys(),
      ].sort();
    expect([seen(a.rt), seen(b.rt)]).toEqual([[...NEW].sort(), [...NEW].sort()]);
  } finally {
    a.rt.stop();
    b.rt.stop();
  }
});

it('a prefetch tick on demand seen through a lapsed configuration registers no departed replica again', async () => {
  const redisConfig: RedisConfig = redis.config('prefetched:', { node_ttl_ms: 500, timeout: 2000 });
  const api = new IdleReplicaApi(() => Date.now());
  const config = (urls: readonly string[]) =>
    parseRouterConfig({
      base_model: 'base',
      replicas: urls.map((url) => ({ url })),
      adapter_path_template: '/adapters/{name}',
      lease_max_age_ms: 1000,
      redis: redisConfig,
      // Ticks that read the store and load nothing (no budget): what they ask is what is judged.
      prefetch: true,
      prefetch_interval_ms: 500,
      prefetch_half_life_ms: 3_600_000,
      prefetch_loads_per_minute: 0,
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
  // Node a tells the store its replicas as they change, its forget check a minute apart: its local
  // copy keeps the old fleet that long. Node b's forget check (each 200 ms) forgets it in Redis.
  const a = node(60_000);
  const b = node(200);
  const specs = async () => (await redis.command(['HKEYS', 'prefetched:spec'])) as string[];
  const forgotten = async () =>
    ((await redis.command(['LRANGE', 'prefetched:events', '0', '-1'])) as string[]).filter((e) =>
      e.includes('replica-forgotten'),
    );
  try {
    new RouterService(config(OLD), a.rt, 'plugin-1');
    new RouterService(config(NEW), b.rt, 'plugin-1');
    let rounds = 0;
    a.rt.poller.addRoundListener(() => rounds++);
    await waitFor(() => OLD.every((u) => a.rt.poller.lastLoad.has(u)), 10_000, 'node a polls the old fleet');
    // Its first round over: that round takes the registration's claims as told (runtime-departures.ts).
    const after = rounds;
    await waitFor(() => rounds > after, 10_000, "node a's first round ends");
    // Node a takes the new configuration (the old one lapses at once); requests through its old
    // one left demand for `hot` on the old fleet, decaying over an hour.
    new RouterService(config(NEW), a.rt, 'plugin-1');
    a.clock.skip(61_000);
    for (let i = 0; i < 5; i++)
      a.rt.prefetcher.observe({ name: 'hot', path: '/adapters/hot' }, OLD, Date.now());
    await waitFor(
      async () => (await forgotten()).length === OLD.length,
      10_000,
      'Redis forgets the old fleet',
    );
    const gone = Date.now();
    // Three ticks of node a's prefetcher, each on that demand (none plans: no replica of it is the
    // node's, so none takes the fleet's plan token or counts in `stats.ticks`: review 68).
    const tick = jest.spyOn(a.rt.prefetcher as unknown as { tick: () => Promise<void> }, 'tick');
    await new Promise((r) => setTimeout(r, 1500));
    expect(tick).toHaveBeenCalled();
    expect((await specs()).sort()).toEqual([...NEW].sort());
    expect([...api.polledIn(gone + 500)].sort()).toEqual([...NEW].sort());
  } finally {
    a.rt.stop();
    b.rt.stop();
  }
});
