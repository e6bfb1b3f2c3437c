/**
 * A poll round and the store's replica list (src/fleet/poller.ts `pollAll`, `refreshUrl`): the
 * replicas the poller already knows (the last list; before any, a failover store's local copy)
 * are scraped at once, not after the list's read (cut off from Redis, that read waits out the
 * command timeout before the failover store answers from its local copy), nor after the shared
 * clock's; a replica the fresh list adds is polled in the same round; one it no longer has gets
 * no write from a poll begun before it came.
 */
import { BackendError } from '../../src/backends/errors';
import type { LoadOutcome, ReplicaApi, Scrape, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, systemClock, VirtualClock, type Clock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { Poller } from '../../src/fleet/poller';
import type { FleetStore } from '../../src/fleet/store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { ReplicaSnapshot, ReplicaSpec } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { seededRandom } from '../../src/random';
import { RedisServer } from '../../harness/redis/server';

const R1: ReplicaSpec = { url: 'http://r1:1', backend: 'vllm', priority: 0 };
const R2: ReplicaSpec = { url: 'http://r2:1', backend: 'vllm', priority: 0 };
const LOAD = { waiting: 0, running: 1, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 };

/** Scrapes take `ms` of virtual time; each is noted with its replica and start. */
class Api implements ReplicaApi {
  scrapes: { url: string; at: number }[] = [];
  /** Scrapes fail (an error answer) once set. */
  fail = false;
  constructor(
    private readonly clock: VirtualClock,
    public ms: number,
  ) {}
  async scrape(r: ReplicaSpec): Promise<Scrape> {
    this.scrapes.push({ url: r.url, at: this.clock.now() });
    await sleep(this.clock, this.ms);
    if (this.fail) throw new BackendError('http', 'answered 500', 500);
    return { load: LOAD, registry: [] };
  }
  async loadAdapter(): Promise<LoadOutcome> {
    return 'loaded';
  }
  async unloadAdapter(): Promise<UnloadOutcome> {
    return 'unloaded';
  }
}

/**
 * The in-process store, whose replica list and shared clock answer after `listMs` and `timeMs`
 * (a node cut off from Redis: each waits out the timeout), and whose list can leave replicas out
 * (`unlisted`: gone from the shared state, a FLUSHALL say). Notes every snapshot written.
 */
class Store extends MemoryFleetStore {
  listMs = 0;
  timeMs: number | null = null;
  readonly unlisted = new Set<string>();
  readonly snapshots: { url: string; s: ReplicaSnapshot }[] = [];
  constructor(private readonly clock: VirtualClock) {
    super();
  }
  override async replicaSpecs(): Promise<ReplicaSpec[]> {
    const specs = (await super.replicaSpecs()).filter((s) => !this.unlisted.has(s.url));
    if (this.listMs > 0) await sleep(this.clock, this.listMs);
    return specs;
  }
  async sharedTime(): Promise<number | undefined> {
    if (this.timeMs === null) return undefined;
    if (this.timeMs > 0) await sleep(this.clock, this.timeMs);
    // The shared clock runs 10,000 ms ahead of this node's.
    return this.clock.now() + 10_000;
  }
  override async applySnapshot(url: string, s: ReplicaSnapshot): Promise<void> {
    this.snapshots.push({ url, s });
    return super.applySnapshot(url, s);
  }
}

/** A poller of `store` through `api` on `clock`: 1 s rounds and timeouts, no jitter. */
function pollerOf(store: FleetStore, api: ReplicaApi, clock: Clock): Poller {
  return new Poller(
    store,
    api,
    clock,
    { intervalMs: 1000, timeoutMs: 1000, jitter: 0, leaseMaxAgeMs: 60_000 },
    seededRandom(1),
    silentLogger,
  );
}

async function setup(scrapeMs: number) {
  const clock = new VirtualClock();
  const store = new Store(clock);
  await store.upsertReplica(R1);
  const api = new Api(clock, scrapeMs);
  const poller = pollerOf(store, api, clock);
  /** One round from now, run to its end. */
  const round = async () => {
    const r = poller.pollAll();
    await clock.run();
    await r;
  };
  return { clock, store, api, poller, round };
}

describe('a poll round and the replica list', () => {
  it('scrapes the replicas it knows at once while the list read waits out a timeout', async () => {
    const { clock, store, api, poller, round } = await setup(10);
    await round(); // the list read once: r1 known
    await clock.run(100);
    store.listMs = 500;
    const begun = clock.now();
    const r = poller.pollAll();
    await clock.run(begun + 50);
    // Before: none until the list answered, 500 ms in.
    expect(api.scrapes.filter((s) => s.at >= begun)).toEqual([{ url: R1.url, at: begun }]);
    await clock.run();
    await r;
  });

  it("scrapes at once on its first round, before any list answered, the replicas the failover store's local copy has", async () => {
    const { clock, store, api, poller } = await setup(10);
    // A failover store's local copy: every replica registered through it, no round trip.
    const local = store as Store & { localReplicaSpecs?: () => Promise<ReplicaSpec[]> };
    local.localReplicaSpecs = async () => [R1];
    store.listMs = 500;
    await clock.run(100);
    const r = poller.pollAll();
    await clock.run(150);
    // Before: none until the list answered, 600 ms in.
    expect(api.scrapes).toEqual([{ url: R1.url, at: 100 }]);
    await clock.run();
    await r;
    expect(api.scrapes).toEqual([{ url: R1.url, at: 100 }]);
  });

  it('does not wait for the shared clock before scraping: its answer, less the time it took, dates the poll', async () => {
    const { clock, store, api, poller } = await setup(10);
    store.timeMs = 500;
    await clock.run(100);
    const p = poller.refresh(R1);
    await clock.run(150);
    expect(api.scrapes).toEqual([{ url: R1.url, at: 100 }]);
    await clock.run();
    await p;
    // Answered at 600 (shared 10,600), 500 ms after the poll began: no later than the shared
    // clock when the scrape began (10,100). Written then.
    expect(store.snapshots.map((x) => x.s)).toMatchObject([
      { startedAt: 100, sharedStartedAt: 10_100, at: 600 },
    ]);
    expect((await store.views([R1.url]))[0]!.health).toBe('up');
  });

  it('polls a replica the fresh list adds in the same round', async () => {
    const { clock, store, api, round } = await setup(10);
    await round();
    await store.upsertReplica(R2);
    store.listMs = 500;
    await clock.run(100);
    await round();
    expect(api.scrapes.filter((s) => s.at >= 100)).toEqual([
      { url: R1.url, at: 100 },
      { url: R2.url, at: 600 },
    ]);
    expect((await store.views([R2.url]))[0]!.health).toBe('up');
  });

  it('writes nothing from a poll begun before a fresh list that no longer has its replica', async () => {
    const { clock, store, api, poller, round } = await setup(300);
    await store.upsertReplica(R2);
    await round();
    const told: string[] = [];
    poller.addPollListener((url) => told.push(url));
    store.snapshots.length = 0;
    // r2 leaves the shared list; the round's list answers 100 ms in, its scrapes end 300 ms in.
    store.unlisted.add(R2.url);
    store.listMs = 100;
    await clock.run(1000);
    await round();
    expect(api.scrapes.filter((s) => s.at >= 1000).map((s) => s.url)).toEqual([R1.url, R2.url]);
    expect(store.snapshots.map((x) => x.url)).toEqual([R1.url]);
    expect(told).toEqual([R1.url]);
    expect(poller.lastLoad.has(R2.url)).toBe(true); // from the first round only
    // The next round polls only what the list has.
    await clock.run(2000);
    await round();
    expect(api.scrapes.filter((s) => s.at >= 2000).map((s) => s.url)).toEqual([R1.url]);
  });

  it('refreshUrl polls a replica it knows at once, and one it does not once the list has it', async () => {
    const { clock, store, api, poller, round } = await setup(10);
    await round();
    store.listMs = 500;
    await clock.run(100);
    const known = poller.refreshUrl(R1.url);
    await clock.run(150);
    expect(api.scrapes.filter((s) => s.at >= 100)).toEqual([{ url: R1.url, at: 100 }]);
    await clock.run();
    await known;
    await store.upsertReplica(R2);
    const begun = clock.now();
    const fresh = poller.refreshUrl(R2.url);
    await clock.run();
    await fresh;
    expect(api.scrapes.filter((s) => s.url === R2.url)).toEqual([{ url: R2.url, at: begun + 500 }]);
  });

  it('keeps the newest list read: an older one answering after it does not take its place', async () => {
    const { clock, store, api, poller, round } = await setup(10);
    await round(); // r1 known
    // A round's list read waits out a timeout and answers r1 alone, as it was when asked...
    store.listMs = 500;
    await clock.run(100);
    const slow = poller.pollAll();
    await clock.run(150);
    // ...while r2 registers and a later read (an asked poll's) answers at once with both.
    await store.upsertReplica(R2);
    store.listMs = 0;
    const fast = poller.refreshUrl(R2.url);
    await clock.run();
    await Promise.all([slow, fast]);
    // The next round polls r2 at once, beside a list read that waits out the timeout again.
    store.listMs = 500;
    await clock.run(2000);
    const r = poller.pollAll();
    await clock.run(2050);
    // With the slow read's [r1] kept: r2 only once the list answered, 500 ms in.
    expect(api.scrapes.filter((s) => s.at >= 2000).map((s) => s.url)).toEqual([R1.url, R2.url]);
    await clock.run();
    await r;
  });
});

describe('a late poll of a replica gone from the shared state', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis.close();
  });

  it('brings it back nowhere: Redis ignores a snapshot of a replica it does not know', async () => {
    const store = new RedisFleetStore(redis.config('late-poll:', { timeout: 2000 }), 'n1');
    try {
      await store.upsertReplica(R1);
      // Its scrape ends when told: the state is emptied meanwhile.
      let begun: () => void = () => undefined;
      let answer: () => void = () => undefined;
      const scraping = new Promise<void>((r) => (begun = r));
      const api = new Api(new VirtualClock(), 0);
      api.scrape = async () => {
        begun();
        await new Promise<void>((r) => (answer = r));
        return { load: LOAD, registry: [{ name: 'a', path: '/a' }] };
      };
      const poller = pollerOf(store, api, systemClock);
      const polled = poller.refresh(R1);
      await scraping;
      await redis.command(['FLUSHALL']);
      answer();
      await polled;
      expect(await store.replicaSpecs()).toEqual([]);
      expect(await store.views([R1.url])).toEqual([]);
      expect(await store.residents(R1.url)).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

describe('a replica re-registered with another backend', () => {
  /** A llama.cpp scrape reads 7 running, a vLLM one 1: what a snapshot was read as shows. */
  const LLAMA: ReplicaSpec = { ...R1, backend: 'llamacpp' };
  async function reRegistered() {
    const s = await setup(300);
    const backends: string[] = [];
    s.api.scrape = async (r: ReplicaSpec): Promise<Scrape> => {
      backends.push(r.backend);
      await sleep(s.clock, 300);
      return r.backend === 'llamacpp'
        ? { load: { ...LOAD, running: 7 }, llamaAdapters: [] }
        : { load: LOAD, registry: [] };
    };
    await s.round(); // r1 listed as vLLM
    backends.length = 0;
    s.store.snapshots.length = 0;
    // The same url registered again as llama.cpp; the next list answers 100 ms in.
    await s.store.upsertReplica(LLAMA);
    s.store.listMs = 100;
    await s.clock.run(1000);
    return { ...s, backends };
  }

  it('a round scrapes it as its fresh spec says, and writes nothing read as the old one', async () => {
    const { store, backends, round } = await reRegistered();
    await round();
    // Before: ['vllm'] only, its reading written over the llama.cpp record.
    expect(backends).toEqual(['vllm', 'llamacpp']);
    expect(store.snapshots.map((x) => x.s.load?.running)).toEqual([7]);
  });

  it('a failed scrape read with the old backend marks it down nowhere and tells no listener', async () => {
    const s = await reRegistered();
    // A llama.cpp server answers vLLM's /metrics with a 404.
    s.api.scrape = async (r: ReplicaSpec): Promise<Scrape> => {
      s.backends.push(r.backend);
      await sleep(s.clock, 300);
      if (r.backend === 'vllm') throw new BackendError('http', 'HTTP 404 from /metrics', 404);
      return { load: { ...LOAD, running: 7 }, llamaAdapters: [] };
    };
    const told: boolean[] = [];
    s.poller.addPollListener((_url, ok) => told.push(ok));
    await s.round();
    expect(s.backends).toEqual(['vllm', 'llamacpp']);
    // Not a down written, then the fresh spec's up: requests routed away meanwhile, a
    // "stopped answering polls" warning and a poll error counted for a replica that answers.
    expect(s.store.snapshots.map((x) => x.s.ok)).toEqual([true]);
    expect(told).toEqual([true]);
  });

  it('refreshUrl polls it by its fresh spec whichever replica the list has first', async () => {
    const s = await setup(300);
    const backends: string[] = [];
    s.api.scrape = async (r: ReplicaSpec): Promise<Scrape> => {
      backends.push(`${r.url} ${r.backend}`);
      await sleep(s.clock, 300);
      return r.backend === 'llamacpp'
        ? { load: { ...LOAD, running: 7 }, llamaAdapters: [] }
        : { load: LOAD, registry: [] };
    };
    await s.store.upsertReplica(R2);
    await s.round(); // r1, then r2, listed as vLLM
    backends.length = 0;
    s.store.snapshots.length = 0;
    await s.store.upsertReplica({ ...R2, backend: 'llamacpp' });
    s.store.listMs = 100;
    await s.clock.run(1000);
    const p = s.poller.refreshUrl(R2.url, true);
    await s.clock.run();
    await p;
    expect(backends).toEqual([`${R2.url} vllm`, `${R2.url} llamacpp`]);
    expect(s.store.snapshots.map((x) => [x.url, x.s.load?.running])).toEqual([[R2.url, 7]]);
  });

  it('refreshUrl does too', async () => {
    const { clock, store, backends, poller } = await reRegistered();
    const p = poller.refreshUrl(R1.url, true);
    await clock.run();
    await p;
    expect(backends).toEqual(['vllm', 'llamacpp']);
    expect(store.snapshots.map((x) => x.s.load?.running)).toEqual([7]);
  });
});

describe("a poll's shared start when this node's clock steps", () => {
  it('is no later than the shared clock when the poll began, the local clock stepped back during the read', async () => {
    const clock = new VirtualClock();
    const store = new Store(clock);
    await store.upsertReplica(R1);
    store.timeMs = 500;
    // This node's wall clock: stepped by a skew correction (durations on it shrink by the step);
    // a process's monotonic time (`monotonic`) does not step.
    const local = {
      skew: 0,
      now: () => clock.now() + local.skew,
      monotonic: () => clock.now(),
      after: (ms: number, fn: () => void) => clock.after(ms, fn),
    };
    const poller = pollerOf(store, new Api(clock, 10), local);
    await clock.run(100);
    const p = poller.refresh(R1);
    await clock.run(300);
    local.skew = -400;
    await clock.run();
    await p;
    // The shared clock read 10,100 when the poll began; its answer, 10,600, came 500 ms later.
    // Before: 10,500 (less 100 ms of the stepped clock), a registry read older than that.
    expect(store.snapshots[0]!.s.sharedStartedAt).toBeLessThanOrEqual(10_100);
  });

  it('carries its start and end on the monotonic clock too, for a duration measured later (seen-down.ts, the snapshot script)', async () => {
    const clock = new VirtualClock();
    const store = new Store(clock);
    await store.upsertReplica(R1);
    const local = {
      skew: 0,
      now: () => clock.now() + local.skew,
      monotonic: () => clock.now(),
      after: (ms: number, fn: () => void) => clock.after(ms, fn),
    };
    const api = new Api(clock, 500);
    const poller = pollerOf(store, api, local);
    await clock.run(100);
    const p = poller.refresh(R1);
    await clock.run(300);
    local.skew = -400;
    await clock.run();
    await p;
    // 500 ms by the monotonic clock; by the stepped wall clock, 100.
    expect(store.snapshots.map((x) => [x.s.startedAt, x.s.at, x.s.monoStartedAt, x.s.monoAt])).toEqual([
      [100, 200, 100, 600],
    ]);
    // A failed poll too: begun at 1,000 by the monotonic clock (600 by the wall), 500 ms long.
    api.fail = true;
    await clock.run(1_000);
    const q = poller.refresh(R1);
    await clock.run();
    await q;
    expect(store.snapshots.map((x) => [x.s.ok, x.s.monoStartedAt, x.s.monoAt])[1]).toEqual([
      false,
      1_000,
      1_500,
    ]);
  });
});
