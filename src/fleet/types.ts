import type { ReplicaLoad } from '../metrics/replica-load';

export type Backend = 'vllm' | 'llamacpp';

/** A replica as configured: keyed by URL, which outlives Kong's plugin instances. */
export interface ReplicaSpec {
  url: string;
  backend: Backend;
  priority: number;
}

/**
 * Residency of an adapter on a replica. `static`: registered at replica start, never
 * unloaded. `loading`/`unloading`: a router call is under way. `loaded`: loaded at run time.
 */
export type ResidencyState = 'static' | 'loading' | 'loaded' | 'unloading';

export interface Residency {
  state: ResidencyState;
  since: number;
  lastUsed: number;
}

/**
 * Authority over one load or unload, from a counter that only grows: a holder whose lock
 * expired (it stalled or died) cannot finish its change over a newer holder's. It grows across
 * an emptied or rolled-back state too (see `nextFence`), whose old holders may still name theirs.
 */
export type Fence = number;

/**
 * Fences per ms of the store's clock: a fence is at least that clock's time in tenths of a ms,
 * so one handed out after the state was emptied (FLUSHALL, a restart without persistence) or
 * rolled back (a restart from an older snapshot) exceeds every earlier one, unless more than ten
 * a ms were handed out on average just before. 14 digits until the year 2286 (Redis's cjson
 * writes numbers with 14 significant digits).
 */
export const FENCE_PER_MS = 10;

/** The fence after `last`, handed out at `now` (ms) of the store's clock: the scripts' `newfence`. */
export function nextFence(last: Fence, now: number): Fence {
  const floor = Math.floor(now) * FENCE_PER_MS;
  return floor > last ? floor : last + 1;
}

/**
 * How long the poll behind `s` had run when `s` was made: on the monotonic clock where `s` says (a
 * wall clock stepped during the poll moved the wall-clock duration by the step), else on the wall.
 */
export function pollDuration(s: ReplicaSnapshot): number {
  if (s.monoAt !== undefined && s.monoStartedAt !== undefined) return s.monoAt - s.monoStartedAt;
  return s.at - (s.startedAt ?? s.at);
}

/** An adapter as a request names it: `path` locates it on llama.cpp replicas. */
export interface AdapterRef {
  name: string;
  path?: string;
}

/** One entry of llama.cpp's `GET /lora-adapters`. */
export interface LlamaAdapter {
  id: number;
  path: string;
}

/** The result of one poll of a replica. */
export interface ReplicaSnapshot {
  at: number;
  /** When the scrape began: residency changes after it are newer than the registry it read. */
  startedAt?: number;
  /** The same by the shared store's clock (read beside the scrape, less the read's time), when it has one. */
  sharedStartedAt?: number;
  /**
   * `startedAt` and `at` on the polling process's monotonic clock (src/clock.ts `monotonic`), which
   * a skew correction never steps: the time since the scrape began is measured on these where a
   * snapshot has them (seen-down.ts, the `snapshot` script's estimate). Meaningless elsewhere.
   */
  monoStartedAt?: number;
  monoAt?: number;
  /**
   * Begun when the store applies it, by the store's clock: a verdict seen in the call, no scrape
   * behind it (Kong's own 502/504: src/router/log-phase.ts `proxyFailed`). Any poll begun before it
   * arrives is older news. The shared store's estimate for a poll without a shared start (its
   * duration back from now, less a margin) dated it 50 ms early: an up poll begun within those
   * 50 ms, before Kong's 502, outdated the marking, lost at once.
   */
  startedOnArrival?: boolean;
  ok: boolean;
  error?: string;
  load?: ReplicaLoad;
  /** vLLM: adapters in /v1/models (name = card id, path = root). */
  registry?: { name: string; path: string }[];
  /**
   * Whether some router configuration could have loaded this entry (listed on-demand, or
   * matching its template): then it is not a start-up adapter even if this process never saw
   * it loaded (a plugin-server restart). Asked only about names new to the store.
   */
  managed?: (name: string, path: string) => boolean;
  /**
   * Grows whenever a router configuration registers: entries classified static under an older
   * set of configurations are asked about again (one may manage them now).
   */
  managedVersion?: number;
  /** llama.cpp: adapters from /lora-adapters. */
  llamaAdapters?: LlamaAdapter[];
  /**
   * An up verdict handed on without its poll's figures and registry (seen-down.ts): the replica
   * reads up, its figures as old as they were (stale) until a poll brings new ones.
   */
  verdictOnly?: boolean;
}

/** An adapter's presence on one replica, as the scheduler sees it. */
export interface AdapterPresence {
  state: ResidencyState;
  lastUsed: number;
  inFlight: number;
  /** llama.cpp: the adapter's id, for the request's `lora` field. */
  llamaId?: number;
  /** Not resident yet: a router sharing the store placed it here and is about to load it. */
  placed?: boolean;
  /** Not resident yet: a request of this process decided to load it here (not yet in the store). */
  claimed?: boolean;
  /**
   * Registered, but the replica reports (residency metrics) that it does not hold the weights:
   * a request there reads them from disk again inside the engine loop.
   */
  evicted?: boolean;
}

/**
 * A replica as the scheduler sees it for one request: a plain copy, O(1) in the number of
 * adapters, so a decision costs O(replicas) whatever the fleet holds.
 */
export interface ReplicaView {
  url: string;
  backend: Backend;
  priority: number;
  health: 'up' | 'down' | 'unknown';
  /** Clock time of the last successful poll, or null. */
  snapshotAt: number | null;
  /** Clock time of the last poll attempt, successful or not, or null. */
  checkedAt: number | null;
  lastError?: string;
  waiting: number;
  running: number;
  kvUsage?: number;
  /** Requests this router (all its instances sharing the store) has in flight there. */
  inFlight: number;
  /**
   * Of `inFlight`, the leases of the node that read the view (their ids name it: `leaseNode`);
   * absent from a store that does not tell. A node's own open leases the store no longer counts
   * (reclaimed by age while their requests still ran) are then told from those it does:
   * src/router/in-flight-here.ts adds them to the other nodes' (dst seed 3169793).
   */
  ownInFlight?: number;
  /** Non-static adapters occupying a slot (loading, loaded or unloading). */
  residentCount: number;
  /**
   * Adapter loads under way here (`loading` entries), begun by any router sharing the store;
   * absent when none. vLLM runs them one after another, each stopping its engine.
   */
  loadsUnderWay?: number;
  /** When the oldest of them began (its `since`, by the clock of the router that began it); absent when none. */
  loadsSince?: number;
  /** The requested adapter on this replica, if resident in any state. */
  adapter?: AdapterPresence;
  /** Every resident adapter, when asked for (placement of a cold adapter weighs the victims). */
  residents?: ResidentAdapter[];
  /** llama.cpp: the id of every adapter the replica lists, for the request's `lora` field. */
  llamaIds?: number[];
}

/** An adapter resident on a replica, for eviction decisions and status. */
export interface ResidentAdapter {
  name: string;
  state: ResidencyState;
  since: number;
  lastUsed: number;
  inFlight: number;
  /**
   * Asked with the store's time (`FleetStore.residents`): how long the oldest lease open on it has
   * been held, ms, by the store's clock when it answered, never more than it has (absent: none
   * counted). A poll's reading is explained by a lease held when the poll began only (unseen-busy.ts).
   */
  leasedFor?: number;
}

/** An in-flight count held by one request from decision until its log phase. */
export interface Lease {
  id: string;
  url: string;
  adapter: string | null;
  at: number;
}

/**
 * The node a lease id names: ids are `<node>-<sequence>` (src/runtime.ts `nextLeaseId`, the node's
 * lease prefix), '' for an id without one. Both stores count a replica's leases per node by it
 * (`ReplicaView.ownInFlight`).
 */
export function leaseNode(id: string): string {
  const i = id.lastIndexOf('-');
  return i < 0 ? '' : id.slice(0, i);
}

/** A released lease, and whether it was its adapter's last one on that replica (now idle). */
export interface Released extends Lease {
  adapterIdle: boolean;
}

export interface FleetEvent {
  at: number;
  url: string;
  adapter: string;
  op:
    | 'load'
    | 'unload'
    | 'lease-expired'
    | 'replica-down'
    | 'replica-up'
    | 'replica-restart'
    /** No node routed to it for the grace and nothing ran on it: its records went (retainReplicas). */
    | 'replica-forgotten';
  result: 'ok' | 'error';
  ms?: number;
  detail?: string;
}
