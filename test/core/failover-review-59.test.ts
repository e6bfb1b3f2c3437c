/**
 * Review 59: the shared-state changes of the last stop (a waiting request's lease kept young, a
 * replaced runtime starting nothing). Real parts: RouterService and FleetRuntime over a real
 * redis-server, and the HTTP replica simulator on loopback. The test holds the replica's reads, so
 * each step comes in the order written.
 */
import { HttpReplicaApi } from '../../src/backends/http-replica-api';
import { parseRouterConfig } from '../../src/config/parse';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { LeaseHandle } from '../../src/lease';
import { PREFETCH_BUDGET_KEY } from '../../src/prefetch/prefetcher';
import { RouterService, type RouteOutcome } from '../../src/router/router';
import type { FleetRuntime } from '../../src/runtime';
import { SimFleet } from '../../sim/fleet';
import { waitFor } from '../../harness/wait';
import { redisRuntimes } from '../helpers/runtime-harness';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const h = redisRuntimes('r59');

/** A gate the test opens: calls wait on it until then. */
class Gate {
  private opened!: () => void;
  readonly open = new Promise<void>((r) => (this.opened = r));
  release(): void {
    this.opened();
  }
}

/** The real HTTP client of one runtime; its registry reads wait on a gate while one is set. */
class HeldApi extends HttpReplicaApi {
  reads: Gate | null = null;
  readsAsked = 0;
  override async residency(url: string, timeoutMs: number) {
    this.readsAsked++;
    await this.reads?.open;
    return super.residency(url, timeoutMs);
  }
  activities: Gate | null = null;
  activitiesAsked = 0;
  override async activity(url: string, timeoutMs: number, names?: readonly string[]) {
    this.activitiesAsked++;
    await this.activities?.open;
    return super.activity(url, timeoutMs, names);
  }
}

/**
 * Counts the joins of a load under way in `rt`'s manager (one flight per adapter and replica).
 * Every argument is passed on: the joiner's lease is kept young by the load it joins.
 */
function joins(rt: FleetRuntime): { count: number } {
  const manager = rt.manager as unknown as {
    joinWithin: (...args: unknown[]) => Promise<boolean>;
  };
  const join = manager.joinWithin.bind(manager);
  const seen = { count: 0 };
  manager.joinWithin = (...args) => {
    seen.count++;
    return join(...args);
  };
  return seen;
}

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

const completion = (model: string) => Buffer.from(JSON.stringify({ model, prompt: 'hi', max_tokens: 1 }));

/** A router configuration on a runtime of its own over `url`, on Redis state `prefix`; its poller stopped. */
async function configured(
  url: string,
  prefix: string,
  api: HeldApi,
  extra: Record<string, unknown>,
  o: { timeout?: number; from?: FleetRuntime } = {},
): Promise<{ rt: FleetRuntime; router: RouterService }> {
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
  return { rt, router };
}

describe('a request joined to a prefetch load when its runtime is replaced (same state)', () => {
  it('is served: the prefetch stopping is not the request failing', async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const p = h.prefix();
    const extra = {
      max_loaded_adapters: 2,
      prefetch: true,
      prefetch_interval_ms: 500,
      prefetch_hysteresis: 0.5,
    };
    const apiA = new HeldApi();
    const { rt: a, router } = await configured(url, p, apiA, extra);
    await waitFor(() => liveNodes(a) !== null, 10_000, 'the count of live nodes');
    await a.poller.refreshUrl(url);
    const asked = Date.now() - 2000;
    for (let i = 0; i < 5; i++) a.prefetcher.observe({ name: 'hot', path: '/adapters/hot' }, [url], asked);
    // The plan's load asks the replica's word before its lock: held there, its flight set.
    apiA.reads = new Gate();
    const tick = a.prefetcher.maybeTick();
    await waitFor(() => apiA.readsAsked > 0, 10_000, "the prefetch load's word of the replica");
    // A request for `hot` decided on A joins that load (one flight per adapter and replica).
    const joined = joins(a);
    let outcome: RouteOutcome | undefined;
    const routed = router
      .route({ path: '/v1/completions', body: completion('hot') })
      .then((o) => (outcome = o));
    await waitFor(() => joined.count > 0, 10_000, 'the request joined the prefetch load');
    // The record changes (a `timeout`: same state, one node id): the request still runs on A.
    const { rt: next } = await configured(url, p, new HeldApi(), extra, { timeout: 2500, from: a });
    const retiring = a.retire(next);
    apiA.reads.release();
    await tick;
    await routed;
    if (outcome?.kind === 'proxy') await LeaseHandle.open(outcome.leaseId).release(200);
    await retiring;
    expect(outcome?.kind === 'respond' ? { status: outcome.status, body: outcome.body } : outcome?.kind).toBe(
      'proxy',
    );
  }, 30_000);
});

describe('a request joined to a prefetch load the prefetch budget refuses', () => {
  it('is served: the request loads it itself, on its own budget', async () => {
    // Not of this stop (the prefetcher's OverBudget and RoomWaited failed joined requests the same
    // way before it); the same fix: a refusal of the caller's own is no load failure.
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const extra = {
      max_loaded_adapters: 2,
      prefetch: true,
      prefetch_interval_ms: 500,
      prefetch_hysteresis: 0.5,
      prefetch_loads_per_minute: 1,
    };
    const apiA = new HeldApi();
    const { rt: a, router } = await configured(url, h.prefix(), apiA, extra);
    await waitFor(() => liveNodes(a) !== null, 10_000, 'the count of live nodes');
    await a.poller.refreshUrl(url);
    const asked = Date.now() - 2000;
    for (let i = 0; i < 5; i++) a.prefetcher.observe({ name: 'hot', path: '/adapters/hot' }, [url], asked);
    apiA.reads = new Gate();
    const tick = a.prefetcher.maybeTick();
    await waitFor(() => apiA.readsAsked > 0, 10_000, "the prefetch load's word of the replica");
    const joined = joins(a);
    let outcome: RouteOutcome | undefined;
    const routed = router
      .route({ path: '/v1/completions', body: completion('hot') })
      .then((o) => (outcome = o));
    await waitFor(() => joined.count > 0, 10_000, 'the request joined the prefetch load');
    // Another node's prefetch spent this minute's one unit meanwhile.
    expect(await a.store.spendBudget(PREFETCH_BUDGET_KEY, 1, 60_000, Date.now())).toBe(0);
    apiA.reads.release();
    await tick;
    await routed;
    if (outcome?.kind === 'proxy') await LeaseHandle.open(outcome.leaseId).release(200);
    expect({
      outcome: outcome?.kind === 'respond' ? { status: outcome.status, body: outcome.body } : outcome?.kind,
      overBudget: a.prefetcher.stats.overBudget,
    }).toEqual({ outcome: 'proxy', overBudget: 1 });
  }, 30_000);
});

describe('a request joined to a prefetch load that makes room when its runtime is replaced (same state)', () => {
  it('is served: the prefetch stopped during the unload for room is not "no room" for the request', async () => {
    // Passed on the code as found: the joined request is told the prefetch's "no room" (a
    // RouterError: its unload for room ended as not done, `halted`), which its placement retries.
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const p = h.prefix();
    const extra = {
      max_loaded_adapters: 1,
      prefetch: true,
      prefetch_interval_ms: 500,
      prefetch_hysteresis: 0.5,
    };
    const direct = new HttpReplicaApi();
    clients.push(direct);
    // The one slot holds `old`, idle, which nobody asks for: the prefetch's victim.
    await direct.loadAdapter(url, 'old', '/adapters/old', 5000);
    const apiA = new HeldApi();
    const { rt: a, router } = await configured(url, p, apiA, extra);
    await waitFor(() => liveNodes(a) !== null, 10_000, 'the count of live nodes');
    await waitFor(() => !(a.store as FailoverFleetStore).unloadsHeldOff(), 10_000, 'the hold-off over');
    await a.poller.refreshUrl(url);
    const asked = Date.now() - 2000;
    for (let i = 0; i < 5; i++) a.prefetcher.observe({ name: 'hot', path: '/adapters/hot' }, [url], asked);
    // The plan's load reads the replica's residents under its room lock: held there once, its
    // flight set, so a request for `hot` decided meanwhile (on `old` idle) joins it.
    const residents = a.store.residents.bind(a.store);
    const roomRead = new Gate();
    let held = 0;
    a.store.residents = async (u) => {
      if (held++ === 0) await roomRead.open;
      return residents(u);
    };
    const tick = a.prefetcher.maybeTick();
    await waitFor(() => held > 0, 10_000, "the prefetch load's read of the residents");
    const joined = joins(a);
    let outcome: RouteOutcome | undefined;
    const routed = router
      .route({ path: '/v1/completions', body: completion('hot') })
      .then((o) => (outcome = o));
    await waitFor(() => joined.count > 0, 10_000, 'the request joined the prefetch load');
    // The unload for room asks the replica what runs: held there, under its unload lock.
    apiA.activities = new Gate();
    roomRead.release();
    await waitFor(() => apiA.activitiesAsked > 0, 10_000, "the replica's word before the unload of `old`");
    const { rt: next } = await configured(url, p, new HeldApi(), extra, { timeout: 2500, from: a });
    const retiring = a.retire(next);
    apiA.activities.release();
    await tick;
    await routed;
    if (outcome?.kind === 'proxy') await LeaseHandle.open(outcome.leaseId).release(200);
    await retiring;
    expect({
      outcome: outcome?.kind === 'respond' ? { status: outcome.status, body: outcome.body } : outcome?.kind,
      replica: fleet.replicas[0]!.adapterLog().map((e) => `${e.op} ${e.name}`),
    }).toEqual({ outcome: 'proxy', replica: ['load old', 'unload old', 'load hot'] });
  }, 30_000);
});

describe('a request joined to a prefetch load whose lock was granted when its runtime is replaced (same state)', () => {
  it('is served by one load: the prefetch ends its lock uncalled, the request loads under its own', async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const p = h.prefix();
    const extra = {
      max_loaded_adapters: 2,
      prefetch: true,
      prefetch_interval_ms: 500,
      prefetch_hysteresis: 0.5,
    };
    const { rt: a, router } = await configured(url, p, new HeldApi(), extra);
    await waitFor(() => liveNodes(a) !== null, 10_000, 'the count of live nodes');
    await a.poller.refreshUrl(url);
    const asked = Date.now() - 2000;
    for (let i = 0; i < 5; i++) a.prefetcher.observe({ name: 'hot', path: '/adapters/hot' }, [url], asked);
    // The load's check that its lock is still its own, right before the call: held there once.
    const holds = a.store.holds.bind(a.store);
    const lockCheck = new Gate();
    let held = 0;
    a.store.holds = async (u, name, fence) => {
      if (held++ === 0) await lockCheck.open;
      return holds(u, name, fence);
    };
    const tick = a.prefetcher.maybeTick();
    await waitFor(() => held > 0, 10_000, "the prefetch load's check of its lock");
    const joined = joins(a);
    let outcome: RouteOutcome | undefined;
    const routed = router
      .route({ path: '/v1/completions', body: completion('hot') })
      .then((o) => (outcome = o));
    await waitFor(() => joined.count > 0, 10_000, 'the request joined the prefetch load');
    const { rt: next } = await configured(url, p, new HeldApi(), extra, { timeout: 2500, from: a });
    const retiring = a.retire(next);
    lockCheck.release();
    await tick;
    await routed;
    if (outcome?.kind === 'proxy') await LeaseHandle.open(outcome.leaseId).release(200);
    await retiring;
    expect({
      outcome: outcome?.kind === 'respond' ? { status: outcome.status, body: outcome.body } : outcome?.kind,
      replica: fleet.replicas[0]!.adapterLog().map((e) => `${e.op} ${e.name}`),
    }).toEqual({ outcome: 'proxy', replica: ['load hot'] });
  }, 30_000);
});
