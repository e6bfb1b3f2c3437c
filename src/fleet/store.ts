import type {
  AdapterRef,
  Fence,
  FleetEvent,
  Lease,
  Released,
  ReplicaSnapshot,
  ReplicaSpec,
  ReplicaView,
  ResidencyState,
  ResidentAdapter,
} from './types';

/**
 * Leases one `retake` call takes at most. A node's walk over its open leases after an emptied
 * state is one call per batch, not per lease: each call is a window in which its link may turn
 * slow or break, and the leases not taken yet count nowhere until its probe recovers (the
 * simulation's seed 72667). Bounded so that one script never runs long: Redis runs a script alone
 * and every node's calls wait behind it; 256 leases are about 2,500 commands, milliseconds (as
 * long as 256 acquires take at the server together), below a call's timeout (200 ms by default).
 */
export const RETAKE_BATCH = 256;

/**
 * The window a granted budget unit was counted in: a refund goes back there only, never into a
 * window opened since (FleetStore.refundBudget).
 */
export interface BudgetWindow {
  key: string;
  /** When the window opened, on the store's clock (Redis time in Redis): a window's identity. */
  opened: number;
  /** Failover stores: the shared state's epoch the unit was counted under (null: none seen yet). */
  epoch?: string | null;
}

/** A budget spend's answer: 0 and the unit's window if granted, else the ms until its window ends. */
export interface BudgetTaken {
  waitMs: number;
  /** Null when refused, or granted where no refund can reach (a node deciding alone). */
  window: BudgetWindow | null;
}

/**
 * How a load ended (FleetStore.finishLoad): landed, not, or found registered at the replica's start.
 * `'replayed'`: an end sent again to a server that may have missed it (redis/ended-locks.ts), old
 * news: the replica may have changed since (another node unloaded it: dst seed 1534246).
 */
export type LoadEnd = boolean | 'static' | 'replayed';

/**
 * The shared cache behind routing: what every router instance (and, with Redis, every Kong
 * node) agrees on. Callers see operations and plain copies, never shared objects, so the
 * in-process store and a Redis store are interchangeable. Conditional operations
 * (beginLoad, beginUnload, release) are atomic: they are where races are decided.
 */
export interface FleetStore {
  /**
   * Idempotent; a spec change (backend, priority) replaces the old one. Claims the replica for
   * this node too (`retainReplicas`): a registration then a list does not forget it.
   */
  upsertReplica(spec: ReplicaSpec): Promise<void>;
  /** Every replica registered so far and not forgotten (the poller polls these). */
  replicaSpecs(): Promise<ReplicaSpec[]>;
  /**
   * This node routes to exactly `urls` now (its live configurations' replicas). The store keeps a
   * replica while some node claims it; one no node has claimed for `graceMs` (and that has nothing
   * running: no in-flight count, no lease, no load or unload under way) is forgotten: its spec and
   * every record of it go, and the next list (`replicaSpecs`) no longer names it. Resolves to the
   * urls forgotten by this call.
   */
  retainReplicas(urls: readonly string[], graceMs: number): Promise<string[]>;
  /**
   * Failover stores: the replicas registered through this store, from its local copy, with no round
   * trip: a poller's first round polls these at once, beside its read of `replicaSpecs`.
   */
  localReplicaSpecs?(): Promise<ReplicaSpec[]>;
  /**
   * Views of `urls` (registered ones only), with the presence of `adapter` on each, and each
   * replica's residents when `withResidents` (O(residents) more per replica).
   */
  views(urls: readonly string[], adapter?: AdapterRef, withResidents?: boolean): Promise<ReplicaView[]>;
  /** Reconcile with a poll: load figures, health, residency from the replica's registry. */
  applySnapshot(url: string, snapshot: ReplicaSnapshot): Promise<void>;
  /** Passive health from the proxy path: upstream 5xx or connect failures. */
  reportOutcome(url: string, ok: boolean, at: number): Promise<void>;

  /**
   * The replica's residents. With `at` (now by the caller's clock: a store that dates leases by the
   * times they carry answers by it; a shared one by its own clock), each one leases count also says
   * how long its oldest open lease has been held (`leasedFor`).
   */
  residents(url: string, at?: number): Promise<ResidentAdapter[]>;
  /**
   * Marks `adapter` loading unless it is resident in any state, or `limit` non-static adapters
   * already occupy the replica. Returns the fence of this caller's authority, or null if it lost.
   * A shared store expires the authority after `ttlMs` (its holder died or stalled).
   */
  beginLoad(url: string, adapter: string, at: number, limit: number, ttlMs: number): Promise<Fence | null>;
  /**
   * Ends a load: loaded on success, forgotten on failure (marked gone: a registry read begun before
   * does not bring it back). `'static'`: the replica answered "already loaded" for an adapter it
   * registered at start: kept as a static entry (no slot, never unloaded), and not a load of the
   * router's for the first registry read after an emptied state. `'replayed'`: the lock ends and the
   * entry is forgotten and marked gone, as on failure (a read begun before may predate another
   * node's unload, lost too): the next poll begun after it reads what the replica holds. False if
   * `fence` is no longer current.
   */
  finishLoad(url: string, adapter: string, fence: Fence, ok: LoadEnd, at: number): Promise<boolean>;
  /**
   * Marks a loaded adapter no request holds (on any node) unloading; null if busy, static or
   * absent. With `forAdapter` (the adapter it makes room for), also null if that adapter is
   * resident on `url`, another unload for it is under way, or the room an ended unload made for it
   * is still free: its load has not begun and fewer than `limit` (the caller's
   * `max_loaded_adapters`, as for beginLoad) non-static adapters occupy the replica, loading and
   * unloading included, save those a trim (a `forAdapter` starting with NUL) is unloading. One
   * unload per load; a replica filled by another load, or over its limit, lets the next unload for
   * it go. Without `limit` a made room refuses until its TTL. Given `limit`, also null while that
   * count, plus the live rooms made for other adapters not resident there, is below it: a slot is
   * free, which the caller loads into (a load that filled the replica failed after its read). A trim
   * given `limit` is null unless that count (its trims under way left out) is above it: down to the
   * limit, not below (a stale reading).
   */
  beginUnload(
    url: string,
    adapter: string,
    at: number,
    ttlMs: number,
    forAdapter?: string,
    limit?: number,
  ): Promise<Fence | null>;
  /** Ends an unload: forgotten on success, loaded again on failure. False if `fence` is stale. */
  finishUnload(url: string, adapter: string, fence: Fence, ok: boolean, at: number): Promise<boolean>;
  /** Whether `fence` still grants the load or unload (asked just before calling the replica). */
  holds(url: string, adapter: string, fence: Fence): Promise<boolean>;
  /**
   * Forgets a runtime-loaded adapter on a replica (it answered 404 for it: the replica restarted
   * or someone unloaded it). Static adapters are left to the next poll.
   */
  forget(url: string, adapter: string, at: number): Promise<void>;
  /** Records use of a resident adapter (recency for eviction). */
  touch(url: string, adapter: string, at: number): Promise<void>;
  /**
   * Places a cold `adapter` on `url` for every router sharing the store, until it is resident
   * (or `ttlMs` passes). Returns the replica that holds the placement: `url` if this caller won,
   * or if the current placement is `seen` (the caller saw it and chose to spread the adapter);
   * otherwise the other placement, which the caller should decide again with. `claimer` (one
   * request's decision) shares the placement when it is on `url` already (its TTL unchanged).
   */
  claimPlacement(
    adapter: string,
    url: string,
    seen: string | undefined,
    at: number,
    ttlMs: number,
    claimer?: string,
  ): Promise<string>;
  /**
   * Gives `claimer`'s share of the placement back if it is still on `url` (its load ended): the
   * placement goes once no claimer is left (without `claimer`: at once). A request whose load
   * failed must not drop the placement another request claimed since for its own load there
   * (dst seed 2300: a third request then loaded the adapter on a second replica beside it).
   */
  releasePlacement(adapter: string, url: string, claimer?: string): Promise<void>;

  /**
   * Takes an in-flight lease (the request counts against the replica and its adapter). Returns
   * the adapter's residency state at that moment: from then on it cannot be unloaded.
   */
  acquire(lease: Lease): Promise<ResidencyState | undefined>;
  /**
   * `views(urls, adapter)` then `acquire(lease)`, as one atomic step: a shared store's one round
   * trip for a request whose replica is known before its decision (the adapter resident where
   * the last decision sent it). Optional: without it, the two calls.
   */
  viewsAndLease?(
    urls: readonly string[],
    adapter: AdapterRef | undefined,
    lease: Lease,
  ): Promise<{ views: ReplicaView[]; state: ResidencyState | undefined }>;
  /**
   * Takes again, in one atomic step, leases this node holds (at most RETAKE_BATCH): its recovery,
   * or the shared state found emptied. Each as `acquire` takes it (an open lease counted nowhere is
   * counted now), but one the expiry sweep reclaimed is not brought back (it stays so). Returns
   * the ids refused so. Optional: without it, one `acquire` each.
   */
  retake?(leases: readonly Lease[]): Promise<string[]>;
  /**
   * Gives the lease back; returns it the first time, undefined after (release once). With the
   * upstream `status`, also records passive health (5xx counts against the replica) in the same
   * step. A 404 forgets nothing: it may be a client's mistyped path, so the router re-reads the
   * replica's registry instead (log-phase.ts `releaseLease`: Poller.refreshUrl afresh).
   */
  release(leaseId: string, at: number, status?: number): Promise<Released | undefined>;
  /**
   * In-process stores: `views`, `acquire` and `release` answered in the call, no promise. A
   * resident adapter's request then awaits nothing from its views to its lease, nor its log phase
   * (the plugin server runs each request cache-cold, where every async step is paid again:
   * docs/benchmarks.md). A shared store has none: each of those is a round trip.
   */
  viewsNow?(urls: readonly string[], adapter?: AdapterRef, withResidents?: boolean): ReplicaView[];
  acquireNow?(lease: Lease): ResidencyState | undefined;
  releaseNow?(leaseId: string, at: number, status?: number): Released | undefined;
  /**
   * Reclaims leases older than `maxAgeMs` (their release never came) and, in a shared store,
   * those of nodes that stopped answering; returns them.
   */
  expireLeases(now: number, maxAgeMs: number): Promise<Lease[]>;
  inFlightTotal(): Promise<number>;

  /**
   * Counts one use of `key`'s budget of `limit` per `windowMs` (fixed windows). Returns 0 if
   * within it, else the ms until the window ends. A refused use is not counted: the count is the
   * units granted, so a unit refunded is one a later spend in the window can have.
   */
  spendBudget(key: string, limit: number, windowMs: number, at: number): Promise<number>;
  /** As `spendBudget`, and the window a granted unit was counted in, for `refundBudget`. */
  takeBudget(key: string, limit: number, windowMs: number, at: number): Promise<BudgetTaken>;
  /**
   * Gives back up to `count` units granted in `window` and never used (no load followed), if that
   * window is still its key's current one; never below zero. Returns the units given back.
   */
  refundBudget(window: BudgetWindow, count: number, at: number): Promise<number>;

  pushEvent(event: FleetEvent): Promise<void>;
  /** Newest last. */
  events(limit: number): Promise<FleetEvent[]>;
  /** Everything, for the status endpoint. */
  dump(): Promise<FleetDump>;

  /**
   * Shared stores: the shared clock, in ms. A poll reads it beside its scrape (less the read's
   * time: no later than the scrape's start), so the store compares the poll with residency changes
   * on one clock whatever the nodes' clocks say.
   */
  sharedTime?(): Promise<number | undefined>;
  /** Shared stores: called when another process may have freed a slot or finished a load. */
  onRemoteChange?: (() => void) | null;
  /** Shared stores: stop listening for the fleet's changes (a retired store decides nothing). */
  unsubscribe?(): void;
  /**
   * Failover stores: called as decisions are shared again after an outage, and when the shared
   * state is found emptied or on another server (a heartbeat may see a restart no decision saw
   * fail). The shared state may have come back from an older copy (a snapshot, a Sentinel replica
   * that missed writes).
   */
  onSharedAgain?: (() => void) | null;
  /** Shared stores: which store decides now, for status and metrics. */
  mode?(): StoreMode;
  /**
   * Failover stores: whether the after-load undo of the load `fence` granted is held off now. It
   * is during an unload hold-off (a `redis` record change from other state, or the shared store
   * just back: peers may route where this node cannot see; `beginUnload` grants nothing then),
   * and for a load decided alone once the shared store is back: other nodes, deciding without
   * seeing it, may have loaded the same adapter and leased it.
   */
  undoHeldOff?(fence: Fence): boolean;
  /** Releases connections and timers. */
  close?(): Promise<void>;
}

/** `redis`: shared decisions; `local`: Redis is unreachable, this node decides alone. */
export type StoreMode = 'memory' | 'redis' | 'local';

export interface FleetDump {
  replicas: (Omit<ReplicaView, 'adapter'> & {
    adapters: ResidentAdapter[];
    llamaAdapters: { id: number; path: string }[];
  })[];
}
