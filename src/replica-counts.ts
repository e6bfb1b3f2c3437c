import type { FleetRuntime } from './runtime';

/**
 * Counts per runtime and replica, an entry dropped when it falls to 0: kept per request that is
 * under way, never per request that was (src/lease.ts's open leases, src/router/in-flight-here.ts's
 * decisions joining a replica).
 */
export class ReplicaCounts {
  private readonly byRuntime = new Map<FleetRuntime, Map<string, number>>();

  add(rt: FleetRuntime, url: string, by: 1 | -1): void {
    const perUrl = this.byRuntime.get(rt) ?? new Map<string, number>();
    const n = (perUrl.get(url) ?? 0) + by;
    if (n > 0) perUrl.set(url, n);
    else perUrl.delete(url);
    if (perUrl.size > 0) this.byRuntime.set(rt, perUrl);
    else this.byRuntime.delete(rt);
  }

  get(rt: FleetRuntime, url: string): number {
    return this.byRuntime.get(rt)?.get(url) ?? 0;
  }
}
