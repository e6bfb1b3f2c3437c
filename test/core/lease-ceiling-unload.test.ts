/**
 * A request running past the lease's age ceiling (LEASE_CEILING × lease_max_age_ms, whatever the
 * renewals): its lease is reclaimed, so the store no longer counts it, and only the replica's own
 * word (its `/metrics` report of running adapters) stands between it and an unload. Both stores.
 */
import { randomBytes } from 'node:crypto';
import { AdapterManager } from '../../src/adapters/manager';
import type { ReplicaActivity, ReplicaApi, LoadOutcome, UnloadOutcome } from '../../src/backends/replica-api';
import { systemClock } from '../../src/clock';
import { RouterError } from '../../src/errors';
import { LEASE_CEILING } from '../../src/fleet/memory-leases';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { FleetStore } from '../../src/fleet/store';
import { silentLogger } from '../../src/log';
import { adapterPolicy as policy } from '../helpers/adapter-policy';
import { useRedisStores } from '../helpers/redis-stores';

const U = 'http://10.0.0.1:8000';
const load = { running: 1, waiting: 0, kvUsage: 0.1, activeAdapters: [] as string[], malformedLines: 0 };
/** As fleet-store.test.ts's ceiling test: a pass renews well within it on a loaded machine. */
const MAX_AGE = 300;

/** A replica that reports `busy` running (vLLM's `lora_requests_info`). */
class Replica implements ReplicaApi {
  calls: string[] = [];
  busy: string[] = [];
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(_url: string, name: string): Promise<LoadOutcome> {
    this.calls.push(`load ${name}`);
    return 'loaded';
  }
  async unloadAdapter(_url: string, name: string): Promise<UnloadOutcome> {
    this.calls.push(`unload ${name}`);
    return 'unloaded';
  }
  async activity(): Promise<ReplicaActivity> {
    return { busy: [...this.busy] };
  }
}

const env = useRedisStores();
const kinds: [string, () => FleetStore][] = [
  ['memory', () => new MemoryFleetStore()],
  [
    'redis',
    () =>
      new RedisFleetStore(
        // No fault here: a connect bound a loaded machine cannot miss (200 ms failed a CI replay at load average 5).
        env.redis.config(`lc${randomBytes(4).toString('hex')}:`, { timeout: 2000 }),
        randomBytes(4).toString('hex'),
      ),
  ],
];

describe.each(kinds)('%s store: a request past the lease ceiling', (_kind, make) => {
  it('its lease reclaimed, the adapter is still not unloaded while the replica reports it running', async () => {
    const s = make();
    env.open.push(s);
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const api = new Replica();
    const mgr = new AdapterManager(s, api, systemClock, silentLogger);
    const ref = (name: string) => ({ name, path: `/adapters/${name}` });
    expect(await mgr.ensure(U, ref('a'), policy())).toBe('loaded');
    expect(await mgr.ensure(U, ref('b'), policy())).toBe('loaded');
    // A long stream on a, renewed by every poll that finds it running, until the ceiling.
    // Read before the acquire: the store (Redis: its TIME) dates the lease no earlier.
    const taken = Date.now();
    await s.acquire({ id: 'long', url: U, adapter: 'a', at: taken });
    api.busy = ['a'];
    let reclaimedAt = 0;
    for (let i = 0; i < 80 && reclaimedAt === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      await s.applySnapshot(U, { at: Date.now(), ok: true, load: { ...load, activeAdapters: ['a'] } });
      if ((await s.expireLeases(Date.now(), MAX_AGE)).some((l) => l.id === 'long')) reclaimedAt = Date.now();
    }
    expect(reclaimedAt - taken).toBeGreaterThanOrEqual(LEASE_CEILING * MAX_AGE);
    // The store counts nothing on a now; the request still runs there.
    expect((await s.views([U], { name: 'a' }))[0]?.adapter?.inFlight ?? 0).toBe(0);
    // A cold request makes room: b goes, never a.
    expect(await mgr.ensure(U, ref('c'), policy())).toBe('loaded');
    expect(api.calls.filter((c) => c.startsWith('unload'))).toEqual(['unload b']);
    // With c held by a lease as well, nothing is idle: a 503, a still loaded.
    await s.acquire({ id: 'c1', url: U, adapter: 'c', at: Date.now() });
    const err = await mgr.ensure(U, ref('d'), policy()).then(
      () => undefined,
      (e: unknown) => e as RouterError,
    );
    expect(err?.code).toBe('adapter_slots_busy');
    expect(api.calls.filter((c) => c.startsWith('unload'))).toEqual(['unload b']);
    expect((await s.residents(U)).map((r) => [r.name, r.state]).sort()).toEqual([
      ['a', 'loaded'],
      ['c', 'loaded'],
    ]);
  });
});
