/**
 * A configuration's registration (src/router/registration.ts) alone, on a runtime that records
 * what it is told: the policies a configuration implies, the replicas' limits and saturation,
 * the adapters it manages and names, prefetching, the work model's prior, and polling started on
 * the runtime current once the replicas are in the store.
 */
import { AdapterCatalog } from '../../src/adapters/catalog';
import { parseRouterConfig } from '../../src/config/parse';
import type { FleetRuntime } from '../../src/runtime';
import {
  adapterPolicyOf,
  coldBudgetOf,
  registerConfiguration,
  schedulingPolicy,
} from '../../src/router/registration';

const config = (over: Record<string, unknown> = {}) =>
  parseRouterConfig({
    replicas: [{ url: 'http://r1:8000' }, { url: 'http://r2:8000', backend: 'llamacpp' }],
    adapters: [
      { name: 'pinned', path: '/models/pinned', static: true },
      { name: 'sql', path: '/models/sql' },
      { name: 'nopath', static: true },
    ],
    max_loaded_adapters: 3,
    saturation_mode: 'predicted',
    saturation_margin_ms: 123,
    lease_max_age_ms: 45_000,
    prefetch: true,
    prefill_tokens_per_second: 7000,
    ...over,
  });

/** A runtime that records each registration call; `current()` is another one, whose poller starts. */
function recordingRuntime() {
  const calls: unknown[][] = [];
  const names: ((path: string) => string | undefined)[] = [];
  const manages: ((name: string, path: string) => boolean)[] = [];
  const current = { poller: { start: () => calls.push(['start current']) } };
  const rt = {
    predictsWork: false,
    registerManaged: (key: string, m: (name: string, path: string) => boolean) => (
      calls.push(['managed', key]),
      manages.push(m)
    ),
    registerNames: (key: string, n: (path: string) => string | undefined) => (
      calls.push(['names', key]),
      names.push(n)
    ),
    registerClaim: (key: string, content: string, urls: string[], s: unknown) => {
      calls.push(['claim', key, content]);
      for (const url of urls) calls.push(['replica', url, s]);
      return { superseded: false };
    },
    prefetcher: { configure: (s: unknown) => calls.push(['prefetch', s]) },
    work: { configure: (r: unknown) => calls.push(['work', r]) },
    store: { upsertReplica: async (s: { url: string }) => calls.push(['upsert', s.url]) },
    poller: { start: () => calls.push(['start own']) },
    current: () => current,
  };
  return { rt: rt as unknown as FleetRuntime & { predictsWork: boolean }, calls, names, manages };
}

async function registered(c: ReturnType<typeof config>, key?: string) {
  const catalog = new AdapterCatalog({
    baseModel: c.base_model,
    adapters: c.adapters,
    pathTemplate: c.adapter_path_template,
    namePattern: c.adapter_name_pattern,
  });
  const specs = c.replicas.map((r) => ({ url: r.url, backend: r.backend, priority: r.priority }));
  const policy = schedulingPolicy(c);
  const adapterPolicy = adapterPolicyOf(c, catalog);
  const r = recordingRuntime();
  await registerConfiguration(r.rt, c, { catalog, specs, policy, adapterPolicy, key }).ready;
  return { ...r, policy, adapterPolicy };
}

describe('registerConfiguration', () => {
  it('registers each replica with its limits and predicted margin, then starts polling on the current runtime', async () => {
    const c = config();
    const { rt, calls, adapterPolicy } = await registered(c);
    const replicas = calls.filter((x) => x[0] === 'replica');
    expect(replicas.map((x) => x[1])).toEqual(['http://r1:8000', 'http://r2:8000']);
    expect(replicas[0]![2]).toEqual({
      limit: adapterPolicy,
      saturation: {
        targetWaitingPerReplica: c.target_waiting_per_replica,
        kvCeiling: c.kv_ceiling,
        predictedMarginMs: 123,
      },
      leaseMaxAgeMs: 45_000,
    });
    expect(calls.filter((x) => x[0] === 'upsert').map((x) => x[1])).toEqual([
      'http://r1:8000',
      'http://r2:8000',
    ]);
    expect(calls.at(-1)).toEqual(['start current']);
    expect(calls.filter((x) => x[0] === 'work')).toEqual([['work', 7000]]);
    expect(rt.predictsWork).toBe(true);
    expect(calls.find((x) => x[0] === 'prefetch')![1]).toEqual({
      enabled: true,
      halfLifeMs: c.prefetch_half_life_ms,
      intervalMs: c.prefetch_interval_ms,
      hysteresis: c.prefetch_hysteresis,
      evictFactor: c.prefetch_evict_factor,
      loadsPerMinute: c.prefetch_loads_per_minute,
      coldLoadsPerMinute: c.cold_loads_per_minute,
      staleAfterMs: c.stale_after_ms,
    });
  });

  it('claims its replicas under its plugin id, else under its own JSON (never superseded then)', async () => {
    const c = config();
    const claimOf = (calls: unknown[][]) => calls.find((x) => x[0] === 'claim');
    expect(claimOf((await registered(c, 'plugin-1')).calls)).toEqual([
      'claim',
      'plugin-1',
      JSON.stringify(c),
    ]);
    expect(claimOf((await registered(c)).calls)).toEqual(['claim', JSON.stringify(c), JSON.stringify(c)]);
  });

  it('under saturation_mode count: no predicted margin, and the runtime does not predict work', async () => {
    const { rt, calls } = await registered(config({ saturation_mode: 'count' }));
    const s = (calls.find((x) => x[0] === 'replica')![2] as { saturation: { predictedMarginMs?: number } })
      .saturation;
    expect(s.predictedMarginMs).toBeUndefined();
    expect(rt.predictsWork).toBe(false);
  });

  it('keys what it manages and names by its adapters, and names a static adapter by its path', async () => {
    const c = config({ adapter_path_template: '/models/{name}' });
    const { calls, names, manages } = await registered(c);
    expect(calls.find((x) => x[0] === 'managed')![1]).toBe(
      JSON.stringify([c.adapters, '/models/{name}', c.adapter_name_pattern]),
    );
    expect(calls.find((x) => x[0] === 'names')![1]).toBe(JSON.stringify(c.adapters));
    expect(names[0]!('/models/pinned')).toBe('pinned');
    expect(names[0]!('/elsewhere/pinned')).toBe('pinned'); // the same file name
    expect(names[0]!('/models/sql')).toBeUndefined(); // not static
    expect(names[0]!('/models/nopath')).toBeUndefined(); // static, but no path
    expect(names[0]!('/models/other')).toBeUndefined();
    expect(manages[0]!('sql', '/models/sql')).toBe(true);
    expect(manages[0]!('x', '/somewhere/else')).toBe(false);
  });

  it('the policies a configuration implies', () => {
    const c = config({ cold_loads_per_minute: 11, cold_loads_per_consumer_per_minute: 3 });
    const catalog = new AdapterCatalog({ adapters: c.adapters, namePattern: c.adapter_name_pattern });
    expect(schedulingPolicy(c)).toEqual({
      saturation: { targetWaitingPerReplica: c.target_waiting_per_replica, kvCeiling: c.kv_ceiling },
      maxLoadedAdapters: 3,
      staleAfterMs: c.stale_after_ms,
      saturationMode: 'predicted',
      saturationMarginMs: 123,
      ttftToleranceMs: c.ttft_tolerance_ms,
    });
    const p = adapterPolicyOf(c, catalog);
    expect(p).toMatchObject({
      maxLoadedAdapters: 3,
      loadTimeoutMs: c.load_timeout_ms,
      queueTimeoutMs: c.queue_timeout_ms,
      backoffBaseMs: c.backoff_base_ms,
      backoffMaxMs: c.backoff_max_ms,
    });
    expect([p.isStatic('pinned'), p.isStatic('sql'), p.isListed!('sql'), p.isListed!('zzz')]).toEqual([
      true,
      false,
      true,
      false,
    ]);
    expect(coldBudgetOf(c)).toEqual({ perMinute: 11, perConsumerPerMinute: 3 });
  });
});
