import type { FleetRuntime } from './runtime';

/**
 * Past this many replicas counted on one runtime, its replicas at 0 are dropped: a fleet whose
 * replicas come and go (new addresses) never grows the counts past what it routes to now.
 */
const KEPT_AT_ZERO = 1024;

/**
 * Counts per runtime and replica, kept per request that is under way, never per request that was
 * (src/lease.ts's open leases, src/router/in-flight-here.ts's decisions joining a replica). A
 * replica's entry stays at 0 when its last request ends: each request counts itself in and out,
 * and a Map emptied and filled again per request allocated its table anew each time (about
 * 1 KB a route + release; bench/profile-decision.ts counts bytes). A runtime's counts go with it.
 */
export class ReplicaCounts {
  private readonly byRuntime = new WeakMap<FleetRuntime, Map<string, number>>();

  add(rt: FleetRuntime, url: string, by: 1 | -1): void {
    let perUrl = this.byRuntime.get(rt);
    if (perUrl === undefined) this.byRuntime.set(rt, (perUrl = new Map<string, number>()));
    const n = (perUrl.get(url) ?? 0) + by;
    perUrl.set(url, n > 0 ? n : 0);
    if (n <= 0 && perUrl.size > KEPT_AT_ZERO)
      for (const [u, left] of perUrl) if (left === 0) perUrl.delete(u);
  }

  /** Drops `url`'s entry on `rt` if it is at 0 (a replica that left); false if some count is open there. */
  forget(rt: FleetRuntime, url: string): boolean {
    const perUrl = this.byRuntime.get(rt);
    if ((perUrl?.get(url) ?? 0) > 0) return false;
    perUrl?.delete(url);
    return true;
  }

  /** Whether `rt` keeps an entry for `url`, at 0 or not (dst/replica-records.ts). */
  has(rt: FleetRuntime, url: string): boolean {
    return this.byRuntime.get(rt)?.has(url) ?? false;
  }

  get(rt: FleetRuntime, url: string): number {
    return this.byRuntime.get(rt)?.get(url) ?? 0;
  }
}
