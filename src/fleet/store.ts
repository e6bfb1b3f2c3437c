import type {
  AdapterRef,
  FleetEvent,
  Lease,
  Released,
  ReplicaSnapshot,
  ReplicaSpec,
  ReplicaView,
  ResidentAdapter,
} from './types';

/**
 * The shared cache behind routing: what every router instance (and, with Redis, every Kong
 * node) agrees on. Callers see operations and plain copies, never shared objects, so the
 * in-process store and a Redis store are interchangeable. Conditional operations
 * (beginLoad, beginUnload, release) are atomic: they are where races are decided.
 */
export interface FleetStore {
  /** Idempotent; a spec change (backend, priority) replaces the old one. */
  upsertReplica(spec: ReplicaSpec): Promise<void>;
  /** Every replica registered so far (the poller polls these). */
  replicaSpecs(): Promise<ReplicaSpec[]>;
  /**
   * Views of `urls` (registered ones only), with the presence of `adapter` on each, and each
   * replica's residents when `withResidents` (O(residents) more per replica).
   */
  views(urls: readonly string[], adapter?: AdapterRef, withResidents?: boolean): Promise<ReplicaView[]>;
  /** Reconcile with a poll: load figures, health, residency from the replica's registry. */
  applySnapshot(url: string, snapshot: ReplicaSnapshot): Promise<void>;
  /** Passive health from the proxy path: upstream 5xx or connect failures. */
  reportOutcome(url: string, ok: boolean, at: number): Promise<void>;

  residents(url: string): Promise<ResidentAdapter[]>;
  /** Marks `adapter` loading unless it is resident in any state; true if this caller won. */
  beginLoad(url: string, adapter: string, at: number): Promise<boolean>;
  /** Ends a load this caller began: loaded on success, forgotten on failure. */
  finishLoad(url: string, adapter: string, ok: boolean, at: number): Promise<void>;
  /** Marks a loaded, idle (no lease) adapter unloading; false if busy, static or absent. */
  beginUnload(url: string, adapter: string, at: number): Promise<boolean>;
  /** Ends an unload: forgotten on success, loaded again on failure. */
  finishUnload(url: string, adapter: string, ok: boolean, at: number): Promise<void>;
  /**
   * Forgets a runtime-loaded adapter on a replica (it answered 404 for it: the replica restarted
   * or someone unloaded it). Static adapters are left to the next poll.
   */
  forget(url: string, adapter: string, at: number): Promise<void>;
  /** Records use of a resident adapter (recency for eviction). */
  touch(url: string, adapter: string, at: number): Promise<void>;

  /** Takes an in-flight lease (the request counts against the replica and its adapter). */
  acquire(lease: Lease): Promise<void>;
  /** Gives the lease back; returns it the first time, undefined after (release once). */
  release(leaseId: string, at: number): Promise<Released | undefined>;
  /** Reclaims leases older than `maxAgeMs` (their release never came); returns them. */
  expireLeases(now: number, maxAgeMs: number): Promise<Lease[]>;
  inFlightTotal(): Promise<number>;

  pushEvent(event: FleetEvent): Promise<void>;
  /** Newest last. */
  events(limit: number): Promise<FleetEvent[]>;
  /** Everything, for the status endpoint. */
  dump(): Promise<FleetDump>;
}

export interface FleetDump {
  replicas: (Omit<ReplicaView, 'adapter'> & {
    adapters: ResidentAdapter[];
    llamaAdapters: { id: number; path: string }[];
  })[];
}
