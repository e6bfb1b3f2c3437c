/**
 * A guessed lease given back (src/router/guessed-lease.ts) over a real redis-server: with a shared
 * store the router takes a lease with the views on the replica the adapter's last request went
 * to; a decision that goes elsewhere gives it back. The request's decision does not wait for that
 * release: nothing it returns depends on it (the lease leaves the process's counts as the release
 * begins, src/lease.ts `ending`), and a wait there let a decision read on old health be proxied
 * after the node saw its replica down (docs/reliability/explored-schedules.md, seed 1635447).
 */
import { parseRouterConfig } from '../../src/config/parse';
import type { ReplicaSnapshot } from '../../src/fleet/types';
import type { Logger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';

const A = 'http://10.0.0.1:8000';
const B = 'http://10.0.0.2:8000';
const body = (json: unknown) => Buffer.from(JSON.stringify(json));
const chat = body({ model: 'base', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.close();
});

const idle = (): ReplicaSnapshot => ({
  at: Date.now(),
  ok: true,
  load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
  registry: [],
  managed: () => true,
});

it('a decision that goes elsewhere than its guessed lease returns before that lease’s release is answered', async () => {
  const warnings: string[] = [];
  const log: Logger = {
    info: () => undefined,
    warn: (m) => warnings.push(m),
    error: (m) => warnings.push(m),
  };
  const redisConfig = redis.config('giveback:', { timeout: 2000 });
  // No poll: the replicas' health and load are applied by hand.
  const rt = new FleetRuntime({
    log,
    seed: 1,
    redis: redisConfig,
    poller: { intervalMs: 600_000, timeoutMs: 1000 },
  });
  try {
    const router = new RouterService(
      parseRouterConfig({
        base_model: 'base',
        replicas: [{ url: A }, { url: B }],
        saturation_mode: 'count',
        stale_after_ms: 600_000,
        redis: redisConfig,
      }),
      rt,
    );
    rt.poller.stop();
    await waitFor(() => rt.store.mode?.() === 'redis', 5000, 'sharing state');
    for (const url of [A, B]) await rt.store.applySnapshot(url, idle());
    const first = await router.route({ path: '/v1/chat/completions', body: chat });
    if (first.kind !== 'proxy') throw new Error(`not proxied: ${JSON.stringify(first)}`);
    await router.finish(first.leaseId, 200);
    const guessed = first.url;
    const other = guessed === A ? B : A;
    // The next request is longer than the guessed replica's context: the decision goes to the other.
    rt.poller.maxModelLen.set(guessed, 4);

    // The guessed lease's release reaches Redis; its answer is held until the route has returned
    // (or 2 s, so that a route that waits for it still ends, after it). Then the node's poll sees
    // the decided replica down: a route still waiting would proxy there on the health it read.
    const ends: string[] = [];
    let routed!: () => void;
    const routeEnded = new Promise<void>((r) => (routed = r));
    const released: string[] = [];
    const release = rt.store.release.bind(rt.store);
    rt.store.release = async (...a: Parameters<typeof rt.store.release>) => {
      released.push(a[0]);
      const answer = await release(...a);
      await Promise.race([routeEnded, new Promise((r) => setTimeout(r, 2000).unref())]);
      await rt.store.applySnapshot(other, { at: Date.now(), ok: false, error: 'ECONNREFUSED' });
      ends.push('seen down');
      ends.push('given back');
      return answer;
    };
    const second = await router.route({ path: '/v1/chat/completions', body: chat });
    ends.push('routed');
    routed();
    expect(second).toMatchObject({ kind: 'proxy', url: other });
    expect(released).toHaveLength(1); // the guessed lease, on the guessed replica
    await waitFor(() => ends.length === 3, 5000, 'the give-back answered');
    expect(ends).toEqual(['routed', 'seen down', 'given back']);
    rt.store.release = release;
    // Nothing left open but the request's own lease, and no failure logged.
    const inFlight = async () =>
      Object.fromEntries((await rt.store.views([A, B], undefined)).map((v) => [v.url, v.inFlight]));
    expect(await inFlight()).toEqual({ [guessed]: 0, [other]: 1 });
    if (second.kind === 'proxy') await router.finish(second.leaseId, 200);
    expect(await inFlight()).toEqual({ [A]: 0, [B]: 0 });
    expect(warnings).toEqual([]);
  } finally {
    rt.poller.stop();
    await rt.store.close?.();
  }
}, 30_000);
