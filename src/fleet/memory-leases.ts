/**
 * The in-process store's open leases: each counted once in its replica's in-flight figures
 * (unless its replica was not registered when taken) and uncounted once when it ends; renewed
 * while the replica reports its adapter running, reclaimed after `lease_max_age_ms` without a
 * renewal, and after LEASE_CEILING of them whatever the renewals.
 */
import type { ReplicaRecord } from './replica-record';
import { leaseNode, type Lease } from './types';

/**
 * A lease is renewed by its adapter's activity on the replica, which any request for that
 * adapter keeps up: a lease whose log phase never came would then live forever on a hot
 * adapter. Past this many `lease_max_age_ms` since it was taken it is reclaimed anyway. 4: the
 * default max age is twice Kong's read_timeout, so only a request running over 40 min (by
 * default) loses its lease; the orphan's inflated count lasts at most that long.
 */
export const LEASE_CEILING = 4;

/** A lease reclaimed by age, and why (worded as the Redis script words it). */
export interface ExpiredLease {
  id: string;
  lease: Lease;
  why: string;
}

export class MemoryLeases {
  /** Open leases, oldest renewal first (a renewal moves a lease to the end). */
  private leases = new Map<string, Lease>();
  /** When a poll last found a lease's adapter running or waiting on its replica (else its `at`). */
  private renewedAt = new Map<string, number>();
  /** Open leases in the order taken, with when (their `at`): renewals end LEASE_CEILING max ages after. */
  private takenAt = new Map<string, number>();
  /**
   * The same on the store's process's monotonic clock, where the store has one (`mono`): a lease's
   * age is that process's duration, which a step of its wall clock does not move.
   */
  private takenMono = new Map<string, number>();
  /**
   * Open leases taken while their replica was not registered: counted nowhere, so uncounted
   * nowhere when they end (as the Redis lease's `c`).
   */
  private uncounted = new Set<string>();
  /**
   * Lease ids the expiry reclaimed, with when: a node's retake does not bring one back (its node
   * may still hold it). Kept LEASE_CEILING max ages, as the Redis script keeps its `reclaimed` set.
   */
  private reclaimed = new Map<string, number>();

  constructor(
    private readonly replica: (url: string) => ReplicaRecord | undefined,
    private readonly mono: () => number | undefined = () => undefined,
  ) {}

  get size(): number {
    return this.leases.size;
  }

  /**
   * Takes `lease` and counts it on its replica; false if it is open already (taken once). Open
   * but counted nowhere (taken before its replica was registered: an emptied state), it is
   * counted now if the replica is known: its node's recovery takes it again once it registered
   * the replica, and a lease left uncounted let an unload go under its request.
   */
  take(lease: Lease): boolean {
    const open = this.leases.get(lease.id);
    if (open) {
      if (this.uncounted.has(lease.id) && this.count(open)) this.uncounted.delete(lease.id);
      return false;
    }
    this.leases.set(lease.id, { ...lease });
    this.takenAt.set(lease.id, lease.at);
    const mono = this.mono();
    if (mono !== undefined) this.takenMono.set(lease.id, mono);
    if (!this.count(lease)) this.uncounted.add(lease.id);
    return true;
  }

  /** Counts `lease` on its replica; false if the replica is not registered. */
  private count(lease: Lease): boolean {
    const r = this.replica(lease.url);
    if (!r) return false;
    r.inFlight++;
    const node = leaseNode(lease.id);
    r.inFlightByNode.set(node, (r.inFlightByNode.get(node) ?? 0) + 1);
    if (lease.adapter !== null)
      r.inFlightByAdapter.set(lease.adapter, (r.inFlightByAdapter.get(lease.adapter) ?? 0) + 1);
    return true;
  }

  /**
   * The replica runs or queues requests for `active` adapters: their leases are alive however
   * long they last (a stream may outlive `lease_max_age_ms`), so their age starts again. `busy`:
   * it runs or queues any request, the only word on base-model ones (no adapter's): their leases too.
   */
  renew(url: string, active: readonly string[], at: number, busy = false): void {
    const names = new Set(active);
    const renewed: [string, Lease][] = [];
    for (const [id, l] of this.leases)
      if (l.url === url && (l.adapter === null ? busy : names.has(l.adapter))) renewed.push([id, l]);
    for (const [id, l] of renewed) {
      this.leases.delete(id);
      this.leases.set(id, l);
      this.renewedAt.set(id, at);
    }
  }

  /**
   * Per adapter on `url`, how long its oldest open lease has been held at `at` (each dated by the
   * `at` it was taken with; taken again, it keeps its first: the script's `lease-t0`). On the
   * monotonic clock where the store has one: on the wall clock, stepped ahead 300 ms since a lease
   * was taken after a poll began, the lease read as held since before it, and excused a reading an
   * unseen request may have made (the unseen hold: src/adapters/unseen-busy.ts).
   */
  heldFor(url: string, at: number): Map<string, number> {
    const oldest = new Map<string, number>();
    const now = this.mono();
    for (const [id, l] of this.leases)
      if (l.url === url && l.adapter !== null) {
        const t = now === undefined ? (this.takenAt.get(id) ?? l.at) : (this.takenMono.get(id) ?? now);
        if (t < (oldest.get(l.adapter) ?? Infinity)) oldest.set(l.adapter, t);
      }
    for (const [name, t] of oldest) oldest.set(name, Math.max(0, (now ?? at) - t));
    return oldest;
  }

  /** Ends the lease and uncounts it; undefined if it is not open (released once). */
  end(id: string): Lease | undefined {
    const lease = this.leases.get(id);
    if (!lease) return undefined;
    this.leases.delete(id);
    this.renewedAt.delete(id);
    this.takenAt.delete(id);
    this.takenMono.delete(id);
    this.drop(lease);
    return lease;
  }

  /** Whether an open lease, counted or not, is on replica `url` (a walk: asked only to forget one). */
  holdsOn(url: string): boolean {
    for (const l of this.leases.values()) if (l.url === url) return true;
    return false;
  }

  /** Whether the expiry reclaimed lease `id` within the last LEASE_CEILING max ages (a retake is refused). */
  wasReclaimed(id: string): boolean {
    return this.reclaimed.has(id);
  }

  /** Ends the leases past their age, in the order reclaimed. */
  expire(now: number, maxAgeMs: number): ExpiredLease[] {
    const out: ExpiredLease[] = [];
    // Map order is renewal order (acquisition, or the last poll that found it running), and the
    // time grows with it: stop at the first young lease.
    for (const [id, lease] of this.leases) {
      if (now - (this.renewedAt.get(id) ?? lease.at) < maxAgeMs) break;
      this.end(id);
      out.push({ id, lease, why: `held over ${maxAgeMs} ms` });
    }
    // Renewed or not, a lease taken LEASE_CEILING max ages ago goes (order taken: stop at the first young one).
    for (const [id, at] of this.takenAt) {
      if (now - at < LEASE_CEILING * maxAgeMs) break;
      const lease = this.leases.get(id)!;
      this.end(id);
      out.push({ id, lease, why: `taken over ${LEASE_CEILING * maxAgeMs} ms ago` });
    }
    for (const e of out) this.reclaimed.set(e.id, now);
    // As the script: those reclaimed LEASE_CEILING max ages ago or more are forgotten, just reclaimed too when that is 0.
    for (const [id, at] of this.reclaimed)
      if (at <= now - LEASE_CEILING * maxAgeMs) this.reclaimed.delete(id);
    return out;
  }

  private drop(lease: Lease): void {
    const r = this.replica(lease.url);
    if (this.uncounted.delete(lease.id) || !r) return;
    r.inFlight--;
    const node = leaseNode(lease.id);
    const mine = (r.inFlightByNode.get(node) ?? 1) - 1;
    if (mine > 0) r.inFlightByNode.set(node, mine);
    else r.inFlightByNode.delete(node);
    if (lease.adapter !== null) {
      const n = (r.inFlightByAdapter.get(lease.adapter) ?? 1) - 1;
      if (n > 0) r.inFlightByAdapter.set(lease.adapter, n);
      else r.inFlightByAdapter.delete(lease.adapter);
    }
  }
}
