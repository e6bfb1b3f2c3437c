import { LeaseHandle } from '../lease';
import type { FleetRuntime } from '../runtime';

/**
 * A request's lease kept young while the request waits under it (for room, for its adapter's
 * load). `lease_max_age_ms` reclaims the count of a holder whose log phase never came (a dead
 * node, a skipped log phase); a request still waiting is no such holder. Nothing renews a lease on
 * an adapter the replica does not run yet (a poll renews only what it finds running or waiting),
 * so a wait past `lease_max_age_ms` lost it, the load made for the request landed with no lease on
 * it, and another waiter unloaded it for room before the request was sent (the simulation's seed
 * 1251595: three times, 17.3 s for a bound of 16.5 s).
 *
 * Asked at each wake of the wait (AdapterPolicy.keepLease) and before the load's lock: once the
 * lease is half `lease_max_age_ms` old (the age past which admission already takes a fresh one: a
 * store's sweep may reclaim it past that, by Redis's clock), a fresh lease is taken, then the old
 * one given back, so one always holds the adapter. No timer of its own: a wait wakes at least every
 * 250 ms (ROOM_FALLBACK_MS), and a load asks that often throughout (AdapterManager.ensure), for its caller
 * and for the requests that joined it: during its one replica call too, where a lease reclaimed by
 * the store's sweep left the replica's count without the request while the load ran. With the
 * default (600 s) no wait reaches it (the access phase ends by 55 s).
 */
export class WaitingLease {
  /** After a failed take, when the next may be tried (a store that fails fast is not asked every wake). */
  private retryAt = -Infinity;
  /**
   * The fresh lease being taken, if any. Asked by the load this request joined as well as by its own
   * wait (AdapterPolicy.keepLease), which may run on once that load's join gave up: one take at a time.
   */
  renewing: Promise<void> | undefined;

  constructor(
    private readonly rt: FleetRuntime,
    /** The lease that holds the adapter now. */
    public current: LeaseHandle,
    private readonly maxAgeMs: number,
    /** Told of each fresh lease, before the old one goes back (the work model's entry moves to it). */
    private readonly onFresh: (lease: LeaseHandle) => void,
  ) {}

  /** A fresh lease if this one is half its max age old (the swap's promise), else undefined: nothing to await. */
  keep(): Promise<void> | undefined {
    if (this.renewing) return this.renewing;
    const now = this.rt.clock.now();
    if (now - this.current.lease.at < this.maxAgeMs / 2 || now < this.retryAt) return undefined;
    return (this.renewing = this.swap());
  }

  private async swap(): Promise<void> {
    try {
      const { url, adapter } = this.current.lease;
      let fresh: LeaseHandle;
      try {
        fresh = (await LeaseHandle.take(this.rt, url, adapter)).lease;
      } catch (err) {
        // The old lease stays; admission takes a fresh one after the wait, as after a slow load.
        this.retryAt = this.rt.clock.now() + this.maxAgeMs / 8;
        this.rt.log.warn(`could not renew a waiting request's lease: ${(err as Error).message}`);
        return;
      }
      const old = this.current;
      this.current = fresh;
      this.onFresh(fresh);
      // Not released: it ages out as a lost log phase's would.
      await old
        .release()
        .catch((err: Error) => this.rt.log.warn(`could not give back lease ${old.id}: ${err.message}`));
    } finally {
      this.renewing = undefined;
    }
  }
}
