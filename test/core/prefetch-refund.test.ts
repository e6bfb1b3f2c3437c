/**
 * A prefetch unit spent in the store and followed by no load call goes back to the fleet's window
 * at the end of its tick: requests' cold loads are not refused (429) for loads nobody made. Real
 * parts: a redis-server, the store a node runs (FailoverFleetStore over RedisFleetStore's
 * scripts), the adapter manager and the prefetcher; the replica is a stub that reports its one
 * loaded adapter busy, so the prefetch's victim is never unloaded and its load never called.
 */
import { AdapterManager } from '../../src/adapters/manager';
import type { LoadOutcome, ReplicaActivity, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { systemClock } from '../../src/clock';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { silentLogger } from '../../src/log';
import { Prefetcher } from '../../src/prefetch/prefetcher';
import { spendColdLoad } from '../../src/router/cold-budget';
import type { FleetRuntime } from '../../src/runtime';
import { waitFor } from '../../harness/wait';
import { useRedisStores } from '../helpers/redis-stores';
import { prefetchSettings } from '../helpers/prefetch-settings';
import { adapterPolicy } from '../helpers/adapter-policy';

const R1 = 'http://r1:8000';
/** The fleet's cold loads a minute; prefetch's share is a quarter of it (one). */
const FLEET = 4;

/** R1 holds `b`, busy for as long as `busy` says; loads and unloads are logged. */
class BusyReplica implements ReplicaApi {
  calls: string[] = [];
  busy = true;
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(url: string, name: string): Promise<LoadOutcome> {
    this.calls.push(`load ${name}@${url}`);
    return 'loaded';
  }
  async unloadAdapter(url: string, name: string): Promise<UnloadOutcome> {
    this.calls.push(`unload ${name}@${url}`);
    return 'unloaded';
  }
  async activity(): Promise<ReplicaActivity> {
    return { busy: this.busy ? ['b'] : [] };
  }
  async residency(): Promise<{ name: string; path: string }[]> {
    return [{ name: 'b', path: '/a/b' }];
  }
}

const policy = adapterPolicy({ maxLoadedAdapters: 1 });
const settings = prefetchSettings({ coldLoadsPerMinute: FLEET });

const stores = useRedisStores();

describe("a prefetch unit whose load was never called, through Redis's budget script", () => {
  it("goes back to the fleet's window at the tick's end: the request it would have refused is allowed", async () => {
    const prefix = `pf${Date.now().toString(36)}:`;
    const shared = new RedisFleetStore(stores.redis.config(prefix, { node_ttl_ms: 60_000 }), 'n1');
    const store = new FailoverFleetStore(shared, silentLogger, { probeMs: 10, logEveryMs: 60_000 });
    stores.open.push(store);
    await store.upsertReplica({ url: R1, backend: 'vllm', priority: 0 });
    await store.applySnapshot(R1, {
      at: Date.now(),
      ok: true,
      load: { waiting: 0, running: 0, activeAdapters: [], malformedLines: 0 },
      registry: [{ name: 'b', path: '/a/b' }],
      managed: () => true,
    });
    // A store just built holds unloads off for two probes (its shared store counts as just back).
    await waitFor(() => !store.unloadsHeldOff(), 5000, 'unloads no longer held off');
    const api = new BusyReplica();
    const manager = new AdapterManager(store, api, systemClock, silentLogger);
    const prefetcher = new Prefetcher(store, manager, systemClock, silentLogger, () => policy);
    prefetcher.configure(settings);
    for (let i = 0; i < 40; i++)
      prefetcher.observe({ name: 'a', path: '/a/a' }, [R1], Date.now() - settings.intervalMs - 1000);

    const rt = { store, clock: systemClock } as unknown as FleetRuntime;
    const request = () => spendColdLoad(rt, { perMinute: FLEET, perConsumerPerMinute: 0 }, 'c');
    // Requests take three of the fleet's four this minute.
    for (let i = 0; i < FLEET - 1; i++) await request();
    // The tick takes the fourth for `a` on R1; `b` stays busy there: no unload, no load call.
    await prefetcher.maybeTick();
    expect(prefetcher.stats).toMatchObject({ ticks: 1, planned: 1, loaded: 0, overBudget: 0, refunded: 1 });
    expect(api.calls).toEqual([]);
    // The fourth is the requests' again, and only it.
    await expect(request()).resolves.toBeUndefined();
    await expect(request()).rejects.toMatchObject({ status: 429 });
  });
});
