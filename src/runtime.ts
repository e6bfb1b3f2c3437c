import { randomBytes } from 'node:crypto';
import { AdapterManager } from './adapters/manager';
import { PollTrim } from './adapters/poll-trim';
import { AdapterStats } from './adapters/stats';
import { HttpReplicaApi } from './backends/http-replica-api';
import type { ReplicaApi } from './backends/replica-api';
import { monotonic, systemClock, type Clock } from './clock';
import { redisBounds } from './config/redis-enterprise';
import { sharesState, stateKeyOf } from './config/redis-schema';
import { MemoryFleetStore } from './fleet/memory-store';
import { FailoverFleetStore } from './fleet/redis/failover-store';
import { FAILOVER_DEFAULTS } from './fleet/redis/outage';
import { RedisFleetStore } from './fleet/redis/redis-store';
import { DEFAULT_UNHEALTHY_TIMEOUTS } from './config/poller-schema';
import type { LeaseHandle } from './lease';
import { Poller } from './fleet/poller';
import { Prefetcher } from './prefetch/prefetcher';
import { replicaSaturations, type SaturationPolicy } from './fleet/saturation';
import { MIN_LAPSE_MS, NodeClaim, type ConfigClaim } from './fleet/node-claim';
import type { FleetStore } from './fleet/store';
import type { ReplicaView } from './fleet/types';
import { stderrLogger, type Logger } from './log';
import { RouterMetrics } from './metrics/router-metrics';
import {
  ConfigRegistry,
  defaultPollerOptions,
  type PollingSettings,
  type ReplicaSettings,
  type RuntimeOptions,
} from './runtime-settings';
import { seededRandom, type Random } from './random';
import { RuntimeDrain } from './runtime-drain';
import { wireDepartures } from './runtime-departures';
import { wireRuntime } from './runtime-wiring';
import { LoadTimes } from './work/load-times';
import { Lru } from './lru';
import { predictTtft } from './work/predict';
import { WorkModel } from './work/work-model';

/** Priors until this fleet measures its own: a replica's prefill rate, a load and an unload. */
const DEFAULT_PREFILL_TOKENS_PER_S = 10_000;
const PRIOR_LOAD_MS = 1000;
const PRIOR_UNLOAD_MS = 100;
/** The schema's defaults (`target_waiting_per_replica`, `kv_ceiling`), until a configuration registers. */
const DEFAULT_SATURATION: SaturationPolicy = { targetWaitingPerReplica: 2, kvCeiling: 0.8 };

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
  /**
   * A replica's reported context (`max_model_len`), for the scheduler's `contextOf`. One function
   * per runtime: a closure made per request there held that request's objects (its decision's whole
   * scope) through the next young-generation collection, which promoted them, 3.2-4.8 KB a request
   * (test/kong/young-promotion.test.ts).
   */
  readonly contextOf = (url: string): number | undefined => this.poller.maxModelLen.get(url);
  readonly metrics: RouterMetrics;
  /** Placement ahead of demand (`prefetch`): ticks after the poller's rounds. */
  readonly prefetcher: Prefetcher;
  /** The unload of an excess a poll found, once idle. */
  readonly pollTrim: PollTrim;
  /** Decayed request frequency per adapter, for value-based eviction and placement. */
  readonly adapterStats = new AdapterStats();
  /**
   * Per replica, the prefill and decode work this process admitted, corrected by each poll.
   * Not readonly: a successor on the same shared state shares it (one node: the replicas' queues
   * hold both runtimes' requests, and each lease's work ends on the runtime it was taken on).
   */
  work = new WorkModel({ prefillTokensPerS: DEFAULT_PREFILL_TOKENS_PER_S });
  /**
   * Whether a router configuration on this runtime uses `saturation_mode: predicted`: only then
   * do requests pay for the work model's admissions and releases (set once, never cleared, as
   * configurations share the runtime).
   */
  predictsWork = false;
  /** Load and unload times of this fleet, as the adapter manager measured them. */
  readonly loadTimes = new LoadTimes(PRIOR_LOAD_MS, PRIOR_UNLOAD_MS);
  /** Prefix of this runtime's lease ids, and its node id in a shared store: unique across processes. */
  readonly leasePrefix: string;
  /** Which shared state the store addresses ('' in process): runtimes on one state are one node. */
  readonly stateKey: string;
  readonly leaseSeq: { next: number };
  private readonly managed = new ConfigRegistry<(name: string, path: string) => boolean>();
  private readonly names = new ConfigRegistry<(path: string) => string | undefined>();
  /**
   * The node's claim: its live router configurations, and from them what the configuration
   * routing to each replica URL asks of it (the latest registered wins). Its replicas are the ones
   * this runtime routes to; one no live configuration lists any more loses its records here
   * (runtime-departures.ts).
   */
  readonly claim = new NodeClaim();
  /** With Redis, its `node_ttl_ms`: a claim of a node silent that long lapses in the store. */
  private readonly nodeTtlMs: number;
  /** RuntimeOptions.retainEveryMs. */
  readonly retainEveryMs: number | undefined;
  /** Each lora-poller plugin's polling settings, by plugin id (bounded: Kong's plugins, not instances). */
  private readonly pollingSettings = new Lru<string, PollingSettings>(64);
  /** Told of each replica whose records this process dropped (runtime-departures.ts): per-url records kept elsewhere go too. */
  readonly replicaForgotten: ((url: string) => void)[] = [];
  /** The runtime that replaced this one (a changed `redis` record), or null while current. */
  successor: FleetRuntime | null = null;
  /**
   * Told after a poll round that left no configuration on this runtime, live or superseded (the
   * registry retires it if every plugin on its record moved to another: runtime-registry.ts).
   */
  unclaimed: (() => void) | undefined = undefined;
  /** Retired because every plugin left its record (`retireUnclaimed`): its successor never took its replicas over. */
  private left = false;
  /**
   * Replaced runtimes still draining on this one's replicas (and theirs): their decisions under
   * way and open leases are not in this store when the state differs, so unloads here ask them.
   */
  private predecessors: FleetRuntime[] = [];
  /** Decisions under way and leases open here: a replaced runtime closes once they end. */
  private readonly drain: RuntimeDrain;

  constructor(o: RuntimeOptions = {}) {
    this.clock = o.clock ?? systemClock;
    this.drain = new RuntimeDrain(this.clock);
    this.log = o.log ?? stderrLogger;
    this.leasePrefix = o.leasePrefix ?? randomBytes(4).toString('hex');
    this.leaseSeq = o.leaseSeq ?? { next: 0 };
    this.stateKey = stateKeyOf(o.redis);
    this.nodeTtlMs = sharesState(o.redis) ? (o.redis?.node_ttl_ms ?? 0) : 0;
    this.retainEveryMs = o.retainEveryMs;
    this.store = sharesState(o.redis)
      ? new FailoverFleetStore(
          o.sharedStore?.(o.redis, this.leasePrefix, this.log) ??
            new RedisFleetStore(o.redis, this.leasePrefix, this.log),
          this.log,
          // A decision waits for a recovery's last pass at most one shared call's timeout.
          { ...FAILOVER_DEFAULTS, recoveryWaitMs: redisBounds(o.redis).call },
          this.clock,
        )
      : (o.store ?? new MemoryFleetStore(this.clock, this.leasePrefix));
    this.api = o.api ?? new HttpReplicaApi();
    this.random = seededRandom(o.seed ?? Date.now() ^ process.pid);
    this.metrics = new RouterMetrics(
      this.store,
      (rs) => this.saturations(rs),
      this.clock,
      (url) => !this.departed(url),
    );
    this.manager = new AdapterManager(this.store, this.api, this.clock, this.log);
    this.manager.leasedElsewhere = (url, adapter) => this.usedElsewhere(url, adapter);
    this.manager.replaced = () => this.successor !== null && !this.countsLeasesOf(this.current());
    // Another node released a lease or finished a load or unload: waiters for room look again.
    this.store.onRemoteChange = () => this.manager.roomChanged.notify();
    // Back from an older copy, the shared state may have lost this node's unload ends (own-unloads.ts).
    this.store.onSharedAgain = () => this.manager.ownUnloads.sharedAgain(this.clock.now());
    this.poller = new Poller(
      this.store,
      this.api,
      this.clock,
      { ...defaultPollerOptions, ...o.poller },
      this.random,
      this.log,
    );
    this.prefetcher = new Prefetcher(
      this.store,
      this.manager,
      this.clock,
      this.log,
      (url) => this.claim.replicas.get(url)?.limit,
    );
    this.pollTrim = new PollTrim(
      this.store,
      this.manager,
      this.log,
      (url) => this.claim.replicas.get(url)?.limit,
    );
    // After a round the residency it plans on is fresh; it plans once its interval has passed.
    // A round under way when this runtime was replaced ends after `retire`, which stopped the
    // prefetcher: planning is the successor's then (test/core/failover-review-57.test.ts).
    this.poller.addRoundListener(() => void this.prefetcher.maybeTick());
    wireRuntime(this, {
      maxLoadedAdapters: (url) => this.claim.replicas.get(url)?.limit.maxLoadedAdapters,
      isManaged: (name, path) => {
        for (const m of this.managed.list) if (m(name, path)) return true;
        return false;
      },
      trimAfterPoll: (url) => this.pollTrim.after(url),
    });
    wireDepartures(this);
  }

  /**
   * Registers what one router configuration manages (keyed by the configuration, so Kong's
   * instance churn does not grow it; the oldest of more than 32 are forgotten).
   */
  registerManaged(key: string, manages: (name: string, path: string) => boolean): void {
    if (!this.managed.has(key)) this.poller.managedVersion++;
    this.managed.set(key, manages);
  }

  /** Registers how one router configuration names llama.cpp start-up adapters (by path). */
  registerNames(key: string, nameOf: (path: string) => string | undefined): void {
    this.names.set(key, nameOf);
  }

  /** The name clients send for a llama.cpp adapter file, if a router configuration lists it. */
  adapterName(path: string): string | undefined {
    for (const nameOf of this.names.list) {
      const n = nameOf(path);
      if (n !== undefined) return n;
    }
    return undefined;
  }

  /**
   * A router configuration registers (`key`: Kong's `__plugin_id`, else its own JSON; `content`:
   * its JSON) routing to `urls` with these settings: it supersedes the live one of its key
   * (node-claim.ts), and the latest registered wins each replica's settings. The poller reclaims
   * a lease only past the longest `leaseMaxAgeMs` of the live configurations', so no
   * configuration's live request loses its lease to another's setting.
   */
  registerClaim(
    key: string,
    content: string,
    urls: readonly string[],
    settings: ReplicaSettings,
    /** Kong's `__seq__`: an older configuration's registration supersedes no newer one. */
    seq?: number,
  ): ConfigClaim {
    const claim = this.claim.register(key, content, urls, settings, monotonic(this.clock), seq);
    this.claimChanged();
    return claim;
  }

  /**
   * Plugin `key`'s configuration with `__seq__` `seq` registered on another runtime (another
   * `redis` record, other state and replicas): its configuration here is superseded, kept for the
   * lapse grace while a worker may still route through it (NodeClaim.movedAway).
   */
  pluginMoved(key: string, seq: number): void {
    this.claim.movedAway(key, seq, monotonic(this.clock));
    this.claimChanged();
  }

  /**
   * A request went through a superseded configuration: it stays live for the lapse grace from now
   * (and, lapsed already, is live again). Called only when `claim.superseded`: the request path
   * reads that field and nothing more otherwise.
   */
  supersededUsed(claim: ConfigClaim): void {
    if (this.claim.used(claim, monotonic(this.clock))) this.claimChanged();
  }

  /**
   * Whether this runtime, or one that took over from it since, retired because every plugin left
   * its record: a configuration registered here is then none of the current runtime's, whose
   * state and replicas are others (a request through it takes nothing back there: router.ts).
   */
  leftSince(): boolean {
    return this.left || (this.successor?.leftSince() ?? false);
  }

  /** The live configurations changed: the poller's lease age follows their longest. */
  claimChanged(): void {
    const ages = [...this.claim.replicas.values()].map((r) => r.leaseMaxAgeMs);
    if (ages.length > 0) this.poller.configure({ leaseMaxAgeMs: Math.max(...ages) });
  }

  /**
   * How long a superseded configuration is kept unused: the longest `lease_max_age_ms` of the
   * live configurations', at least MIN_LAPSE_MS. Past it, every lease its requests took is past
   * the age at which the poller reclaims it.
   */
  lapseGraceMs(): number {
    return Math.max(MIN_LAPSE_MS, this.poller.leaseMaxAgeMs);
  }

  /**
   * The store's grace for a replica no node claims (FleetStore.retainReplicas): the longest
   * `lease_max_age_ms`, and with Redis at least `node_ttl_ms`.
   */
  forgetGraceMs(): number {
    return Math.max(this.nodeTtlMs, this.poller.leaseMaxAgeMs);
  }

  /** Whether a router configuration on this runtime routes to `url`. */
  routesTo(url: string): boolean {
    return this.claim.claims(url);
  }

  /**
   * Whether `url` is kept out of polling, status and metrics: it was this node's, no live
   * configuration lists it, and no other node may route to it (no shared state).
   */
  departed(url: string): boolean {
    return this.stateKey === stateKeyOf(undefined) && this.claim.releases(url);
  }

  /** Whether a lease taken here on `url` is still open (its request under way). */
  leasesOn(url: string): boolean {
    return this.drain.leasesOn(url);
  }

  /** How saturation is judged on `url` for metrics and status: its configuration's policy. */
  saturationOf(url: string): SaturationPolicy {
    return this.claim.replicas.get(url)?.saturation ?? DEFAULT_SATURATION;
  }

  /**
   * The saturation metrics and status show, each replica's as its configuration judges it;
   * predicted: the wait of a request arriving now for the base model (the prefill queued
   * ahead, KV room or a running slot), from the work model.
   */
  saturations(replicas: readonly Pick<ReplicaView, 'url' | 'waiting' | 'kvUsage' | 'health'>[]): number[] {
    const now = this.clock.now();
    const arriving = { promptTokens: 0, maxTokens: 1, maxLoadedAdapters: 0, queueTimeoutMs: 0 };
    const waitMs = (url: string) =>
      predictTtft({ url, residentCount: 0, holder: false }, arriving, now, this.work, this.loadTimes).totalMs;
    return replicaSaturations(
      replicas,
      (url) => this.saturationOf(url),
      waitMs,
      this.loadTimes.load(undefined),
    );
  }

  /**
   * The polling settings of one lora-poller plugin (keyed by Kong's `__plugin_id`, so a reload
   * of the same plugin replaces its settings rather than adding to them). With several, the
   * poller runs at the shortest interval, waits the longest timeout, uses the widest jitter and
   * the lowest timeout threshold: every configuration gets figures at least as fresh as it asked for.
   */
  registerPolling(pluginId: string, settings: PollingSettings): void {
    this.pollingSettings.set(pluginId, settings);
    const all = this.pollingSettings.values();
    this.poller.configure({
      intervalMs: Math.min(...all.map((s) => s.intervalMs)),
      timeoutMs: Math.max(...all.map((s) => s.timeoutMs)),
      jitter: Math.max(...all.map((s) => s.jitter)),
      unhealthyTimeouts: Math.min(...all.map((s) => s.unhealthyTimeouts ?? DEFAULT_UNHEALTHY_TIMEOUTS)),
    });
  }

  /**
   * Plugin `pluginId`'s polling settings here, if it registered any, given to `heir` (polling there
   * if it polled here): a runtime retiring as left hands on those of a lora-poller whose record
   * still leads to it (runtime-registry.ts `retireIfLeft`), as `retire` hands on every plugin's.
   */
  passPollingOf(pluginId: string, heir: FleetRuntime): void {
    const settings = this.pollingSettings.peek(pluginId);
    if (!settings) return;
    heir.registerPolling(pluginId, settings);
    if (this.poller.running) heir.poller.start();
  }

  /** A lease id unique in this process (across every plugin instance) and across processes. */
  nextLeaseId(): string {
    return `${this.leasePrefix}-${(this.leaseSeq.next++).toString(36)}`;
  }

  stop(): void {
    this.poller.stop();
    void this.store.close?.();
  }

  /** The runtime decisions go to now: this one, or the one that replaced it. */
  current(): FleetRuntime {
    return this.successor ? this.successor.current() : this;
  }

  /**
   * A decision begins here, counted until `decisionEnded` (whatever way it ends): a replaced
   * runtime knows when its last one ended.
   */
  decisionBegan(): void {
    this.drain.began();
  }

  decisionEnded(): void {
    this.drain.ended();
  }

  /** A lease was taken here (LeaseHandle.take): this runtime closes only once it is given back. */
  leaseOpened(lease: LeaseHandle): void {
    this.drain.leaseOpened(lease);
  }

  /** A lease taken here was given back, or aged out. */
  leaseEnded(lease: LeaseHandle): void {
    this.drain.leaseEnded(lease);
  }

  /**
   * Whether a request here may be on `adapter` of `url`: a lease of it is open, or a decision is
   * under way (it may take one at any moment). Asked of a replaced runtime by its successors.
   */
  uses(url: string, adapter: string): boolean {
    return this.drain.uses(url, adapter);
  }

  /**
   * Whether a request this store does not count may be on `adapter` of `url`: one of another
   * runtime of this process on other state (a `redis` record change), whose own store counts it.
   * The one current now may admit one at any moment, so a replaced runtime on other state
   * unloads nothing (as a node deciding alone, it only loads into free slots); the others still
   * draining are asked. Runtimes on this one's shared state count in its store already.
   */
  private usedElsewhere(url: string, adapter: string): boolean {
    for (let s: FleetRuntime | null = this.successor; s; s = s.successor)
      if (!this.countsLeasesOf(s) && (s.successor === null || s.uses(url, adapter))) return true;
    return this.predecessors.some((p) => !this.countsLeasesOf(p) && p.uses(url, adapter));
  }

  /**
   * As `usedElsewhere`, for a poll's reading begun at `mono` (monotonic): a draining runtime's
   * lease explains it only if opened by then (src/adapters/unseen-busy.ts).
   */
  leasedElsewhereBefore(url: string, adapter: string, mono: number): boolean {
    for (let s: FleetRuntime | null = this.successor; s; s = s.successor)
      if (!this.countsLeasesOf(s) && (s.successor === null || s.uses(url, adapter))) return true;
    return this.predecessors.some((p) => !this.countsLeasesOf(p) && p.drain.openedBy(url, adapter, mono));
  }

  /** Whether `other`'s leases are counted in this store: one shared state (each in-process store is its own). */
  private countsLeasesOf(other: FleetRuntime): boolean {
    return other.stateKey === this.stateKey && this.stateKey !== stateKeyOf(undefined);
  }

  /**
   * Steps down for `next` (same replicas, another `redis` record): polling and new decisions go
   * to `next` at once. Nothing moves between them: the decisions under way here end here, and
   * each lease taken here is given back here (LeaseHandle); once the last one is, or every one
   * is past the age at which its store reclaims it, the store closes. Meanwhile `next` unloads
   * nothing a request here may be on (`uses`).
   */
  async retire(next: FleetRuntime): Promise<void> {
    this.successor = next;
    // Prefetching and the trim after a poll are the successor's now. A poll round or a prefetch
    // plan under way starts no load or unload from here (each checked right before its lock and
    // its replica call); those already started end in this store before it closes. They hold no
    // lease and run in no decision, so the drain alone does not wait for them
    // (test/core/prefetch-retire.test.ts: before, a plan under way loaded after the store had left,
    // under a local lock no peer knew of; a round under way trimmed beside the successor).
    const ownCallsEnded = Promise.all([this.prefetcher.stop(), this.pollTrim.stop()]);
    next.predecessors = [...next.predecessors, this, ...this.predecessors];
    // Same replicas: an unload this runtime has under way is this node's to keep its decisions off.
    const sameState = next.stateKey === this.stateKey;
    next.manager.ownUnloads.inherit(this.manager.ownUnloads, sameState);
    // Other state: until the decisions under way here end, and for the hold-off after, the new
    // state unloads nothing: peers may still decide on the old state (Kong pushes a
    // configuration to its nodes in turn), where this node cannot see their requests.
    let decided = () => {};
    if (!sameState && next.store instanceof FailoverFleetStore)
      void next.store.receiving(new Promise<void>((r) => (decided = r)));
    // Before `next` decides anything: what this node spent this window counts there too.
    if (!sameState) this.carrySpends(next);
    try {
      this.passPolling(next, sameState);
      // Waits for room here end at once, decided again on `next` (RuntimeReplaced): this store
      // unloads nothing now, and `next` nothing until they end.
      if (this.manager.replaced()) this.manager.roomChanged.notify();
      await this.drain.decisionsEnded();
    } finally {
      decided();
    }
    await this.drain.drained();
    await ownCallsEnded;
    this.manager.ownUnloads.retire();
    for (let s: FleetRuntime | null = this.successor; s; s = s.successor)
      s.predecessors = s.predecessors.filter((p) => p !== this);
    await this.closeStore(next, sameState);
  }

  /**
   * Steps down with no successor on its replicas: every plugin of its record moved to other
   * records, on other state and other replicas, and their configurations here lapsed
   * (runtime-registry.ts). It stops polling and planning at once; once the decisions under way
   * and the leases here have ended (or aged out: none is younger than the grace), and its own
   * loads and unloads, it leaves its shared state as a runtime replaced by one on other state
   * does (its node and its claims go there), and closes. A request through an old configuration
   * after that decides on `heir`, the record its plugins moved to, as an old-config instance
   * started then does.
   */
  async retireUnclaimed(heir: FleetRuntime): Promise<void> {
    this.successor = heir;
    this.left = true;
    const ownCallsEnded = Promise.all([this.prefetcher.stop(), this.pollTrim.stop()]);
    this.poller.stop();
    // Waits for room here end at once, decided again on `heir` (RuntimeReplaced).
    if (this.manager.replaced()) this.manager.roomChanged.notify();
    await this.drain.drained();
    await ownCallsEnded;
    this.manager.ownUnloads.retire();
    await this.closeStore(heir, false);
  }

  /**
   * Other state: what this node spent of the cold-load budgets this window, and what the
   * decisions still under way here are granted, counts there too, so the change hands out no
   * fresh budget (registered first: the state's epoch dates the spends). Registered there: the
   * replicas this runtime routes to (`next` adopts its configurations), not every one the old
   * state lists: another node's, or one this node left, came to the new state claimed in this
   * node's name, polled there by every node until its retain and a grace after
   * (test/core/failover-review-69.test.ts).
   */
  private carrySpends(next: FleetRuntime): void {
    const [from, to] = [this.store, next.store];
    if (!(from instanceof FailoverFleetStore) || !(to instanceof FailoverFleetStore)) return;
    const registered = (async () => {
      for (const spec of await from.claimedSpecs()) await to.upsertReplica(spec);
    })();
    void to.carrySpends(from, registered);
  }

  /** Polling and what the router configurations registered go to `next`, before it decides anything. */
  private passPolling(next: FleetRuntime, sameState: boolean): void {
    // Same state: one node, one work model (its replicas' queues include this runtime's requests).
    if (sameState) {
      next.work = this.work;
      next.predictsWork ||= this.predictsWork;
    }
    // Same state: the successor's pruning keeps this store's leases (one node id), and this one
    // prunes nothing (it would drop the successor's). Synchronous up to its first await.
    if (sameState && this.store instanceof FailoverFleetStore && next.store instanceof FailoverFleetStore)
      void next.store.succeed(this.store);
    const polling = this.poller.running;
    this.poller.stop();
    if (polling) next.poller.start();
    // Oldest first (entries() lists the newest first): the newest stays first in `next` too.
    for (const [key, m] of this.managed.entries().reverse())
      if (!next.managed.has(key)) next.registerManaged(key, m);
    next.claim.adopt(this.claim, monotonic(next.clock));
    next.claimChanged();
    for (const [k, n] of this.names.entries().reverse()) if (!next.names.has(k)) next.registerNames(k, n);
    if (this.prefetcher.settings && !next.prefetcher.settings)
      next.prefetcher.configure(this.prefetcher.settings);
    for (const [k, p] of this.pollingSettings.entries().reverse())
      if (!next.pollingSettings.has(k)) next.registerPolling(k, p);
  }

  /**
   * Other state: replays the releases that could not reach the old state and drops what is left
   * of this node's leases there once it answers, then closes. Same state: the successor takes
   * the failover records left (releases to replay, spends made alone). Either way, after the
   * loads and unloads still under way here have ended.
   */
  private async closeStore(next: FleetRuntime, sameState: boolean): Promise<void> {
    if (!sameState && this.store instanceof FailoverFleetStore) {
      this.store
        .leave(this.poller.leaseMaxAgeMs)
        .catch((err: Error) => this.log.warn(`leaving the old shared fleet state failed: ${err.message}`));
      return;
    }
    // A load or unload still under way here ends in this store, and so does a hand-back its probe
    // or a reclaim has under way (FailoverFleetStore.ownCallsEnded).
    if (this.store instanceof FailoverFleetStore) await this.store.ownCallsEnded();
    // `next` may itself have been replaced on this state since (and closed): the newest one takes them.
    const heir = this.sameStateHeir(next);
    if (sameState && this.store instanceof FailoverFleetStore && heir.store instanceof FailoverFleetStore)
      await heir.store.adopt(this.store);
    await this.store.close?.();
  }

  /** The newest runtime in `next`'s line of successors still on this one's state. */
  private sameStateHeir(next: FleetRuntime): FleetRuntime {
    let heir = next;
    while (heir.successor && heir.successor.stateKey === this.stateKey) heir = heir.successor;
    return heir;
  }
}
