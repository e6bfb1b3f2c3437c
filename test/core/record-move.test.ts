/**
 * A route moved to another `redis` record with other replicas, through the plugins' entries (what
 * the plugin server constructs) over a real redis-server: lora-router and lora-poller move from
 * database 0 and replicas R1 to database 1 and replicas R2. No runtime takes R1 over (nothing
 * claims it on database 1), so nothing replaced the old runtime: it kept the old configuration
 * live, polled R1 and heartbeat in database 0 until the plugin server restarted. Now its plugins'
 * newer configurations supersede the old ones there, kept for the lapse grace (a worker may still
 * route through them), and then it retires: it stops polling and leaves database 0's live nodes.
 *
 * The lapse grace is at least 60 s of the process's monotonic time (node-claim.ts MIN_LAPSE_MS):
 * the test moves `performance.now` ahead (what SystemClock reads; timers still wait real time), as
 * test/helpers/clock-jump.cjs does for a plugin server.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RedisConfig } from '../../src/config/redis-schema';
import type { RouterService } from '../../src/router/router';
import type { FleetRuntime } from '../../src/runtime';
import { Plugin as Router } from '../../plugins/lora-router';
import { Plugin as Poller } from '../../plugins/lora-poller';
import { waitFor } from '../../harness/wait';
import { redisRuntimes } from '../helpers/runtime-harness';

const h = redisRuntimes('mv');
/**
 * The runtimes the plugins got, stopped after each test unless retired (a retired one closed its
 * store as it left: closed again, ioredis's disconnect timer outlives the suite).
 */
const made = new Set<FleetRuntime>();
const track = (rt: FleetRuntime) => (made.add(rt), rt);
/** Past the lapse grace: the longest `lease_max_age_ms` (10 minutes by default), over MIN_LAPSE_MS. */
const PAST_GRACE_MS = 11 * 60_000;
const POLL_MS = 50;

/** `performance.now` moved ahead by the tests (never back: runtimes of earlier tests read it too). */
let ahead = 0;
beforeAll(() => {
  const real = performance.now.bind(performance);
  jest.spyOn(performance, 'now').mockImplementation(() => real() + ahead);
});
afterAll(() => jest.restoreAllMocks());

/** A replica that answers nothing useful and counts the calls made to it (its polls). */
type Counted = { url: string; hits: number; close: () => Promise<void> };
const servers: Counted[] = [];
async function replica(): Promise<Counted> {
  const c = { url: '', hits: 0, close: async () => {} };
  const server = http.createServer((req, res) => {
    c.hits++;
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  c.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  c.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  servers.push(c);
  return c;
}

const readies: Promise<void>[] = [];
afterEach(async () => {
  await Promise.allSettled(readies.splice(0));
  for (const rt of made) if (rt.current() === rt) rt.stop();
  made.clear();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Kong constructing a lora-router instance of plugin `id` (`__seq__`: node-wide, growing). */
function router(id: string, redis: RedisConfig, seq: number, urls: string[]): RouterService {
  const config = { replicas: urls.map((url) => ({ url })), redis, __plugin_id: id, __seq__: seq };
  const service = (new Router(config) as unknown as { service: RouterService | null }).service;
  if (!service) throw new Error('the configuration was refused');
  track(service.runtime);
  readies.push((service as unknown as { ready: Promise<void> }).ready);
  return service;
}

/** Kong constructing a lora-poller instance of plugin `id`, polling every POLL_MS. */
function poller(id: string, redis: RedisConfig, seq: number): FleetRuntime {
  const config = { redis, poll_interval_ms: POLL_MS, jitter: 0, __plugin_id: id, __seq__: seq };
  return track((new Poller(config) as unknown as { rt: FleetRuntime }).rt);
}

/** The live nodes of a record's shared state (its heartbeats), read by the test's own client. */
async function nodesIn(redis: RedisConfig): Promise<string[]> {
  await h.admin.select(redis.database ?? 0);
  return h.admin.zrange(`${redis.prefix}nodes`, 0, -1);
}

/** Some poll rounds of every runtime (POLL_MS each), waited for real. */
const rounds = (n: number) => new Promise((r) => setTimeout(r, n * POLL_MS));

/** What a runtime does now: whether it is still the current one, polls `replica`, is a live node of `redis`. */
async function state(rt: FleetRuntime, redis: RedisConfig, r: Counted) {
  const before = r.hits;
  await rounds(8);
  return {
    current: rt.current() === rt,
    polls: r.hits > before,
    liveNode: (await nodesIn(redis)).includes(rt.leasePrefix),
  };
}

describe('a route moved to another record with other replicas', () => {
  it('the old runtime is kept for the lapse grace, then stops polling the old replicas and leaves the old state', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2] = [await replica(), await replica()];
    const old = router(`${p}route`, db0, 1, [r1.url]).runtime;
    poller(`${p}poller`, db0, 2);
    await waitFor(async () => (await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the node on database 0');
    // The operator moves the route (and its poller) to database 1, on other replicas.
    const moved = router(`${p}route`, db1, 3, [r2.url]).runtime;
    poller(`${p}poller`, db1, 4);
    expect(moved).not.toBe(old);
    await waitFor(
      async () => (await nodesIn(db1)).includes(moved.leasePrefix),
      5000,
      'the node on database 1',
    );
    // Within the grace a worker may still route through the old configuration: kept, superseded
    // (an old-config instance, a log phase begun before the move, runs there and is only used).
    const during = router(`${p}route`, db0, 1, [r1.url]);
    expect({
      ...(await state(old, db0, r1)),
      oldConfig: during.runtime === old,
      claims: old.claim.size,
    }).toEqual({
      current: true,
      polls: true,
      liveNode: true,
      oldConfig: true,
      claims: { live: 0, superseded: 1, released: 0 },
    });
    ahead += PAST_GRACE_MS;
    await waitFor(() => old.current() !== old, 5000, 'the old runtime retired').catch(() => {});
    await rounds(4);
    // Retired, it polls nothing and has left database 0; an old-config instance now runs on the
    // moved route's runtime, as one does after any record change.
    expect({
      old: await state(old, db0, r1),
      moved: await state(moved, db1, r2),
      oldConfigAfter: router(`${p}route`, db0, 1, [r1.url]).runtime === moved,
    }).toEqual({
      old: { current: false, polls: false, liveNode: false },
      moved: { current: true, polls: true, liveNode: true },
      oldConfigAfter: true,
    });
  }, 30_000);

  it('two routes on two records at once: both runtimes stay', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2] = [await replica(), await replica()];
    const a = router(`${p}A`, db0, 1, [r1.url]).runtime;
    const b = router(`${p}B`, db1, 2, [r2.url]).runtime;
    poller(`${p}poller`, db0, 3);
    ahead += PAST_GRACE_MS;
    await rounds(8);
    expect({ a: await state(a, db0, r1), b: await state(b, db1, r2) }).toEqual({
      a: { current: true, polls: true, liveNode: true },
      b: { current: true, polls: true, liveNode: true },
    });
  }, 30_000);

  it('a route moved while another stays on the old record: the old runtime stays for it', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2, r3] = [await replica(), await replica(), await replica()];
    const a = router(`${p}A`, db0, 1, [r1.url]).runtime;
    router(`${p}B`, db0, 2, [r3.url]);
    poller(`${p}poller`, db0, 3);
    const moved = router(`${p}A`, db1, 4, [r2.url]).runtime;
    ahead += PAST_GRACE_MS;
    await rounds(8);
    // Route B still routes to r3 on database 0; route A's old replica r1 is released there.
    expect({ a: await state(a, db0, r3), moved: moved.current() === moved, r1: a.routesTo(r1.url) }).toEqual({
      a: { current: true, polls: true, liveNode: true },
      moved: true,
      r1: false,
    });
  }, 30_000);

  it('a route changed back within the grace: the first record stays, the one it left retires', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2] = [await replica(), await replica()];
    const a = router(`${p}route`, db0, 1, [r1.url]).runtime;
    poller(`${p}poller`, db0, 2);
    const b = router(`${p}route`, db1, 3, [r2.url]).runtime;
    poller(`${p}poller`, db1, 4);
    await waitFor(async () => (await nodesIn(db1)).includes(b.leasePrefix), 5000, 'the node on database 1');
    // Changed back (a newer `__seq__`) before the grace ended.
    expect(router(`${p}route`, db0, 5, [r1.url]).runtime).toBe(a);
    expect(poller(`${p}poller`, db0, 6)).toBe(a);
    ahead += PAST_GRACE_MS;
    await waitFor(() => b.current() !== b, 5000, 'the runtime left retired').catch(() => {});
    await rounds(4);
    expect({ a: await state(a, db0, r1), b: await state(b, db1, r2) }).toEqual({
      a: { current: true, polls: true, liveNode: true },
      b: { current: false, polls: false, liveNode: false },
    });
  }, 30_000);
});
