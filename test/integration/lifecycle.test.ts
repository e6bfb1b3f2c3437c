/**
 * Lifecycle and limits in one process (issue 16, items 6-8): a changed `redis` record, a load
 * that lands after its timeout, and adapters classified before the configuration managing
 * them registered. Real parts: simulated replicas over loopback HTTP, a real redis-server.
 */
import { Redis } from 'ioredis';
import { parseRouterConfig } from '../../src/config/parse';
import { silentLogger } from '../../src/log';
import { releaseLease } from '../../src/router/log-phase';
import { RouterService } from '../../src/router/router';
import { LeaseHandle, LeaseNotOpen } from '../../src/lease';
import { FleetRuntime } from '../../src/runtime';
import { sharedRuntime } from '../../src/runtime-registry';
import { SimFleet } from '../../sim/fleet';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const chat = (model: string) =>
  Buffer.from(JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }));

/** The runtime a router was given (`runtime`; `rt` before issue 16). */
const runtimeOf = (r: RouterService) =>
  ((r as unknown as { runtime?: FleetRuntime }).runtime ?? (r as unknown as { rt: FleetRuntime }).rt)!;

describe('a changed redis record (item 6)', () => {
  let redis: RedisServer;
  let fleet: SimFleet;
  beforeAll(async () => {
    redis = await RedisServer.start();
    fleet = await SimFleet.start([
      { adapterDirs: ['/adapters'], timeScale: 20, engine: { loadBaseMs: 200 } },
    ]);
  });
  afterAll(async () => {
    await fleet.stop();
    await redis.close();
  });

  it('stops the old runtime, keeps one poller and one pair of Redis connections, and never unloads under its requests', async () => {
    const config = (redisRecord?: Record<string, unknown>) =>
      parseRouterConfig({
        replicas: fleet.urls.map((url) => ({ url })),
        base_model: BASE,
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 1,
        // Room for 'b' once 'a' is released takes Redis round trips, the replica's word and the
        // unload within the access phase: 300 ms ran out on a loaded machine (503 for 'b').
        queue_timeout_ms: 3000,
        ...(redisRecord ? { redis: redisRecord } : {}),
      });
    const record = (timeout: number) => ({
      host: '127.0.0.1',
      port: redis.port,
      prefix: 'lc:',
      timeout,
    });
    const admin = new Redis({ port: redis.port, host: '127.0.0.1' });
    const routers: RouterService[] = [];
    try {
      const first = new RouterService(config(), sharedRuntime(config().redis));
      routers.push(first);
      // A request admitted under the first configuration, still in flight (no log phase yet).
      const held = await first.route({ path: '/v1/chat/completions', body: chat('a') });
      expect(held.kind).toBe('proxy');
      const leaseId = (held as { leaseId: string }).leaseId;
      // Two changes of the redis record: added, then a timeout changed.
      for (const t of [200, 300]) {
        const c = config(record(t));
        routers.push(new RouterService(c, sharedRuntime(c.redis)));
      }
      const rts = routers.map(runtimeOf);
      const latest = rts[2]!;
      await waitFor(() => latest.poller.running, 5000, 'the latest runtime polling');
      await waitFor(() => rts.filter((rt) => rt.poller.running).length === 1, 5000, 'one poller');
      // Only the latest runtime's client and subscriber stay connected (plus this test's own).
      await waitFor(
        async () => ((await admin.client('LIST')) as string).trim().split('\n').length === 3,
        5000,
        'old Redis connections closed',
      );
      // The request admitted first stays on the first runtime, which drains: its lease is not in
      // the state the latest runtime decides with, which asks the first before an unload
      // (so a cold adapter on the full replica must not unload 'a' under it).
      const lease = LeaseHandle.find(leaseId)!;
      expect(lease.rt).toBe(rts[0]);
      expect(await latest.store.inFlightTotal()).toBe(0);
      const cold = await routers[2]!.route({ path: '/v1/chat/completions', body: chat('b') });
      expect(cold).toMatchObject({ kind: 'respond', status: 503 });
      expect(fleet.replicas[0]!.adapterLog().filter((e) => e.op === 'unload')).toEqual([]);
      // Its log phase gives the lease back exactly once, where it was taken; a second time is an error.
      await routers[2]!.finish(leaseId, 200);
      await expect(routers[2]!.finish(leaseId, 200)).rejects.toThrow(LeaseNotOpen);
      // In the call or as its promise's rejection (an in-process store answers in the call).
      await expect(Promise.resolve().then(() => releaseLease(lease, 200))).rejects.toThrow(LeaseNotOpen);
      expect(await rts[0]!.store.inFlightTotal()).toBe(0);
      // Now 'b' may take the slot.
      const b = await routers[2]!.route({ path: '/v1/chat/completions', body: chat('b') });
      expect(b.kind).toBe('proxy');
      await routers[2]!.finish((b as { leaseId: string }).leaseId, 200);
    } finally {
      admin.disconnect();
      for (const rt of new Set(routers.map(runtimeOf))) rt.stop();
    }
  });
});

describe('a load that lands after its timeout (item 7)', () => {
  let fleet: SimFleet;
  afterEach(() => fleet?.stop());

  it('the replica stays within max_loaded_adapters: the next load reads its own list and makes room for the late adapter', async () => {
    fleet = await SimFleet.start([
      {
        // 'slow' takes about 1 s to load at time scale 10 (rank 200), the others a few ms.
        adapterPaths: { '/adapters/slow': 200, '/adapters/b': 1 },
        maxLoraRank: 256,
        timeScale: 10,
        // Load cost from bytes (sim/engine/load-cost.ts): rank 200 ≈ 1,050 MB at 105 MB/s ≈ 10 s.
        engine: { loadBaseMs: 10, loadReadMBps: 105 },
      },
    ]);
    // Polls far apart: the late landing happens between two of them.
    const rt = new FleetRuntime({ log: silentLogger, seed: 1, poller: { intervalMs: 1500, timeoutMs: 500 } });
    const router = new RouterService(
      parseRouterConfig({
        replicas: fleet.urls.map((url) => ({ url })),
        base_model: BASE,
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 1,
        load_timeout_ms: 300,
        stale_after_ms: 5000,
      }),
      rt,
    );
    try {
      const slow = await router.route({ path: '/v1/chat/completions', body: chat('slow') });
      expect(slow).toMatchObject({ kind: 'respond', status: 502 });
      // 'slow' lands after its timeout; before the next poll sees it, 'b' takes the "free" slot.
      const replica = fleet.replicas[0]!;
      const landed = () =>
        replica.adapterLog().some((e) => e.op === 'load' && e.name === 'slow' && e.status === 200);
      await waitFor(landed, 5000, 'late landing');
      const b = await router.route({ path: '/v1/chat/completions', body: chat('b') });
      expect(b.kind).toBe('proxy');
      await router.finish((b as { leaseId: string }).leaseId, 200);
      // The router read the replica's own list before loading 'b' into the slot it believed free
      // (issue 24: the replica has the last word on loads too): 'slow' was there, so it made room
      // first, and the replica never held more than its limit, by its own log.
      const runtimeLoaded = async () => {
        const models = (await (await fetch(`${fleet.urls[0]}/v1/models`)).json()) as {
          data: { parent: string | null }[];
        };
        return models.data.filter((m) => m.parent !== null).length;
      };
      expect(Math.max(...replica.adapterLog().map((e) => e.loaded ?? 0))).toBe(1);
      await waitFor(async () => (await runtimeLoaded()) <= 1, 8000, 'the replica back within its limit');
      expect((await rt.store.residents(fleet.urls[0]!)).filter((r) => r.state !== 'static').length).toBe(1);
      expect(
        replica
          .adapterLog()
          .filter((e) => e.op === 'unload')
          .every((e) => e.inFlight === 0),
      ).toBe(true);
    } finally {
      rt.stop();
    }
  }, 15_000);
});

describe('classification after another route registered first (item 8)', () => {
  let fleet: SimFleet;
  afterEach(() => fleet?.stop());

  it('adapters loaded before the process started count against the limit of the configuration that manages them', async () => {
    fleet = await SimFleet.start([
      { adapterDirs: ['/adapters'], timeScale: 20, engine: { loadBaseMs: 100 } },
    ]);
    const url = fleet.urls[0]!;
    // Loaded at run time by a router process that has since restarted.
    for (const n of ['p', 'q', 'r', 's']) {
      const r = await fetch(`${url}/v1/load_lora_adapter`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ lora_name: n, lora_path: `/adapters/${n}` }),
      });
      expect(r.status).toBe(200);
    }
    const rt = new FleetRuntime({ log: silentLogger, seed: 1, poller: { intervalMs: 50, timeoutMs: 500 } });
    try {
      // Another route's configuration (no template: it manages none of them) registers and polls first.
      const other = new RouterService(
        parseRouterConfig({ replicas: [{ url }], base_model: BASE, max_loaded_adapters: 2 }),
        rt,
      );
      await other.route({ path: '/v1/models', body: '' });
      await rt.poller.pollAll();
      const router = new RouterService(
        parseRouterConfig({
          replicas: [{ url }],
          base_model: BASE,
          adapter_path_template: '/adapters/{name}',
          max_loaded_adapters: 2,
        }),
        rt,
      );
      await rt.poller.pollAll();
      const r = await router.route({ path: '/v1/chat/completions', body: chat('x') });
      expect(r.kind).toBe('proxy');
      await router.finish((r as { leaseId: string }).leaseId, 200);
      const models = (await (await fetch(`${url}/v1/models`)).json()) as {
        data: { parent: string | null }[];
      };
      expect(models.data.filter((m) => m.parent !== null).length).toBeLessThanOrEqual(2);
    } finally {
      rt.stop();
    }
  });
});
