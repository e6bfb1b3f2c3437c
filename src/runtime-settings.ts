/**
 * What the plugin configurations sharing a runtime register with it, and the runtime's
 * defaults: each configuration's asks are kept by its key, so Kong's instance churn neither
 * grows them nor loses the latest.
 */
import type { AdapterPolicy } from './adapters/manager';
import type { ReplicaApi } from './backends/replica-api';
import type { Clock } from './clock';
import type { RedisConfig } from './config/redis-schema';
import type { PollerOptions } from './fleet/poller';
import type { SaturationPolicy } from './fleet/saturation';
import type { FleetStore } from './fleet/store';
import type { SharedStore } from './fleet/redis/shared-store';
import type { Logger } from './log';
import { Lru } from './lru';

/** What the router configuration routing to a replica asks of it. */
export interface ReplicaSettings {
  /** Adapter limit and load policy (trimming after a late load). */
  limit: AdapterPolicy;
  /** How saturation is judged there (metrics, status). */
  saturation: SaturationPolicy;
  /** `lease_max_age_ms`. */
  leaseMaxAgeMs: number;
}

/** What one lora-poller configuration asks of the poller. */
export type PollingSettings = Pick<PollerOptions, 'intervalMs' | 'timeoutMs' | 'jitter'> &
  Partial<Pick<PollerOptions, 'unhealthyTimeouts'>>;

export interface RuntimeOptions {
  clock?: Clock;
  store?: FleetStore;
  /** With a host: fleet state shared in Redis (with a local fallback) instead of `store`. */
  redis?: RedisConfig;
  /**
   * The shared side of that fallback for `redis`, as node `node` (default: a RedisFleetStore).
   * The deterministic simulation (dst/) puts its modelled Redis here, under the real failover store.
   */
  sharedStore?: (redis: RedisConfig, node: string, log: Logger) => SharedStore;
  api?: ReplicaApi;
  log?: Logger;
  seed?: number;
  poller?: Partial<PollerOptions>;
  /** Lease-id prefix and node id: a successor on the same shared state keeps its predecessor's. */
  leasePrefix?: string;
  /**
   * The lease-id counter, shared with the predecessor whose prefix this runtime keeps: a fresh
   * counter would issue its first ids again while its requests still run (one acquire counting
   * nothing, one release ending another request's lease).
   */
  leaseSeq?: { next: number };
  /**
   * How often the store is told this node's replicas when they did not change (its forget check:
   * src/runtime-departures.ts RETAIN_EVERY_MS); tests shorten it.
   */
  retainEveryMs?: number;
}

export const defaultPollerOptions: PollerOptions = {
  intervalMs: 500,
  timeoutMs: 1000,
  jitter: 0.1,
  leaseMaxAgeMs: 600_000,
};

/**
 * What each router configuration registered, keyed by the configuration so Kong's instance
 * churn does not grow it: the 32 most recently registered are kept (Lru: an lru-cache LRUCache
 * took about 5 µs to make, an Lru a tenth of one, and every runtime makes three). Read on every
 * poll, so readers get a plain array.
 */
export class ConfigRegistry<T> {
  private readonly cache = new Lru<string, { value: T }>(32);
  list: T[] = [];

  set(key: string, value: T): void {
    this.cache.set(key, { value });
    this.list = this.cache.values().map((e) => e.value);
  }

  has(key: string): boolean {
    return this.cache.has(key);
  }

  entries(): [string, T][] {
    return this.cache.entries().map(([k, e]) => [k, e.value]);
  }
}
