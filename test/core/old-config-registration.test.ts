/**
 * An older configuration registered again (Kong's lower `__seq__`: the log phase of a request begun
 * before a reload starts an old-config instance) is only used (src/fleet/node-claim.ts): what the
 * latest configuration sets for the whole runtime (prefetching, the work model's prior, the
 * replicas' settings) stays the newer one's.
 */
import { VirtualClock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { IdleReplicaApi } from '../helpers/idle-replicas';

const config = (url: string, halfLifeMs: number, prefill: number) =>
  parseRouterConfig({
    replicas: [{ url }],
    base_model: 'base',
    adapter_path_template: '/adapters/{name}',
    prefetch_half_life_ms: halfLifeMs,
    prefill_tokens_per_second: prefill,
    lease_max_age_ms: 1000,
  });

it("an old-config instance's registration leaves the runtime-wide settings the newer configuration's", async () => {
  const clock = new VirtualClock();
  const rt = new FleetRuntime({
    clock,
    api: new IdleReplicaApi(() => Date.now()),
    log: silentLogger,
    seed: 1,
  });
  try {
    const v1 = config('http://10.2.0.1:8000', 1000, 1000);
    const v2 = config('http://10.2.0.2:8000', 2000, 2000);
    new RouterService(v1, rt, 'plugin-1', 1);
    new RouterService(v2, rt, 'plugin-1', 2);
    // The log phase of a request begun on v1 starts an instance of it again.
    new RouterService(v1, rt, 'plugin-1', 1);
    const work = rt.work as unknown as { o: { prefillTokensPerS: number } };
    expect({
      halfLifeMs: rt.prefetcher.settings?.halfLifeMs,
      prefillTokensPerS: work.o.prefillTokensPerS,
      routesTo: [rt.routesTo('http://10.2.0.1:8000'), rt.routesTo('http://10.2.0.2:8000')],
    }).toEqual({ halfLifeMs: 2000, prefillTokensPerS: 2000, routesTo: [true, true] });
  } finally {
    rt.stop();
  }
});

it('an old-config instance registered after its configuration lapsed (a request longer than the grace) is only used too', async () => {
  const clock = new VirtualClock();
  const api = new IdleReplicaApi(() => clock.now());
  const rt = new FleetRuntime({
    clock,
    api,
    log: silentLogger,
    seed: 1,
    poller: { intervalMs: 1000, jitter: 0 },
  });
  const [OLD, NEW] = ['http://10.2.1.1:8000', 'http://10.2.1.2:8000'];
  try {
    const v1 = config(OLD, 1000, 1000);
    const v2 = config(NEW, 2000, 2000);
    new RouterService(v1, rt, 'plugin-1', 1);
    new RouterService(v2, rt, 'plugin-1', 2);
    // v1 unused past the lapse grace (MIN_LAPSE_MS: lease_max_age_ms is 1 s here): it lapses.
    await clock.run(clock.now() + 65_000);
    expect(rt.routesTo(OLD)).toBe(false);
    // A request begun on v1 before the reload ends now: its log phase starts a v1 instance again
    // (kong-pdk closed the old one, idle 60 s).
    new RouterService(v1, rt, 'plugin-1', 1);
    // v2, Kong's configuration, idle past the grace: it stays the node's, v1 lapses again.
    await clock.run(clock.now() + 65_000);
    const now = clock.now();
    const work = rt.work as unknown as { o: { prefillTokensPerS: number } };
    expect({
      halfLifeMs: rt.prefetcher.settings?.halfLifeMs,
      prefillTokensPerS: work.o.prefillTokensPerS,
      routesTo: [rt.routesTo(OLD), rt.routesTo(NEW)],
      polled: [...api.polledIn(now - 3000, now)],
    }).toEqual({ halfLifeMs: 2000, prefillTokensPerS: 2000, routesTo: [false, true], polled: [NEW] });
  } finally {
    rt.stop();
  }
});

it("an old-config instance's registration leaves a replica's spec the newer configuration's (its priority)", async () => {
  // Its replicas went to the store again as it lists them: a replica the newer configuration moved
  // to another priority pool read the old pool until the next configuration push (review 69).
  const clock = new VirtualClock();
  const rt = new FleetRuntime({
    clock,
    api: new IdleReplicaApi(() => Date.now()),
    log: silentLogger,
    seed: 1,
  });
  const [U, V, W] = ['http://10.2.9.1:8000', 'http://10.2.9.2:8000', 'http://10.2.9.3:8000'];
  const withPriority = (urls: readonly string[], priority: number) =>
    parseRouterConfig({
      replicas: urls.map((url) => ({ url, priority })),
      base_model: 'base',
      adapter_path_template: '/adapters/{name}',
      lease_max_age_ms: 1000,
    });
  // Each registration's store writes (the in-process store answers at once).
  const settled = () => new Promise((r) => setImmediate(r));
  try {
    new RouterService(withPriority([U, V], 0), rt, 'plugin-1', 1);
    await settled();
    new RouterService(withPriority([U], 5), rt, 'plugin-1', 2);
    await settled();
    new RouterService(withPriority([U, V, W], 0), rt, 'plugin-1', 1);
    await settled();
    const priorities = Object.fromEntries((await rt.store.replicaSpecs()).map((s) => [s.url, s.priority]));
    // The ones only it lists are registered as it lists them: its requests route there.
    expect(priorities).toEqual({ [U]: 5, [V]: 0, [W]: 0 });
  } finally {
    rt.stop();
  }
});
