import type { Clock } from '../clock';
import type { ReplicaView } from '../fleet/types';

/**
 * Placements decided but not yet visible in the store: between a decision and its load's
 * `beginLoad` there are awaits, and concurrent cold requests must see the first one's
 * choice or they spread the same adapter over several replicas.
 */
export class PlacementClaims {
  private claims = new Map<string, Map<string, number>>();

  constructor(private readonly clock: Clock) {}

  /** Records (synchronously) that a decision placed `adapter` on `url`; undo with `unclaim`. */
  claim(url: string, adapter: string): void {
    let m = this.claims.get(url);
    if (!m) this.claims.set(url, (m = new Map()));
    m.set(adapter, (m.get(adapter) ?? 0) + 1);
  }

  unclaim(url: string, adapter: string): void {
    const m = this.claims.get(url);
    if (!m) return;
    const n = (m.get(adapter) ?? 1) - 1;
    if (n > 0) m.set(adapter, n);
    else m.delete(adapter);
    if (m.size === 0) this.claims.delete(url);
  }

  /** Whether a placement on `url` is decided and not yet in the store (a load about to begin there). */
  on(url: string): boolean {
    return this.claims.has(url);
  }

  /**
   * Shows claimed placements in `views`: the requested adapter as a loading holder, and every
   * claim not yet in the store as a slot spoken for (so concurrent cold requests for different
   * adapters do not all count on the same free slot or idle victim).
   */
  overlay(views: ReplicaView[], adapter: string): void {
    if (this.claims.size === 0) return;
    // Placed elsewhere in the shared store: a claim of ours for it is a loser about to step back.
    const placedInStore = views.some((v) => v.adapter?.placed);
    for (const v of views) {
      const pending = this.claims.get(v.url);
      if (!pending) continue;
      for (const name of pending.keys()) {
        const inStore =
          name === adapter ? v.adapter !== undefined : v.residents?.some((r) => r.name === name);
        // Without the residents list only the requested adapter's own claim can be placed.
        if (inStore || (name !== adapter && !v.residents)) continue;
        if (name === adapter && placedInStore) continue;
        v.residentCount++;
        if (name === adapter)
          v.adapter = { state: 'loading', lastUsed: this.clock.now(), inFlight: 0, claimed: true };
      }
    }
  }
}

/**
 * Thrown by a load that waited for room once the shared placement, checked again, names another
 * replica (`AdapterPolicy.recheckPlacement`): the request follows it instead of loading a second copy.
 */
export class PlacedElsewhere extends Error {
  constructor(
    readonly adapter: string,
    readonly url: string,
  ) {
    super(`adapter '${adapter}' was placed on ${url} while this load waited for room`);
  }
}
