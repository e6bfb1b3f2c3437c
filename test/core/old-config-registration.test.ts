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
