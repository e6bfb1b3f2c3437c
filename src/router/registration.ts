/**
 * What a router configuration sets up: the policies it implies (scheduling, adapters, the
 * cold-load budget) and its registration with the runtime it runs on (its replicas and their
 * limits, the adapters it manages, prefetching, the work model's prior, polling). Apart from the
 * service (router.ts) because this runs once per configuration, not per request, and is where a
 * configuration's settings reach the state every configuration of the process shares.
 */
import type { AdapterCatalog } from '../adapters/catalog';
import type { AdapterPolicy } from '../adapters/manager';
import type { RouterConfig } from '../config/router-schema';
import { samePath } from '../fleet/replica-record';
import { ConfigClaim } from '../fleet/node-claim';
import type { ReplicaSpec } from '../fleet/types';
import type { FleetRuntime } from '../runtime';
import { registryFor } from '../runtime-registry';
import type { SchedulingPolicy } from '../scheduler/types';
import type { ColdLoadBudget } from './cold-budget';

/** The scheduling policy a configuration implies. */
export function schedulingPolicy(config: RouterConfig): SchedulingPolicy {
  return {
    saturation: {
      targetWaitingPerReplica: config.target_waiting_per_replica,
      kvCeiling: config.kv_ceiling,
    },
    maxLoadedAdapters: config.max_loaded_adapters,
    staleAfterMs: config.stale_after_ms,
    saturationMode: config.saturation_mode,
    saturationMarginMs: config.saturation_margin_ms,
    ttftToleranceMs: config.ttft_tolerance_ms,
  };
}

/** The adapter manager's policy a configuration implies (the catalog says which names are static, listed). */
export function adapterPolicyOf(config: RouterConfig, catalog: AdapterCatalog): AdapterPolicy {
  return {
    maxLoadedAdapters: config.max_loaded_adapters,
    loadTimeoutMs: config.load_timeout_ms,
    queueTimeoutMs: config.queue_timeout_ms,
    backoffBaseMs: config.backoff_base_ms,
    backoffMaxMs: config.backoff_max_ms,
    isStatic: (name) => catalog.isStatic(name),
    isListed: (name) => catalog.isListed(name),
  };
}

/** The cold-load budget a configuration sets. */
export function coldBudgetOf(config: RouterConfig): ColdLoadBudget {
  return {
    perMinute: config.cold_loads_per_minute,
    perConsumerPerMinute: config.cold_loads_per_consumer_per_minute,
  };
}

/**
 * Registers the configuration with `rt`: what it manages, its replicas (the node's claim, under
 * `setup.key`: Kong's `__plugin_id`, else the configuration's JSON), prefetching, the work model's
 * prior. Returns its claim at once, and `ready`, resolved once its replicas are in the store and
 * polling runs.
 */
export function registerConfiguration(
  rt: FleetRuntime,
  config: RouterConfig,
  setup: {
    catalog: AdapterCatalog;
    specs: readonly ReplicaSpec[];
    policy: SchedulingPolicy;
    adapterPolicy: AdapterPolicy;
    key?: string;
    /** Kong's `__seq__`, if sent (node-claim.ts: which configuration of a plugin is the newer). */
    seq?: number;
  },
): { claim: ConfigClaim; ready: Promise<void> } {
  const urls = setup.specs.map((s) => s.url);
  const content = JSON.stringify(config);
  const settings = {
    limit: setup.adapterPolicy,
    saturation: {
      ...setup.policy.saturation,
      predictedMarginMs: config.saturation_mode === 'predicted' ? config.saturation_margin_ms : undefined,
    },
    leaseMaxAgeMs: config.lease_max_age_ms,
  };
  // A configuration of a record every plugin left (an old-config instance for a log phase, after
  // the runtime there retired: runtime-registry.ts `retireIfLeft`) runs on the runtime of its
  // plugin's newest, on other state: registered there, that runtime listed and claimed the old
  // replicas in its own state, then polled, planned and trimmed them without the old state's
  // leases (test/core/review-move.test.ts). It registers nothing: its lease goes back where it
  // was taken (LeaseHandle), and a request through it finds no replica of its own there.
  // The registry that made `rt` (the plugins' one, or a simulated process's: dst/node-processes.ts).
  const registry = registryFor(rt);
  if (registry.recordLeft(config.redis))
    return {
      claim: new ConfigClaim(setup.key ?? content, content, urls, settings, 0),
      ready: Promise.resolve(),
    };
  rt.registerManaged(
    JSON.stringify([config.adapters, config.adapter_path_template, config.adapter_name_pattern]),
    (name, path) => setup.catalog.manages(name, path),
  );
  // The placement page names llama.cpp's start-up adapters as clients do, not by file.
  rt.registerNames(
    JSON.stringify(config.adapters),
    (path) => config.adapters.find((a) => a.static && a.path !== undefined && samePath(path, a.path))?.name,
  );
  // Its replicas, by its plugin id: a changed configuration of one plugin supersedes the last.
  const claim = rt.registerClaim(setup.key ?? content, content, urls, settings, setup.seq);
  registry.claimReplicas(rt, urls);
  // The latest configuration registered sets prefetching for the runtime (as replicas' limits);
  // an older one registered again (an old-config instance for a log phase: its claim stays
  // superseded, node-claim.ts) does not take it back.
  if (!claim.superseded) {
    rt.prefetcher.configure({
      enabled: config.prefetch,
      halfLifeMs: config.prefetch_half_life_ms,
      intervalMs: config.prefetch_interval_ms,
      hysteresis: config.prefetch_hysteresis,
      evictFactor: config.prefetch_evict_factor,
      loadsPerMinute: config.prefetch_loads_per_minute,
      coldLoadsPerMinute: config.cold_loads_per_minute,
      staleAfterMs: config.stale_after_ms,
    });
    rt.work.configure(config.prefill_tokens_per_second);
  }
  if (config.saturation_mode === 'predicted') rt.predictsWork = true;
  // A superseded one (an old-config instance for a log phase) registers only the replicas no newer
  // configuration lists: its spec (priority, backend) overwrote the newer one's, in the shared state
  // too, until the next push (test/core/old-config-registration.test.ts).
  const specs = claim.superseded ? setup.specs.filter((s) => !rt.claim.listedByNewest(s.url)) : setup.specs;
  const ready = Promise.all(specs.map((s) => rt.store.upsertReplica(s))).then(() => {
    // Polling is what keeps decisions fresh: start it here too, in case lora-poller
    // runs in another process (or not at all). On the runtime current now: a `redis` record
    // change during the registration retired `rt`, and a poller started there would poll a
    // closed store for the rest of the process (the 30-minute fault run's silent nodes).
    rt.current().poller.start();
  });
  return { claim, ready };
}
