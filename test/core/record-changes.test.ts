/**
 * A request whose decision spans `redis` record changes, through RouterService against a
 * simulated vLLM replica (real HTTP on loopback) and a real redis-server. The replica's answers
 * are gated by the test (`GatedApi`), so each step happens in the order written, not by timing.
 */
import { HttpReplicaApi } from '../../src/backends/http-replica-api';
import type { LoadOutcome, ReplicaApi, Scrape } from '../../src/backends/replica-api';
import { systemClock, VirtualClock, type Clock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import type { RedisConfig } from '../../src/config/redis-schema';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { ReplicaSpec } from '../../src/fleet/types';
import { RouterService, type RouteOutcome } from '../../src/router/router';
import type { FleetRuntime } from '../../src/runtime';
import { SimFleet } from '../../sim/fleet';
import { redisRuntimes, SPEC, U } from '../helpers/runtime-harness';
import { waitFor } from '../../harness/wait';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const h = redisRuntimes('rc');

/** A gate the test opens: calls wait on it until then. */
class Gate {
  private opened!: () => void;
  readonly open = new Promise<void>((r) => (this.opened = r));
  release(): void {
    this.opened();
  }
}

/** Loads asked of the replica, held until the test lets them go (shared by the runtimes' clients). */
interface Loads {
  gate: Gate;
  asked: number;
}

/** The real HTTP client of one runtime, with its scrapes and loads held until the test lets them go. */
class GatedApi implements ReplicaApi {
  private readonly http = new HttpReplicaApi();
  readonly scrapes = new Gate();
  scrapesAsked = 0;
  /** Replicas whose scrapes fail as this client sees them (its runtime polls them down). */
  readonly down = new Set<string>();
  /** The replica each load was asked of, in order. */
  readonly loadedOn: string[] = [];

  constructor(private readonly loads: Loads) {}

  async scrape(replica: ReplicaSpec, timeoutMs: number): Promise<Scrape> {
    this.scrapesAsked++;
    await this.scrapes.open;
    if (this.down.has(replica.url)) throw new Error('HTTP 500');
    return this.http.scrape(replica, timeoutMs);
  }
  async loadAdapter(url: string, name: string, path: string, timeoutMs: number): Promise<LoadOutcome> {
    this.loads.asked++;
    this.loadedOn.push(url);
    await this.loads.gate.open;
    return this.http.loadAdapter(url, name, path, timeoutMs);
  }
  unloadAdapter(url: string, name: string, timeoutMs: number) {
    return this.http.unloadAdapter(url, name, timeoutMs);
  }
  activity(url: string, timeoutMs: number) {
    return this.http.activity(url, timeoutMs);
  }
  residency(url: string, timeoutMs: number) {
    return this.http.residency(url, timeoutMs);
  }
}

/** Router configurations on runtimes of their own, one `redis` state (prefix) each, over the replicas. */
function node(url: string | string[], clock: Clock, extra: Record<string, unknown> = {}) {
  const record = (p: string): RedisConfig => h.redis.config(p, { timeout: 2000 });
  return (p: string, api: GatedApi): { rt: FleetRuntime; router: RouterService } => {
    const rt = h.runtime({ redis: record(p), api, seed: 1, clock });
    const config = parseRouterConfig({
      replicas: [url].flat().map((u) => ({ url: u })),
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      redis: record(p),
      ...extra,
    });
    return { rt, router: new RouterService(config, rt) };
  };
}

const fresh = async (rt: FleetRuntime, url: string) => (await rt.store.views([url]))[0]?.health === 'up';
const completion = (model: string) => Buffer.from(JSON.stringify({ model, prompt: 'hi', max_tokens: 1 }));

/** The simulated replicas of the running test, stopped after it. */
let fleet: SimFleet | undefined;
afterEach(async () => {
  await fleet?.stop();
  fleet = undefined;
});

describe('a request whose decision spans two `redis` record changes', () => {
  it('leaves no lease open in any state when its slow load fails after the second change', async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const [pa, pb, pc] = [h.prefix(), h.prefix(), h.prefix()];
    // Time stands still unless the test moves it: no poll, probe or timer fires on its own.
    const configure = node(url, new VirtualClock(), { max_loaded_adapters: 2 });
    const loads: Loads = { gate: new Gate(), asked: 0 };
    const apiA = new GatedApi(loads);
    const a = configure(pa, apiA);
    // The request starts on A and waits there, for the replica's first scrape (no fresh view yet).
    let outcome: RouteOutcome | undefined;
    const routed = a.router
      .route({ path: '/v1/completions', body: completion('x') })
      .then((o) => (outcome = o));
    await waitFor(() => apiA.scrapesAsked > 0, 10_000, 'the scrape on A');
    // The record changes A -> B while it waits; B polls the replica.
    const apiB = new GatedApi(loads);
    apiB.scrapes.release();
    const b = configure(pb, apiB);
    const aRetired = a.rt.retire(b.rt);
    await (b.router as unknown as { ready: Promise<void> }).ready;
    await b.rt.poller.refreshUrl(url);
    expect(await fresh(b.rt, url)).toBe(true);
    apiA.scrapes.release();
    // It takes its lease and starts its load, which the replica holds.
    await waitFor(() => loads.asked === 1 || outcome !== undefined, 10_000, 'the load asked of the replica');
    expect(outcome).toBeUndefined();
    // The record changes B -> C during the load.
    const apiC = new GatedApi(loads);
    apiC.scrapes.release();
    const c = configure(pc, apiC);
    await b.rt.retire(c.rt);
    // The load fails: the replica answers 500.
    await fleet.replicas[0]!.fault({ kind: 'failLoads', count: 1 });
    loads.gate.release();
    await routed;
    expect(outcome).toMatchObject({ kind: 'respond', status: 502 });
    await aRetired;
    // Its lease is given back: open in no state the node used (before: open in C's until
    // lease_max_age_ms, where nothing would release it).
    expect({ a: await h.openIn(pa), b: await h.openIn(pb), c: await h.openIn(pc) }).toEqual({
      a: [],
      b: [],
      c: [],
    });
  }, 30_000);

  it("a decision ending on a replaced runtime unloads nothing: the new runtime's requests are not in its store", async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const [pa, pb] = [h.prefix(), h.prefix()];
    const configure = node(url, systemClock, {
      max_loaded_adapters: 1,
      room_wait: 'replica',
      queue_timeout_ms: 1500,
    });
    const loads: Loads = { gate: new Gate(), asked: 0 };
    loads.gate.release();
    const [apiA, apiB] = [new GatedApi(loads), new GatedApi(loads)];
    apiA.scrapes.release();
    apiB.scrapes.release();
    const a = configure(pa, apiA);
    // 'p' takes the only slot, its request still running; a request for 'q' waits on A for room.
    const p = await a.router.route({ path: '/v1/completions', body: completion('p') });
    expect(p.kind).toBe('proxy');
    let q: RouteOutcome | undefined;
    const routed = a.router.route({ path: '/v1/completions', body: completion('q') }).then((o) => (q = o));
    // The record changes A -> B; a request for 'p' comes to B (its lease in B's state only).
    const b = configure(pb, apiB);
    const aRetired = a.rt.retire(b.rt);
    await (b.router as unknown as { ready: Promise<void> }).ready;
    await b.rt.poller.refreshUrl(url);
    const onB = await b.router.route({ path: '/v1/completions', body: completion('p') });
    expect(onB).toMatchObject({ kind: 'proxy', stage: 'holder' });
    // The first request for 'p' ends: on A's count 'p' is idle, and neither request reached the
    // replica, whose own word says idle too. Only B knows its request. The request for 'q' is
    // decided again on B (its wait for room on A ended with the change), where 'p' is busy: 503.
    await a.router.finish((p as { leaseId: string }).leaseId, 200);
    await routed;
    expect(q).toMatchObject({ kind: 'respond', status: 503 });
    expect(fleet.replicas[0]!.adapterLog().filter((e) => e.op === 'unload')).toEqual([]);
    await b.router.finish((onB as { leaseId: string }).leaseId, 200);
    await aRetired;
  }, 30_000);
});

/** A GatedApi whose replica reads (registry and activity) wait on `held` while it is set. */
class HeldReadsApi extends GatedApi {
  held: Gate | null = null;
  readsAsked = 0;
  override async residency(url: string, timeoutMs: number) {
    this.readsAsked++;
    if (this.held) await this.held.open;
    return super.residency(url, timeoutMs);
  }
  override async activity(url: string, timeoutMs: number) {
    if (this.held) await this.held.open;
    return super.activity(url, timeoutMs);
  }
}

/**
 * One simulated replica of one slot on a clock that moves only when told, and two nodes' replica
 * APIs (scrapes open, each node's loads behind its own gate, both shut).
 */
async function oneSlotTwoNodes<Api extends GatedApi>(ApiOf: new (loads: Loads) => Api) {
  fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
  const url = fleet.urls[0]!;
  const clock = new VirtualClock();
  const configure = node(url, clock, { max_loaded_adapters: 1 });
  const loadsA: Loads = { gate: new Gate(), asked: 0 };
  const loadsB: Loads = { gate: new Gate(), asked: 0 };
  const [apiA, apiB] = [new ApiOf(loadsA), new ApiOf(loadsB)];
  apiA.scrapes.release();
  apiB.scrapes.release();
  return { url, clock, configure, loadsA, loadsB, apiA, apiB };
}

describe('a load decided on a runtime replaced by a change to other state', () => {
  it("is not undone over the limit: the new state's requests of it are not in the old store", async () => {
    // Seed 13185: a node's request decided on the old state and a peer's on the new one each
    // loaded `team,a` on one replica; the old runtime's load landed over the limit, and its
    // after-load check, the replica's word saying idle, unloaded it as the new state's request
    // reached the engine (`unloaded with 0 running and 1 waiting`).
    // Time stands still unless the test moves it: the replica's word A's check waits for stays fresh.
    const { url, clock, configure, loadsA, loadsB, apiA, apiB } = await oneSlotTwoNodes(HeldReadsApi);
    loadsB.gate.release();
    const a = configure(h.prefix(), apiA);
    // A's state is past the hold-off a fresh state starts with (found emptied: no epoch yet).
    await (a.router as unknown as { ready: Promise<void> }).ready;
    await a.rt.poller.refreshUrl(url);
    // In steps, each store round trip answered before the next: a heartbeat's first reply finds no epoch.
    for (let i = 0; i < 40; i++) {
      await clock.run(clock.now() + 100);
      await new Promise((r) => setTimeout(r, 5));
    }
    expect((a.rt.store as FailoverFleetStore).unloadsHeldOff()).toBe(false);
    // A request for 'x' is decided on A, the replica empty; the replica holds its load.
    let x: RouteOutcome | undefined;
    const routed = a.router.route({ path: '/v1/completions', body: completion('x') }).then((o) => (x = o));
    await waitFor(() => loadsA.asked === 1 || x !== undefined, 10_000, "A's load asked of the replica");
    expect(x).toBeUndefined();
    // The record changes A -> B (other state); B loads 'y' into the slot its state sees free.
    const b = configure(h.prefix(), apiB);
    const aRetired = a.rt.retire(b.rt);
    await (b.router as unknown as { ready: Promise<void> }).ready;
    await b.rt.poller.refreshUrl(url);
    const y = await b.router.route({ path: '/v1/completions', body: completion('y') });
    expect(y).toMatchObject({ kind: 'proxy' });
    // A's load lands, over the limit of 1; its after-load check waits for the replica's answers.
    apiA.held = new Gate();
    const asked = apiA.readsAsked;
    loadsA.gate.release();
    await waitFor(() => apiA.readsAsked > asked, 10_000, "A's after-load check");
    // B adopts 'x' from a poll and sends a request to it: its lease is in B's state only.
    await b.rt.poller.refreshUrl(url);
    const onB = await b.router.route({ path: '/v1/completions', body: completion('x') });
    expect(onB).toMatchObject({ kind: 'proxy', stage: 'holder' });
    // A's check reads the replica over its limit with 'x' idle (B's request not yet queued).
    apiA.held.release();
    const unloads = () => fleet!.replicas[0]!.adapterLog().filter((e) => e.op === 'unload');
    await waitFor(() => x !== undefined || unloads().length > 0, 10_000, "the end of A's check");
    expect(unloads()).toEqual([]);
    await routed;
    expect(x).toMatchObject({ kind: 'proxy' });
    for (const o of [x, y, onB])
      await (o === x ? a : b).router.finish((o as { leaseId: string }).leaseId, 200);
    await aRetired;
  }, 30_000);
});

describe("a load decided during the new state's unload hold-off", () => {
  it('is not undone over the limit when it lands after the hold-off', async () => {
    // Seed 37497: a peer still on the old state loaded the same adapter beside this load; vLLM ran
    // them one by one, so the peer was answered "already loaded", its request sent, only once this
    // load landed, after the hold-off: the after-load check, asking the hold-off only then, undid it.
    const { url, clock, configure, loadsA, loadsB, apiA, apiB } = await oneSlotTwoNodes(GatedApi);
    loadsA.gate.release();
    const a = configure(h.prefix(), apiA);
    await (a.router as unknown as { ready: Promise<void> }).ready;
    // The record changes A -> B (other state): B holds off its unloads.
    const b = configure(h.prefix(), apiB);
    const aRetired = a.rt.retire(b.rt);
    await (b.router as unknown as { ready: Promise<void> }).ready;
    await b.rt.poller.refreshUrl(url);
    const store = b.rt.store as FailoverFleetStore;
    expect(store.unloadsHeldOff()).toBe(true);
    // A request for 'x' is decided on B during the hold-off; the replica holds its load.
    let x: RouteOutcome | undefined;
    const routed = b.router.route({ path: '/v1/completions', body: completion('x') }).then((o) => (x = o));
    await waitFor(() => loadsB.asked === 1 || x !== undefined, 10_000, "B's load asked of the replica");
    expect(x).toBeUndefined();
    // The hold-off ends (two probe intervals), in steps, each store round trip answered before the next.
    for (let i = 0; i < 40 && store.unloadsHeldOff(); i++) {
      await clock.run(clock.now() + 100);
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(store.unloadsHeldOff()).toBe(false);
    // A peer's load on the old state lands first ('y', unseen by B): B's load lands over the limit of 1.
    await new HttpReplicaApi().loadAdapter(url, 'y', '/adapters/y', 5000);
    loadsB.gate.release();
    const unloads = () => fleet!.replicas[0]!.adapterLog().filter((e) => e.op === 'unload');
    await waitFor(() => x !== undefined || unloads().length > 0, 10_000, "the end of B's after-load check");
    expect(unloads()).toEqual([]);
    await routed;
    expect(x).toMatchObject({ kind: 'proxy' });
    await b.router.finish((x as { leaseId: string }).leaseId, 200);
    await aRetired;
  }, 30_000);
});

describe('a decision on a runtime replaced by a change to other state', () => {
  it.each(['replica', 'anywhere'])(
    'a cold request waiting for room there is decided again on the new runtime and served (room_wait %s)',
    async (roomWait) => {
      // Seed 16974: the old runtime unloads nothing once replaced, and the new one unloads nothing
      // while the old one's decisions run, this request's among them: it waited until
      // queue_timeout_ms for an adapter idle all along, then 503.
      fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
      const url = fleet.urls[0]!;
      const queueTimeoutMs = 10_000;
      const configure = node(url, systemClock, {
        max_loaded_adapters: 1,
        room_wait: roomWait,
        queue_timeout_ms: queueTimeoutMs,
      });
      const loads: Loads = { gate: new Gate(), asked: 0 };
      loads.gate.release();
      const [apiA, apiB] = [new GatedApi(loads), new GatedApi(loads)];
      apiA.scrapes.release();
      apiB.scrapes.release();
      const a = configure(h.prefix(), apiA);
      // 'p' takes the only slot, its request still running; a request for 'q' waits on A for room
      // (`anywhere`: for a replica with room, in the placement).
      const p = await a.router.route({ path: '/v1/completions', body: completion('p') });
      expect(p.kind).toBe('proxy');
      const asked = Date.now();
      let q: RouteOutcome | undefined;
      const routed = a.router.route({ path: '/v1/completions', body: completion('q') }).then((o) => (q = o));
      await waitFor(() => a.rt.manager.roomWants.size > 0 || q !== undefined, 10_000, "q's wait for room");
      // The record changes A -> B (other state); then the request for 'p' ends: 'p' is idle.
      const b = configure(h.prefix(), apiB);
      const aRetired = a.rt.retire(b.rt);
      await (b.router as unknown as { ready: Promise<void> }).ready;
      await b.rt.poller.refreshUrl(url);
      await a.router.finish((p as { leaseId: string }).leaseId, 200);
      await routed;
      // Served once the new state's hold-off (two probe intervals) is over, not 503 at the queue timeout.
      expect(q).toMatchObject({ kind: 'proxy', adapter: 'q' });
      expect(Date.now() - asked).toBeLessThan(queueTimeoutMs / 2);
      expect(fleet.replicas[0]!.adapterLog().map((e) => `${e.op} ${e.name}`)).toEqual([
        'load p',
        'unload p',
        'load q',
      ]);
      await b.router.finish((q as { leaseId: string }).leaseId, 200);
      await aRetired;
    },
    30_000,
  );

  it('goes to no replica the runtime polling now has seen down meanwhile', async () => {
    // Seed 100526: polling passed to the successor, so the replaced runtime's own store still
    // said "up" when the decision's wait ended, 1.8 s after the successor had polled it down.
    fleet = await SimFleet.start([0, 1].map(() => ({ adapterDirs: ['/adapters'], timeScale: 20 })));
    const clock = new VirtualClock();
    const configure = node(fleet.urls, clock, { max_loaded_adapters: 2 });
    const loads: Loads = { gate: new Gate(), asked: 0 };
    const [apiA, apiB] = [new GatedApi(loads), new GatedApi(loads)];
    apiA.scrapes.release();
    apiB.scrapes.release();
    const a = configure(h.prefix(), apiA);
    // A request for 'x' is decided on A, both replicas up, and its load is held by the replica.
    let outcome: RouteOutcome | undefined;
    const routed = a.router
      .route({ path: '/v1/completions', body: completion('x') })
      .then((o) => (outcome = o));
    await waitFor(() => loads.asked === 1 || outcome !== undefined, 10_000, 'the load asked of the replica');
    const chosen = apiA.loadedOn[0]!;
    // The record changes A -> B (other state); B, polling now, sees that replica down.
    const b = configure(h.prefix(), apiB);
    const aRetired = a.rt.retire(b.rt);
    await (b.router as unknown as { ready: Promise<void> }).ready;
    await clock.run(clock.now() + 100);
    apiB.down.add(chosen);
    await b.rt.poller.refreshUrl(chosen);
    expect((await b.rt.store.views([chosen]))[0]?.health).toBe('down');
    // The load lands: the request is decided again, onto the other replica.
    loads.gate.release();
    await routed;
    expect(outcome?.kind === 'proxy' ? outcome.url : outcome).toBe(fleet.urls.find((u) => u !== chosen));
    await a.router.finish((outcome as { leaseId: string }).leaseId, 200);
    await aRetired;
  }, 30_000);
});

describe('record changes from no `redis` record and back again', () => {
  it("the new in-process runtime does not unload under a request counted only in the first one's store", async () => {
    // Every runtime without Redis has the same (empty) state key, yet each keeps its own
    // in-process store: the newest one's store does not count the first one's leases.
    const m1 = h.runtime({});
    await m1.store.upsertReplica(SPEC);
    const running = await h.take(m1);
    const y = h.runtime({ redis: h.redis.config(h.prefix(), { timeout: 2000 }) });
    const m1Retiring = m1.retire(y);
    const m2 = h.runtime({});
    await y.retire(m2);
    expect(m2.manager.leasedElsewhere!(U, 'a')).toBe(true);
    expect(await running.release(200)).toMatchObject({ id: running.id });
    await m1Retiring;
    expect(m2.manager.leasedElsewhere!(U, 'a')).toBe(false);
  }, 30_000);

  it('a replaced runtime closes only after its last release has reached its store', async () => {
    const m1 = h.runtime({});
    await m1.store.upsertReplica(SPEC);
    const running = await h.take(m1);
    // The store's release waits on a gate: the release is under way, not yet counted.
    let open = () => {};
    const gate = new Promise<void>((r) => (open = r));
    const release = m1.store.release.bind(m1.store);
    m1.store.release = async (...args) => {
      await gate;
      return release(...args);
    };
    let retired = false;
    const m1Retiring = m1.retire(h.runtime({})).then(() => (retired = true));
    const released = running.release(200);
    await new Promise((r) => setTimeout(r, 50));
    // Still draining: closing now would drop the release on the floor (or into a closed store).
    expect(retired).toBe(false);
    open();
    expect(await released).toMatchObject({ id: running.id });
    await m1Retiring;
    expect(retired).toBe(true);
  }, 30_000);
});
