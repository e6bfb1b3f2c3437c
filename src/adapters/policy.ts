import { errors, RouterError } from '../errors';
/** What one router configuration asks of the adapter manager, and what a call of it reports. */
export interface AdapterPolicy {
  /** Non-static adapters a replica may hold. */
  maxLoadedAdapters: number;
  loadTimeoutMs: number;
  /** How long a load may wait for a busy replica's adapter to go idle before 503. */
  queueTimeoutMs: number;
  /** First backoff after a failed load; doubles per failure up to `backoffMaxMs`. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Configured static adapters: never victims. */
  isStatic: (name: string) => boolean;
  /** Adapters the configuration lists (known to exist); others are names a client chose. */
  isListed?: (name: string) => boolean;
  /**
   * When the request's access phase must be over, on the clock (Kong gives up on the plugin
   * server at 60 s): every wait, scrape, unload, load and retry of this call ends by then.
   */
  deadline?: number;
  /**
   * Which idle residents this call may unload for room (default: any). A prefetch narrows it to
   * adapters far colder than its own; every guard of the unload path still applies.
   */
  mayEvict?: (name: string) => boolean;
  /**
   * Claims the adapter's shared placement again (the claim the decision made for this replica);
   * the replica it names now. Asked before a load that waited for room: meanwhile the shared
   * state may have lost the claim (emptied, or the claim was made while this node decided alone)
   * and another node placed the adapter elsewhere (dst seed 910: two loads of one adapter).
   */
  recheckPlacement?: () => Promise<string>;
  /**
   * True once the caller may start nothing more (a runtime replaced by a `redis` record change:
   * its prefetch and its trim after a poll). Asked right before each lock is asked and right
   * before each replica call, not only when the work was planned: a plan under way at the change
   * starts no load or unload after it (CallerStopped).
   */
  halted?: () => boolean;
  /**
   * Asked once an unload's lock is granted for this call's room, before the replica's word is:
   * false withholds that unload (no call, its lock ended as not done, nothing unloaded). A
   * prefetch spends its budget unit here: asked before the room was made, a unit was spent for
   * a victim a request leased meanwhile (nothing loaded); asked after, a victim was unloaded for a
   * load its budget then refused (the simulation's seed 60).
   */
  beforeUnload?: () => Promise<boolean>;
  /**
   * Told as this call's load call goes to the replica (not a joined one's): a prefetch's budget
   * unit is spent from there, whatever the call's answer; taken and no call made, it is given back.
   */
  loadCalled?: () => void;
  /**
   * Keeps the caller's lease young while it waits (src/router/waiting-lease.ts): asked at each wake
   * of a wait for room or for another's load or unload, before a load's lock, before a landed load
   * turns `loaded`, and every ROOM_FALLBACK_MS throughout a load (AdapterManager.ensure: one replica call
   * has no wake, nor has a load queued behind another's room-making). A request that joined this
   * process's load of the adapter (a prefetch's, another request's) is asked by that load at the
   * same points. A promise when it takes a fresh lease (awaited, but not on the load's timer),
   * else undefined: no await, so a wait that needs none runs as before.
   */
  keepLease?: KeepLease;
}

/** A caller's `AdapterPolicy.keepLease`. */
export type KeepLease = () => Promise<void> | undefined;

/**
 * Each of `keeps` asked (AdapterPolicy.keepLease): the fresh leases taken, awaited together;
 * undefined when none took one, so a wait that needs none awaits nothing (its steps run as before).
 */
export function keepLeases(keeps: Iterable<KeepLease | undefined>): Promise<void> | undefined {
  let taking: Promise<void>[] | undefined;
  for (const keep of keeps) {
    const kept = keep?.();
    if (kept) (taking ??= []).push(kept);
  }
  if (!taking) return undefined;
  // One (the usual case) awaited as it is: no extra step where one caller renews alone.
  return taking.length === 1 ? taking[0] : Promise.all(taking).then(() => undefined);
}

/**
 * No load was started, for a reason of its caller's own (a prefetch stopped or over its budget),
 * not the replica's nor the adapter's: a request joined to that load looks again and loads it
 * itself (AdapterManager.ensure). Thrown as any, it failed the joined request with a 500.
 */
export class CallerRefused extends Error {}

/** No load or unload was started: the caller was stopped (`AdapterPolicy.halted`). */
export class CallerStopped extends CallerRefused {
  constructor(op: 'load' | 'unload', adapter: string, url: string) {
    super(`the ${op} of '${adapter}' on ${url} was not started: its caller stopped`);
  }
}

export type EnsureOutcome =
  /** Resident already: nothing to do. */
  | 'hit'
  /** This call loaded it. */
  | 'loaded'
  /** Another caller was loading it; this one waited for that load. */
  | 'joined';

export interface LoadRecord {
  url: string;
  adapter: string;
  op: 'load' | 'unload';
  ok: boolean;
  ms: number;
}

/** When the access phase must be over (never, without a deadline). */
export function accessEnd(policy: AdapterPolicy): number {
  return policy.deadline ?? Infinity;
}

/** `ms`, cut to what the access phase has left (`policy.deadline`) at `now`; 0 or less: none left. */
export function within(policy: AdapterPolicy, ms: number, now: number): number {
  return Math.min(ms, accessEnd(policy) - now);
}

/** The 503s of a wait for the adapter's own load under way on the chosen replica (`loadWaitRanOut`). */
const loadWaits = new WeakSet<RouterError>();

/**
 * A 503 for a wait that ran out while the adapter's own load (another request's, here or on a node
 * sharing the store) was still under way on the chosen replica: no lack of room, so it is not
 * escalated, or the request would load the adapter on a second replica beside it (dst seed 1001999).
 */
export function loadWaitRanOut(adapter: string, url: string): RouterError {
  const err = errors.noRoom(adapter, url, 1, 'its load is still under way');
  loadWaits.add(err);
  return err;
}

export function isLoadWaitRanOut(err: unknown): boolean {
  return err instanceof RouterError && loadWaits.has(err);
}
