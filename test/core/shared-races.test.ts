/**
 * Races between Kong nodes sharing one real redis-server (issue 16, items 4, 5 and 8): clocks
 * that disagree, two nodes making room for the same cold adapter, and adapters classified
 * before the configuration that manages them registered.
 */
import { randomBytes } from 'node:crypto';
import { AdapterManager, type AdapterPolicy } from '../../src/adapters/manager';
import { HttpReplicaApi } from '../../src/backends/http-replica-api';
import { systemClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { FleetStore } from '../../src/fleet/store';
import { silentLogger } from '../../src/log';
import { SimFleet } from '../../sim/fleet';
import { useRedisStores } from '../helpers/redis-stores';

const U = 'http://10.0.0.1:8000';
const load = { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 };
const TTL = 60_000;
/** Nothing here takes Redis away: a connect bound a loaded machine cannot miss. */
const CALM = { timeout: 2000 };

const env = useRedisStores();
const open = env.open;

/** Two nodes' stores on one prefix. */
function nodes(n = 2): RedisFleetStore[] {
  const p = `sr${randomBytes(4).toString('hex')}:`;
  const out = Array.from({ length: n }, (_, i) => new RedisFleetStore(env.redis.config(p, CALM), `node${i}`));
  open.push(...out);
  return out;
}

describe('clock skew between nodes (item 4)', () => {
  it('a poller whose clock runs 100 ms ahead does not drop an adapter another node just loaded', async () => {
    const [loader, poller] = nodes();
    await loader!.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const AHEAD = 100;
    // The poller starts its scrape; the registry it reads predates the load below.
    const scrapeStart = Date.now() + AHEAD;
    await new Promise((r) => setTimeout(r, 5));
    const f = await loader!.beginLoad(U, 'x', Date.now(), 1, TTL);
    expect(f).not.toBeNull();
    expect(await loader!.finishLoad(U, 'x', f!, true, Date.now())).toBe(true);
    await poller!.applySnapshot(U, {
      at: Date.now() + AHEAD,
      startedAt: scrapeStart,
      ok: true,
      load,
      registry: [],
    });
    expect((await loader!.residents(U)).map((r) => [r.name, r.state])).toEqual([['x', 'loaded']]);
    // The slot stays taken: a second adapter cannot pass the limit of 1.
    expect(await loader!.beginLoad(U, 'y', Date.now(), 1, TTL)).toBeNull();
    expect((await poller!.events(10)).map((e) => e.op)).not.toContain('replica-restart');
  });

  it('a poller whose clock runs behind still applies its newer poll after an ahead node polled', async () => {
    const [ahead, behind] = nodes();
    await ahead!.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const now = Date.now();
    await ahead!.applySnapshot(U, { at: now + 500, startedAt: now + 490, ok: true, load, registry: [] });
    await new Promise((r) => setTimeout(r, 20));
    // Started after the ahead node's poll ended (real time): its figures are the freshest.
    const later = Date.now();
    await behind!.applySnapshot(U, {
      at: later,
      startedAt: later - 5,
      ok: true,
      load: { ...load, waiting: 7 },
      registry: [],
    });
    expect((await ahead!.views([U]))[0]!.waiting).toBe(7);
  });
});

describe('two nodes making room for one cold adapter (item 5)', () => {
  it('on a full replica, one load costs one unload', async () => {
    const fleet = await SimFleet.start([
      { adapterDirs: ['/adapters'], timeScale: 20, engine: { loadBaseMs: 200 } },
    ]);
    const url = fleet.urls[0]!;
    const [sa, sb] = nodes();
    const api = new HttpReplicaApi();
    const ma = new AdapterManager(sa!, api, systemClock, silentLogger);
    const mb = new AdapterManager(sb!, api, systemClock, silentLogger);
    sa!.onRemoteChange = () => ma.roomChanged.notify();
    sb!.onRemoteChange = () => mb.roomChanged.notify();
    const policy: AdapterPolicy = {
      maxLoadedAdapters: 2,
      loadTimeoutMs: 5000,
      queueTimeoutMs: 5000,
      backoffBaseMs: 1000,
      backoffMaxMs: 1000,
      isStatic: () => false,
    };
    const ref = (name: string) => ({ name, path: `/adapters/${name}` });
    try {
      await sa!.upsertReplica({ url, backend: 'vllm', priority: 0 });
      await ma.ensure(url, ref('a'), policy);
      await ma.ensure(url, ref('b'), policy);
      // Both nodes want x at once; a and b are idle.
      const outcomes = await Promise.all([
        ma.ensure(url, ref('x'), policy),
        mb.ensure(url, ref('x'), policy),
      ]);
      expect(outcomes.filter((o) => o === 'loaded')).toHaveLength(1);
      const log = fleet.replicas[0]!.adapterLog();
      expect(log.filter((e) => e.op === 'load' && e.name === 'x')).toHaveLength(1);
      expect(log.filter((e) => e.op === 'unload')).toHaveLength(1);
      // No slot left empty: two adapters, x and the one not evicted.
      expect((await sa!.residents(url)).length).toBe(2);
    } finally {
      await api.close();
      await fleet.stop();
    }
  });
});

describe.each([
  ['memory', () => new MemoryFleetStore() as FleetStore],
  ['redis', () => nodes(1)[0]! as FleetStore],
])('%s store: classification follows the configurations (item 8)', (_kind, make) => {
  it('an adapter classified static before a configuration managing it registered becomes loaded', async () => {
    const s = make();
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const registry = ['p', 'q', 'r', 's'].map((n) => ({ name: n, path: `/adapters/${n}` }));
    // First poll: only a configuration for another route is registered; it manages none of them.
    await s.applySnapshot(U, { at: 1, ok: true, load, registry, managed: () => false, managedVersion: 1 });
    expect((await s.residents(U)).every((r) => r.state === 'static')).toBe(true);
    // A configuration with a template that covers them registers; the next poll sees it.
    await s.applySnapshot(U, {
      at: 2,
      ok: true,
      load,
      registry,
      managed: (_n, p) => p.startsWith('/adapters/'),
      managedVersion: 2,
    });
    expect((await s.residents(U)).map((r) => r.state)).toEqual(['loaded', 'loaded', 'loaded', 'loaded']);
    // They count against the limit now.
    expect(await s.beginLoad(U, 'new', 3, 2, TTL)).toBeNull();
    expect((await s.views([U]))[0]!.residentCount).toBe(4);
  });
});
