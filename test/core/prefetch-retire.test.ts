/**
 * A runtime replaced by a `redis` record change starts no load or unload of its own after it: not
 * the prefetch plan under way when it was replaced, nor the trim after a poll round that ended after
 * it. Real parts: RouterService and FleetRuntime over a real redis-server, and the HTTP replica
 * simulator on loopback, whose own log says what was loaded and unloaded. The test holds the
 * replica's reads, so each step comes in the order written.
 */
import { HttpReplicaApi } from '../../src/backends/http-replica-api';
import type { Scrape } from '../../src/backends/replica-api';
import { parseRouterConfig } from '../../src/config/parse';
import type { ReplicaSpec } from '../../src/fleet/types';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { LeaseHandle } from '../../src/lease';
import { RouterService } from '../../src/router/router';
import type { FleetRuntime } from '../../src/runtime';
import { SimFleet } from '../../sim/fleet';
import { waitFor } from '../../harness/wait';
import { stateInRedis } from '../helpers/redis-stores';
import { redisRuntimes } from '../helpers/runtime-harness';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const h = redisRuntimes('pr');

/** A gate the test opens: calls wait on it until then. */
class Gate {
  private opened!: () => void;
  readonly open = new Promise<void>((r) => (this.opened = r));
  release(): void {
    this.opened();
  }
}

/** The real HTTP client of one runtime; its scrapes, loads and registry reads wait on a gate while one is set. */
class HeldApi extends HttpReplicaApi {
  scrapes: Gate | null = null;
  scrapesAsked = 0;
  loads: Gate | null = null;
  loadsAsked = 0;
  reads: Gate | null = null;
  readsAsked = 0;
  override async scrape(replica: ReplicaSpec, timeoutMs: number): Promise<Scrape> {
    this.scrapesAsked++;
    await this.scrapes?.open;
    return super.scrape(replica, timeoutMs);
  }
  override async loadAdapter(url: string, name: string, path: string, timeoutMs: number) {
    this.loadsAsked++;
    await this.loads?.open;
    return super.loadAdapter(url, name, path, timeoutMs);
  }
  override async residency(url: string, timeoutMs: number) {
    this.readsAsked++;
    await this.reads?.open;
    return super.residency(url, timeoutMs);
  }
}

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The simulated replica of the running test, stopped after it, and the test's HTTP clients. */
let fleet: SimFleet | undefined;
const clients: HttpReplicaApi[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await fleet?.stop();
  fleet = undefined;
});

/** Nodes heartbeating on the runtime's shared state, as its store last saw them (null: not yet). */
const liveNodes = (rt: FleetRuntime) =>
  (rt.store as unknown as { shared: { liveNodes: number | null } }).shared.liveNodes;

/** Tells when the runtime's store has closed (it left its state). */
function leaving(rt: FleetRuntime): { done: Promise<void> } {
  const close = rt.store.close!.bind(rt.store);
  let closed = () => {};
  const done = new Promise<void>((r) => (closed = r));
  rt.store.close = async () => {
    await close();
    closed();
  };
  return { done };
}

/**
 * A router configuration on a runtime of its own over `url`, on Redis state `prefix` (a `timeout`
 * of its own: another value is another record on the same state). Its poller is stopped: the test
 * polls and ticks by hand.
 */
async function configured(
  url: string,
  prefix: string,
  api: HeldApi,
  extra: Record<string, unknown>,
  o: { timeout?: number; from?: FleetRuntime } = {},
): Promise<FleetRuntime> {
  clients.push(api);
  const redis = h.redis.config(prefix, { timeout: o.timeout ?? 2000, node_ttl_ms: 500 });
  const rt = h.runtime({
    redis,
    api,
    ...(o.from ? { leasePrefix: o.from.leasePrefix, leaseSeq: o.from.leaseSeq } : {}),
  });
  const config = parseRouterConfig({
    replicas: [{ url }],
    base_model: BASE,
    adapter_path_template: '/adapters/{name}',
    redis,
    ...extra,
  });
  const router = new RouterService(config, rt);
  await (router as unknown as { ready: Promise<void> }).ready;
  rt.poller.stop();
  return rt;
}

describe('a prefetch plan under way when its runtime is replaced (other state)', () => {
  it('starts no load after the change: the replica loads nothing the old state never hears of', async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const replica = fleet.replicas[0]!;
    const [pa, pb] = [h.prefix(), h.prefix()];
    const extra = {
      max_loaded_adapters: 2,
      prefetch: true,
      prefetch_interval_ms: 500,
      prefetch_hysteresis: 0.5,
    };
    const apiA = new HeldApi();
    const a = await configured(url, pa, apiA, extra);
    // A node up a while knows how many nodes share the state (its share of the budget deciding alone).
    await waitFor(() => liveNodes(a) !== null, 10_000, 'the count of live nodes');
    await a.poller.refreshUrl(url);
    // `hot` was asked for a while ago (before the interval: the first copy is no request's to make).
    const asked = Date.now() - 2000;
    for (let i = 0; i < 5; i++) a.prefetcher.observe({ name: 'hot', path: '/adapters/hot' }, [url], asked);
    // The plan's load asks the replica's word before it asks for its lock: held there.
    apiA.reads = new Gate();
    const reads = apiA.readsAsked;
    const tick = a.prefetcher.maybeTick();
    await waitFor(() => apiA.readsAsked > reads, 10_000, "the prefetch load's word of the replica");
    // The record changes A -> B (other state). A has no decision and no lease: it drains at once.
    const b = await configured(url, pb, new HeldApi(), extra);
    const left = leaving(a);
    const retiring = a.retire(b);
    // The old store gets its chance to leave first (it did on the code before the fix).
    await Promise.race([retiring.then(() => left.done), pause(500)]);
    const change = replica.adapterLog().length;
    apiA.reads.release();
    await tick;
    await retiring;
    await left.done;
    // What the replica did after the change, and what the old state (peers not yet moved) reads.
    const after = replica
      .adapterLog()
      .slice(change)
      .map((e) => `${e.op} ${e.name}`);
    expect({ after, inOldState: await stateInRedis(h.redis, pa, url, 'hot') }).toEqual({
      after: [],
      inOldState: undefined,
    });
  }, 30_000);
});

describe('a prefetch load already started when its runtime is replaced (other state)', () => {
  it('lands, and its end reaches the old state before the store leaves', async () => {
    // Its lock was granted in the old state before the change: the runtime waits for the plan
    // under way, and the store for the lock's end, before it leaves. Passed on the code as found
    // (the store waited for the lock; test/core/failover-review-57.test.ts).
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const replica = fleet.replicas[0]!;
    const [pa, pb] = [h.prefix(), h.prefix()];
    const extra = {
      max_loaded_adapters: 2,
      prefetch: true,
      prefetch_interval_ms: 500,
      prefetch_hysteresis: 0.5,
    };
    const apiA = new HeldApi();
    const a = await configured(url, pa, apiA, extra);
    await waitFor(() => liveNodes(a) !== null, 10_000, 'the count of live nodes');
    await a.poller.refreshUrl(url);
    const asked = Date.now() - 2000;
    for (let i = 0; i < 5; i++) a.prefetcher.observe({ name: 'hot', path: '/adapters/hot' }, [url], asked);
    // The plan's load call is held until the change.
    apiA.loads = new Gate();
    const tick = a.prefetcher.maybeTick();
    await waitFor(() => apiA.loadsAsked > 0, 10_000, 'the prefetch load call');
    expect(await stateInRedis(h.redis, pa, url, 'hot')).toBe('loading');
    const b = await configured(url, pb, new HeldApi(), extra);
    const left = leaving(a);
    const retiring = a.retire(b);
    await Promise.race([retiring.then(() => left.done), pause(500)]);
    apiA.loads.release();
    await tick;
    await retiring;
    await left.done;
    expect({
      replica: replica.adapterLog().map((e) => `${e.op} ${e.name}`),
      inOldState: await stateInRedis(h.redis, pa, url, 'hot'),
      stats: a.prefetcher.stats,
    }).toMatchObject({ replica: ['load hot'], inOldState: 'loaded', stats: { loaded: 1 } });
  }, 30_000);
});

describe('a poll round under way when its runtime is replaced (same state)', () => {
  it('trims nothing on the replaced runtime: the excess is the successor’s to trim', async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const replica = fleet.replicas[0]!;
    const p = h.prefix();
    const direct = new HttpReplicaApi();
    clients.push(direct);
    await direct.loadAdapter(url, 'a', '/adapters/a', 5000);
    const apiA = new HeldApi();
    const a = await configured(url, p, apiA, { max_loaded_adapters: 1 });
    // Past the hold-off the state's first registration began.
    await waitFor(() => !(a.store as FailoverFleetStore).unloadsHeldOff(), 10_000, 'the hold-off over');
    // A poll: the shared state holds `a` (within the limit of 1); a request runs on it.
    await a.poller.refreshUrl(url);
    expect(await stateInRedis(h.redis, p, url, 'a')).toBe('loaded');
    const { lease: onA } = await LeaseHandle.take(a, url, 'a');
    // A load that landed after its timeout (or a peer's cut off from Redis): the replica holds `b` too.
    await direct.loadAdapter(url, 'b', '/adapters/b', 5000);
    // A round's poll under way, its scrape held; the record changes (a `timeout`: same state, one node id).
    apiA.scrapes = new Gate();
    const asked = apiA.scrapesAsked;
    const polled = a.poller.refreshUrl(url);
    await waitFor(() => apiA.scrapesAsked > asked, 10_000, 'the scrape under way');
    const apiNext = new HeldApi();
    const next = await configured(url, p, apiNext, { max_loaded_adapters: 1 }, { timeout: 2500, from: a });
    // What the old runtime reads of the store from here (a trim reads the view first), and the trims it begins.
    const reads: Promise<unknown>[] = [];
    const views = a.store.views.bind(a.store);
    a.store.views = (...args) => {
      const r = views(...args);
      reads.push(r);
      return r;
    };
    const trims: Promise<void>[] = [];
    const trim = a.manager.trim.bind(a.manager);
    a.manager.trim = (u, policy) => {
      const t = trim(u, policy);
      trims.push(t);
      return t;
    };
    // The request still runs on the old runtime: it drains until its lease is given back.
    const retiring = a.retire(next);
    const change = replica.adapterLog().length;
    // The round ends after the change: it reads `a` and `b`, over the limit.
    apiA.scrapes.release();
    await polled;
    await Promise.allSettled(reads);
    await new Promise((r) => setImmediate(r));
    await Promise.all(trims);
    const byOld = replica
      .adapterLog()
      .slice(change)
      .map((e) => `${e.op} ${e.name}`);
    expect(byOld).toEqual([]);
    await onA.release(200);
    await retiring;
    // The successor's own poll finds the excess, and its trim unloads it.
    await next.poller.refreshUrl(url);
    await waitFor(() => replica.adapterLog().length > change, 10_000, "the successor's trim");
    expect({
      bySuccessor: replica
        .adapterLog()
        .slice(change)
        .map((e) => `${e.op} ${e.name}`),
      b: await stateInRedis(h.redis, p, url, 'b'),
    }).toEqual({ bySuccessor: ['unload b'], b: undefined });
  }, 30_000);
});
