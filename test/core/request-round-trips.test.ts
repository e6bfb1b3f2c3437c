/**
 * Issue 24, "Done when": the request path makes the Redis round trips it made before the
 * replica's word was added; the fresh scrape happens on the unload path only. Counted at the
 * store's one door to Redis (`RedisFleetStore.run`, one EVALSHA per call) with a real
 * redis-server, the routing core and a simulated vLLM replica on loopback.
 */
import { HttpReplicaApi } from '../../src/backends/http-replica-api';
import { parseRouterConfig } from '../../src/config/parse';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { SimFleet } from '../../sim/fleet';
import { sendVia } from '../helpers/core-harness';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';

let redis: RedisServer;
let fleet: SimFleet;
beforeAll(async () => {
  redis = await RedisServer.start();
  fleet = await SimFleet.start([{ adapterDirs: ['/adapters'] }]);
});
afterAll(async () => {
  await fleet?.stop();
  await redis?.close();
});

it('a request for a resident adapter makes one Redis round trip in access (views and lease in one script), one in log, and no scrape', async () => {
  const calls: string[] = [];
  const proto = RedisFleetStore.prototype as unknown as {
    run: (name: string, ...a: unknown[]) => Promise<unknown>;
  };
  const run = proto.run;
  const spy = jest.spyOn(proto, 'run').mockImplementation(function (
    this: unknown,
    name: string,
    ...a: unknown[]
  ) {
    calls.push(name);
    return run.call(this, name, ...a);
  });
  // Every call the router makes to a replica other than the request (scrapes, the replica's word).
  const asked: string[] = [];
  const api = HttpReplicaApi.prototype as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  const spies = ['scrape', 'activity', 'residency', 'loadAdapter', 'unloadAdapter'].map((m) => {
    const real = api[m]!;
    return jest.spyOn(api, m).mockImplementation(function (this: unknown, ...a: unknown[]) {
      asked.push(m);
      return real.apply(this, a);
    });
  });
  const rt = new FleetRuntime({
    log: silentLogger,
    seed: 1,
    redis: redis.config('rt:', { timeout: 2000 }),
    // No poll during the count: the request path alone.
    poller: { intervalMs: 600_000, timeoutMs: 1000 },
  });
  try {
    const router = new RouterService(
      parseRouterConfig({
        replicas: fleet.urls.map((url) => ({ url })),
        base_model: 'base',
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 2,
        // No refresh of a stale snapshot during the count either (a busy machine is slow).
        stale_after_ms: 600_000,
        redis: redis.config('rt:', { timeout: 2000 }),
      }),
      rt,
    );
    const chat = { model: 'a', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
    // Cold: a load (the load path reads the replica and the store more).
    expect((await sendVia(router, '/v1/chat/completions', chat)).status).toBe(200);
    await waitFor(() => rt.store.mode?.() === 'redis', 5000, 'sharing state');
    // Warm: count hits, with heartbeats (a timer, not the request) left out.
    for (let i = 0; i < 3; i++) {
      calls.length = 0;
      asked.length = 0;
      const hit = await sendVia(router, '/v1/chat/completions', chat);
      expect(hit.status).toBe(200);
      expect(hit.outcome.kind).toBe('proxy');
      expect(calls.filter((c) => c !== 'heartbeat')).toEqual(['viewsAndLease', 'release']);
      expect(asked).toEqual([]);
    }
  } finally {
    spy.mockRestore();
    for (const s of spies) s.mockRestore();
    rt.stop();
  }
});
