/**
 * What the record-move suites share (test/core/record-move.test.ts, review-move.test.ts): Kong
 * constructing lora-router and lora-poller instances through the plugins' entries over a real
 * redis-server, counting replicas, and `performance.now` moved past the lapse grace (what
 * SystemClock reads; timers still wait real time). Call at a suite's top level: it registers the
 * suite's hooks.
 */
import { waitFor } from '../../harness/wait';
import type { RedisConfig } from '../../src/config/redis-schema';
import type { RouterService } from '../../src/router/router';
import type { FleetRuntime } from '../../src/runtime';
import { Plugin as Router } from '../../plugins/lora-router';
import { Plugin as Poller } from '../../plugins/lora-poller';
import { countingReplica, type CountingReplica } from './counting-replica';
import { redisRuntimes } from './runtime-harness';

/** Past the lapse grace: the longest `lease_max_age_ms` (10 minutes by default), over MIN_LAPSE_MS. */
export const PAST_GRACE_MS = 11 * 60_000;
export const POLL_MS = 50;

export function useRecordMove(tag: string) {
  const h = redisRuntimes(tag);
  /**
   * The runtimes the plugins got, stopped after each test unless retired (a retired one closed its
   * store as it left: closed again, ioredis's disconnect timer outlives the suite).
   */
  const made = new Set<FleetRuntime>();
  const track = (rt: FleetRuntime) => (made.add(rt), rt);
  const servers: CountingReplica[] = [];
  const readies: Promise<void>[] = [];

  /** `performance.now` moved ahead by the tests (never back: runtimes of earlier tests read it too). */
  let ahead = 0;
  beforeAll(() => {
    const real = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => real() + ahead);
  });
  afterAll(() => jest.restoreAllMocks());
  afterEach(async () => {
    await Promise.allSettled(readies.splice(0));
    // And the runtime each leads to now (an heir the registry made, a poller's: never tracked here).
    for (const rt of new Set([...made].map((r) => r.current()))) rt.stop();
    made.clear();
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  /** A counting replica, closed after the test. */
  async function replica(): Promise<CountingReplica> {
    const c = await countingReplica();
    servers.push(c);
    return c;
  }

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

  /** What a runtime does now: whether it is still the current one, polls `r`, is a live node of `redis`. */
  async function state(rt: FleetRuntime, redis: RedisConfig, r: CountingReplica) {
    const before = r.hits;
    await rounds(8);
    return {
      current: rt.current() === rt,
      polls: r.hits > before,
      liveNode: (await nodesIn(redis)).includes(rt.leasePrefix),
    };
  }

  /** The process's monotonic clock moved past the lapse grace. */
  const pastGrace = () => {
    ahead += PAST_GRACE_MS;
  };

  /**
   * A route on database 0 (record a) with its lora-poller on a record differing in timeout only (a2:
   * it replaces the runtime, same state); the route to database 1 with the same replica (b: that
   * runtime takes over both records); then back to database 0 (c, the lora-poller's state) with
   * another replica, the clock past the grace. Seed 3402203's case (left-other-state,
   * left-poller-settings).
   */
  async function pollerLeftBehind() {
    const p = h.prefix();
    const a = h.redis.config(p, { database: 0, timeout: 2000 });
    const a2 = h.redis.config(p, { database: 0, timeout: 3000 });
    const b = h.redis.config(p, { database: 1 });
    const c = h.redis.config(p, { database: 0, timeout: 4000 });
    const [r1, r2] = [await replica(), await replica()];
    router(`${p}route`, a, 1, [r1.url]);
    const pollerRt = poller(`${p}poller`, a2, 2);
    const db1 = router(`${p}route`, b, 3, [r1.url]).runtime;
    await waitFor(async () => (await nodesIn(b)).includes(db1.leasePrefix), 5000, 'the node on database 1');
    const back = router(`${p}route`, c, 4, [r2.url]).runtime;
    await waitFor(async () => (await nodesIn(c)).includes(back.leasePrefix), 5000, 'the node on database 0');
    pastGrace();
    return { b, r1, pollerRt, db1, back };
  }

  return { h, replica, router, poller, nodesIn, rounds, state, pastGrace, pollerLeftBehind };
}
