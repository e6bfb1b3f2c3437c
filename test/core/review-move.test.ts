/**
 * Review of the record move (merge 6fec46f1): what reaches the old record's configuration AFTER its
 * runtime retired. A route's lora-router and lora-poller move from database 0 and replicas R1 to
 * database 1 and replicas R2 (disjoint); past the lapse grace the old runtime retires, its heir the
 * moved route's runtime. A configuration of the old record may still come: an instance Kong kept
 * (a worker's request through it) or one Kong starts for a log phase (plugin.lua 3.9.3
 * `get_instance_id`). It decides on the heir: the heir must not take R1 over on database 1 (a
 * replica of other state, where it sees none of that state's leases), nor list it there.
 * Setup as test/core/record-move.test.ts (`performance.now` moved past the grace).
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

const h = redisRuntimes('rv');
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

/** A route and its lora-poller moved from database 0 (R1) to database 1 (R2), the old runtime retired. */
async function movedAndRetired() {
  const p = h.prefix();
  const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
  const [r1, r2] = [await replica(), await replica()];
  const kept = router(`${p}route`, db0, 1, [r1.url]);
  const old = kept.runtime;
  poller(`${p}poller`, db0, 2);
  await waitFor(async () => (await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the node on database 0');
  const moved = router(`${p}route`, db1, 3, [r2.url]).runtime;
  poller(`${p}poller`, db1, 4);
  await waitFor(async () => (await nodesIn(db1)).includes(moved.leasePrefix), 5000, 'the node on database 1');
  ahead += PAST_GRACE_MS;
  await waitFor(() => old.current() === moved, 5000, 'the old runtime retired');
  await waitFor(async () => !(await nodesIn(db0)).includes(old.leasePrefix), 5000, 'database 0 left');
  return { p, db0, db1, r1, r2, kept, old, moved };
}

/** What the moved route's runtime does with the old replica R1 now. */
async function onHeir(moved: FleetRuntime, db1: RedisConfig, r1: Counted) {
  const before = r1.hits;
  await rounds(8);
  return {
    claimsR1: moved.routesTo(r1.url),
    polledR1: r1.hits > before,
    listedR1: (await moved.store.replicaSpecs()).some((s) => s.url === r1.url),
    stillCurrent: moved.current() === moved,
  };
}

describe('the old record after its runtime retired (review of the record move)', () => {
  it('an old-config instance Kong starts then (a log phase) takes nothing of R1 onto database 1', async () => {
    const { p, db0, db1, r1, moved } = await movedAndRetired();
    const late = router(`${p}route`, db0, 1, [r1.url]);
    await (late as unknown as { ready: Promise<void> }).ready;
    expect({ runsOn: late.runtime === moved, ...(await onHeir(moved, db1, r1)) }).toEqual({
      runsOn: true,
      claimsR1: false,
      polledR1: false,
      listedR1: false,
      stillCurrent: true,
    });
  }, 30_000);

  it('a request through an instance kept from before the move takes nothing of R1 onto database 1', async () => {
    const { db1, r1, kept, moved } = await movedAndRetired();
    const body = Buffer.from(JSON.stringify({ model: 'base', prompt: 'hi', max_tokens: 1 }));
    const r = await kept.route({ path: '/v1/completions', body });
    if (r.kind === 'proxy') await kept.finish(r.leaseId, 200);
    expect({ proxiedToR1: r.kind === 'proxy', ...(await onHeir(moved, db1, r1)) }).toEqual({
      proxiedToR1: false,
      claimsR1: false,
      polledR1: false,
      listedR1: false,
      stillCurrent: true,
    });
  }, 30_000);
});

describe('the old record run again after its runtime retired (review of the record move)', () => {
  it('an old-config instance on a fresh runtime of the record (its lora-poller moved back) is only kept for the grace', async () => {
    const { p, db0, r1, moved } = await movedAndRetired();
    // The lora-poller alone moves back to database 0: a runtime runs there again.
    const again = poller(`${p}poller`, db0, 5);
    expect(again).not.toBe(moved);
    // A log phase of a request begun before the move: Kong starts an instance of the old configuration.
    const late = router(`${p}route`, db0, 1, [r1.url]);
    await (late as unknown as { ready: Promise<void> }).ready;
    const kept = { on: late.runtime === again, claims: again.claim.size };
    ahead += PAST_GRACE_MS;
    await rounds(8);
    expect({ kept, after: again.claim.size, claimsR1: again.routesTo(r1.url) }).toEqual({
      kept: { on: true, claims: { live: 0, superseded: 1, released: 0 } },
      after: { live: 0, superseded: 0, released: 1 },
      claimsR1: false,
    });
  }, 30_000);
});

describe('around the retirement (review of the record move: held, not failed first)', () => {
  it('changed back while the old runtime still drains: the fresh runtime is another node, kept when the old one leaves', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2] = [await replica(), await replica()];
    const old = router(`${p}route`, db0, 1, [r1.url]).runtime;
    poller(`${p}poller`, db0, 2);
    await waitFor(async () => (await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the node on database 0');
    router(`${p}route`, db1, 3, [r2.url]);
    poller(`${p}poller`, db1, 4);
    // A decision under way on the old runtime when it retires: its drain waits for it.
    old.decisionBegan();
    ahead += PAST_GRACE_MS;
    await waitFor(() => old.current() !== old, 5000, 'the old runtime retiring');
    // Changed back to database 0 meanwhile: a runtime of its own there, another node id.
    const back = router(`${p}route`, db0, 5, [r1.url]).runtime;
    poller(`${p}poller`, db0, 6);
    await waitFor(async () => (await nodesIn(db0)).includes(back.leasePrefix), 5000, 'the fresh node');
    const during = {
      sameNode: back.leasePrefix === old.leasePrefix,
      oldStillNode: (await nodesIn(db0)).includes(old.leasePrefix),
    };
    // The decision ends: the old runtime leaves database 0 (its node, its claims, its connection).
    old.decisionEnded();
    await waitFor(async () => !(await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the old node left');
    await rounds(4);
    expect({
      during,
      back: await state(back, db0, r1),
      claimsR1: back.routesTo(r1.url),
      listedR1: (await back.store.replicaSpecs()).some((s) => s.url === r1.url),
    }).toEqual({
      during: { sameNode: false, oldStillNode: true },
      back: { current: true, polls: true, liveNode: true },
      claimsR1: true,
      listedR1: true,
    });
  }, 30_000);

  it('lora-poller moved, lora-router left: both runtimes stay, the router one polls its replicas', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const r1 = await replica();
    const a = router(`${p}route`, db0, 1, [r1.url]).runtime;
    poller(`${p}poller`, db0, 2);
    await waitFor(async () => (await nodesIn(db0)).includes(a.leasePrefix), 5000, 'the node on database 0');
    const b = poller(`${p}poller`, db1, 3);
    ahead += PAST_GRACE_MS;
    await rounds(8);
    expect({ a: await state(a, db0, r1), bCurrent: b.current() === b, claims: a.claim.size }).toEqual({
      a: { current: true, polls: true, liveNode: true },
      bCurrent: true,
      claims: { live: 1, superseded: 0, released: 0 },
    });
  }, 30_000);

  it('moved to replicas overlapping the old ones: the old runtime is replaced at once (with the hold-off), not left', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [x, y, z] = [await replica(), await replica(), await replica()];
    const old = router(`${p}route`, db0, 1, [x.url, y.url]).runtime;
    poller(`${p}poller`, db0, 2);
    await waitFor(async () => (await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the node on database 0');
    const moved = router(`${p}route`, db1, 3, [y.url, z.url]).runtime;
    // Replaced as any change to other state sharing a replica: the old configuration goes along,
    // kept for the grace on the new runtime (x still claimed there meanwhile).
    const atMove = { replaced: old.current() === moved, claimsX: moved.routesTo(x.url) };
    ahead += PAST_GRACE_MS;
    // The lapse comes with the new runtime's poll round (its first one: a router's default interval).
    await waitFor(() => !moved.routesTo(x.url), 10_000, 'x released').catch(() => {});
    expect({ atMove, claimsXAfter: moved.routesTo(x.url), movedCurrent: moved.current() === moved }).toEqual({
      atMove: { replaced: true, claimsX: true },
      claimsXAfter: false,
      movedCurrent: true,
    });
  }, 30_000);
});
