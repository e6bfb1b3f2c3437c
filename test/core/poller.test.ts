import { BackendError } from '../../src/backends/errors';
import type { LoadOutcome, ReplicaApi, Scrape, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { Poller } from '../../src/fleet/poller';
import type { ReplicaSpec } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { seededRandom } from '../../src/random';

/** Unit-test stand-in: scrapes take `ms` of virtual time; records overlap per replica. */
class SlowApi implements ReplicaApi {
  active = new Map<string, number>();
  maxOverlap = 0;
  scrapes: number[] = [];
  constructor(
    private clock: VirtualClock,
    public ms: number,
    public fail: false | 'refused' | 'timeout' = false,
  ) {}
  async scrape(r: ReplicaSpec): Promise<Scrape> {
    const n = (this.active.get(r.url) ?? 0) + 1;
    this.active.set(r.url, n);
    this.maxOverlap = Math.max(this.maxOverlap, n);
    this.scrapes.push(this.clock.now());
    await sleep(this.clock, this.ms);
    this.active.set(r.url, n - 1);
    if (this.fail === 'refused') throw new BackendError('connect', 'ECONNREFUSED');
    if (this.fail === 'timeout') throw new BackendError('timeout', 'no answer within 1000 ms');
    return {
      load: { waiting: 1, running: 2, kvUsage: 0.5, activeAdapters: [], malformedLines: 0 },
      registry: [],
    };
  }
  async loadAdapter(): Promise<LoadOutcome> {
    return 'loaded';
  }
  async unloadAdapter(): Promise<UnloadOutcome> {
    return 'unloaded';
  }
}

async function setup(scrapeMs: number, options = {}) {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: 'http://r1:1', backend: 'vllm', priority: 0 });
  const api = new SlowApi(clock, scrapeMs);
  const poller = new Poller(
    store,
    api,
    clock,
    { intervalMs: 100, timeoutMs: 1000, jitter: 0.1, leaseMaxAgeMs: 1000, ...options },
    seededRandom(1),
    silentLogger,
  );
  return { clock, store, api, poller };
}

describe('Poller', () => {
  it('never runs two polls of one replica at once, even when a poll outlasts the interval', async () => {
    const { clock, api, poller } = await setup(350);
    poller.start();
    await clock.run(2000);
    poller.stop();
    await clock.run();
    expect(api.maxOverlap).toBe(1);
    // A 350 ms poll every ~100 ms: a new poll starts only once the previous one ended.
    expect(api.scrapes.length).toBeGreaterThanOrEqual(4);
    expect(api.scrapes.length).toBeLessThanOrEqual(6);
  });

  it('polls each interval with jitter within the configured fraction', async () => {
    const { clock, api, poller } = await setup(1);
    poller.start();
    await clock.run(3000);
    poller.stop();
    const gaps = api.scrapes.slice(1).map((t, i) => t - api.scrapes[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(90);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(110);
    expect(new Set(gaps.map((g) => Math.round(g))).size).toBeGreaterThan(3); // not in lock step
  });

  it('writes snapshots, marks a replica down when a poll fails, and joins a refresh already running', async () => {
    const { clock, store, api, poller } = await setup(50);
    const spec = { url: 'http://r1:1', backend: 'vllm' as const, priority: 0 };
    const a = poller.refresh(spec);
    const b = poller.refresh(spec);
    expect(a).toBe(b);
    await clock.run();
    await a;
    expect((await store.views(['http://r1:1']))[0]).toMatchObject({
      health: 'up',
      waiting: 1,
      running: 2,
      kvUsage: 0.5,
    });
    api.fail = 'refused';
    const c = poller.refresh(spec);
    await clock.run();
    await c;
    expect((await store.views(['http://r1:1']))[0]).toMatchObject({
      health: 'down',
      lastError: 'ECONNREFUSED',
    });
    expect(poller.stats).toEqual({ polls: 2, errors: 1, leasesExpired: 0 });
  });

  it('reclaims leases older than the maximum age on its rounds', async () => {
    const { clock, store, poller } = await setup(1, { leaseMaxAgeMs: 500 });
    await store.acquire({ id: 'lost', url: 'http://r1:1', adapter: 'a', at: 0 });
    poller.start();
    await clock.run(1000);
    poller.stop();
    expect(await store.inFlightTotal()).toBe(0);
    expect(poller.stats.leasesExpired).toBe(1);
  });

  it('marks a replica down after two polls in a row time out, at once when refused', async () => {
    // One slow /metrics (a replica busy with a long prefill, a GC pause) must not send its
    // resident adapters' traffic cold elsewhere; Kong's healthchecks count timeouts against
    // their own threshold (`healthchecks.active.unhealthy.timeouts`,
    // kong/db/schema/entities/upstreams.lua, Kong 3.9.3), apart from TCP and HTTP failures, and
    // a success clears them (lua-resty-healthcheck 3.1.0 `incr_counter`).
    const { clock, store, api, poller } = await setup(50);
    const spec = { url: 'http://r1:1', backend: 'vllm' as const, priority: 0 };
    const poll = async () => {
      const p = poller.refresh(spec);
      await clock.run();
      await p;
      return (await store.views(['http://r1:1']))[0]!.health;
    };
    expect(await poll()).toBe('up');
    api.fail = 'timeout';
    expect(await poll()).toBe('up');
    expect(await poll()).toBe('down');
    api.fail = false;
    expect(await poll()).toBe('up');
    // A success in between starts the count again.
    api.fail = 'timeout';
    expect(await poll()).toBe('up');
    api.fail = false;
    expect(await poll()).toBe('up');
    api.fail = 'timeout';
    expect(await poll()).toBe('up');
    // A refused connection is no slow answer: down at once.
    api.fail = 'refused';
    expect(await poll()).toBe('down');
    expect(poller.stats.errors).toBe(5);
  });

  it('marks a replica down at the first timeout when configured with a threshold of 1', async () => {
    const { clock, store, api, poller } = await setup(50, { unhealthyTimeouts: 1 });
    const spec = { url: 'http://r1:1', backend: 'vllm' as const, priority: 0 };
    api.fail = 'timeout';
    const p = poller.refresh(spec);
    await clock.run();
    await p;
    expect((await store.views(['http://r1:1']))[0]!.health).toBe('down');
  });
});
