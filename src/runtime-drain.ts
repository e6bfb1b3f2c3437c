import { monotonic, type Clock } from './clock';
import type { LeaseHandle } from './lease';
import { Signal } from './signal';

/**
 * What a runtime must see end before it closes once a `redis` record change replaced it: the
 * decisions under way on it and the leases taken on it, each given back where it was taken
 * (LeaseHandle). Its successors ask it, meanwhile, whether a request here may be on an adapter.
 */
export class RuntimeDrain {
  /** Decisions under way. */
  private active = 0;
  /** Leases taken and not yet given back, with when each was opened (monotonic: `monotonic`). */
  private readonly leases = new Map<LeaseHandle, number>();
  /** Told when a decision ends or a lease is given back. */
  private readonly quieter = new Signal();

  constructor(private readonly clock: Clock) {}

  /** A decision begins: counted until `ended`. */
  began(): void {
    this.active++;
  }

  ended(): void {
    this.active--;
    this.quieter.notify();
  }

  leaseOpened(lease: LeaseHandle): void {
    this.leases.set(lease, monotonic(this.clock));
  }

  leaseEnded(lease: LeaseHandle): void {
    this.leases.delete(lease);
    this.quieter.notify();
  }

  /** Whether a request here may be on `adapter` of `url`: a lease of it is open, or a decision may take one. */
  uses(url: string, adapter: string): boolean {
    if (this.active > 0) return true;
    for (const l of this.leases.keys()) if (l.lease.url === url && l.lease.adapter === adapter) return true;
    return false;
  }

  /**
   * Whether a lease here on `adapter` of `url`, still open, was opened at or before `mono` (the
   * monotonic start of a poll: what its reading may have seen). A decision under way is none: its
   * lease, if any, opens later (src/adapters/unseen-busy.ts).
   */
  openedBy(url: string, adapter: string, mono: number): boolean {
    for (const [l, at] of this.leases)
      if (at <= mono && l.lease.url === url && l.lease.adapter === adapter) return true;
    return false;
  }

  /** Whether a lease taken here on `url` is still open. */
  leasesOn(url: string): boolean {
    for (const l of this.leases.keys()) if (l.lease.url === url) return true;
    return false;
  }

  /** Resolves once no decision is under way. */
  async decisionsEnded(): Promise<void> {
    while (this.active > 0) await this.quieter.wait(this.clock, 1000);
  }

  /** Resolves once every lease is given back, or past the age its store reclaims it at, and no decision is under way. */
  async drained(): Promise<void> {
    for (;;) {
      const now = this.clock.now();
      for (const l of [...this.leases.keys()]) if (l.reclaimedBy(now)) l.agedOut();
      if (this.leases.size === 0 && this.active === 0) return;
      await this.quieter.wait(this.clock, 1000);
    }
  }
}
