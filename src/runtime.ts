import { randomBytes } from 'node:crypto';
import { AdapterManager } from './adapters/manager';
import { AdapterStats } from './adapters/stats';
import { HttpReplicaApi } from './backends/http-replica-api';
import type { ReplicaApi } from './backends/replica-api';
import { systemClock, type Clock } from './clock';
import type { RedisConfig } from './config/redis-schema';
import { MemoryFleetStore } from './fleet/memory-store';
import { FailoverFleetStore } from './fleet/redis/failover-store';
import { RedisFleetStore } from './fleet/redis/redis-store';
import { Poller, type PollerOptions } from './fleet/poller';
import type { FleetStore } from './fleet/store';
import { operatorLog, stderrLogger, type Logger } from './log';
import { RouterMetrics } from './metrics/router-metrics';
import { seededRandom, type Random } from './random';

export interface RuntimeOptions {
  clock?: Clock;
  store?: FleetStore;
  /** With a host: fleet state shared in Redis (with a local fallback) instead of `store`. */
  redis?: RedisConfig;
  api?: ReplicaApi;
  log?: Logger;
  seed?: number;
  poller?: Partial<PollerOptions>;
}

export const defaultPollerOptions: PollerOptions = {
  intervalMs: 500,
  timeoutMs: 1000,
  jitter: 0.1,
  leaseMaxAgeMs: 600_000,
};

/**
 * What one process shares across plugin instances: the fleet store, the adapter manager,
 * the poller and the metrics. Keyed by replica URL inside, so instances Kong creates and
 * closes on config changes all see the same fleet.
 */
export class FleetRuntime {
  readonly clock: Clock;
  readonly store: FleetStore;
  readonly api: ReplicaApi;
  readonly log: Logger;
  readonly random: Random;
  readonly manager: AdapterManager;
  readonly poller: Poller;
  readonly metrics: RouterMetrics;
  /** Decayed request frequency per adapter, for value-based eviction and placement. */
  readonly adapterStats = new AdapterStats();
  /** Prefix of this runtime's lease ids, and its node id in a shared store: unique across processes. */
  readonly leasePrefix = randomBytes(4).toString('hex');
  private leaseSeq = 0;
  private readonly managed = new Map<string, (name: string, path: string) => boolean>();

  constructor(o: RuntimeOptions = {}) {
    this.clock = o.clock ?? systemClock;
    this.log = o.log ?? stderrLogger;
    this.store =
      o.redis?.host !== undefined
        ? new FailoverFleetStore(new RedisFleetStore(o.redis, this.leasePrefix), this.log)
        : (o.store ?? new MemoryFleetStore());
    this.api = o.api ?? new HttpReplicaApi();
    this.random = seededRandom(o.seed ?? Date.now() ^ process.pid);
    this.metrics = new RouterMetrics(this.store, this.clock);
    this.manager = new AdapterManager(this.store, this.api, this.clock, this.log);
    // Another node released a lease or finished a load or unload: waiters for room look again.
    this.store.onRemoteChange = () => this.manager.roomChanged.notify();
    this.manager.onCall = (r) => {
      const counter = r.op === 'load' ? this.metrics.loads : this.metrics.unloads;
      counter.inc({ result: r.ok ? 'ok' : 'error' });
      if (r.op === 'load' && r.ok) this.metrics.loadSeconds.observe(r.ms / 1000);
    };
    this.poller = new Poller(
      this.store,
      this.api,
      this.clock,
      { ...defaultPollerOptions, ...o.poller },
      this.random,
      this.log,
    );
    this.poller.isManaged = (name, path) => {
      for (const m of this.managed.values()) if (m(name, path)) return true;
      return false;
    };
    this.poller.onLeasesExpired = (n) => this.metrics.leasesExpired.inc(n);
    // A replica going down or coming back is rare and worth the operator's eye (docs/kong.md).
    const down = new Set<string>();
    this.poller.onPoll = (url, ok) => {
      if (!ok) this.metrics.pollErrors.inc({ replica: url });
      if (!ok && !down.has(url)) {
        down.add(url);
        this.log.warn(`replica ${url} stopped answering polls`);
      } else if (ok && down.delete(url)) this.log.warn(`replica ${url} answers polls again`);
    };
  }

  /**
   * Registers what one router configuration manages (keyed by the configuration, so Kong's
   * instance churn does not grow it; the oldest of more than 32 are forgotten).
   */
  registerManaged(key: string, manages: (name: string, path: string) => boolean): void {
    this.managed.delete(key);
    this.managed.set(key, manages);
    if (this.managed.size > 32) this.managed.delete(this.managed.keys().next().value!);
  }

  /** A lease id unique in this process (across every plugin instance) and across processes. */
  nextLeaseId(): string {
    return `${this.leasePrefix}-${(this.leaseSeq++).toString(36)}`;
  }

  stop(): void {
    this.poller.stop();
    void this.store.close?.();
  }
}

/** This process's runtimes: one without Redis, one per distinct `redis` record. */
const runtimes = new Map<string, FleetRuntime>();

/**
 * The runtime of this plugin-server process for a plugin's `redis` record, created on first
 * use: lora-router and lora-poller configured alike share it, whatever instances Kong creates.
 */
export function sharedRuntime(redis?: RedisConfig): FleetRuntime {
  const key = redis?.host === undefined ? '' : JSON.stringify(redis);
  let rt = runtimes.get(key);
  if (!rt)
    runtimes.set(key, (rt = new FleetRuntime({ redis: key === '' ? undefined : redis, log: operatorLog })));
  return rt;
}

/** The runtime that issued `leaseId` (the log phase may run on an instance with another config). */
export function runtimeOfLease(leaseId: string): FleetRuntime | undefined {
  const prefix = leaseId.slice(0, leaseId.indexOf('-'));
  for (const rt of runtimes.values()) if (rt.leasePrefix === prefix) return rt;
  return undefined;
}
