import type { ResidentAdapter } from '../fleet/types';

/** What an eviction policy may know about a candidate victim. */
export interface VictimContext {
  now: number;
  /** Decayed request frequency of an adapter. */
  frequency(name: string): number;
  /** Replicas holding the adapter (1 = this is the only copy). */
  copies(name: string): number;
}

/**
 * Orders idle victims, cheapest first: the cost of losing each is what the policy minimises.
 * A cost is comparable across replicas, so placement can send a cold adapter where the victim
 * is cheapest.
 */
export interface EvictionPolicy {
  readonly name: string;
  cost(victim: ResidentAdapter, ctx: VictimContext): number;
}

/** Least recently used first (the cost is the time of last use). */
export const lru: EvictionPolicy = {
  name: 'lru',
  cost: (v) => v.lastUsed,
};

/**
 * Frequency per copy, recency as the tie-break: an adapter asked for rarely, or held on several
 * replicas (losing one copy keeps it cached elsewhere), goes first. A copy that has never
 * served is worth its recency alone.
 */
export const value: EvictionPolicy = {
  name: 'value',
  cost: (v, ctx) => ctx.frequency(v.name) / Math.max(1, ctx.copies(v.name)) + v.lastUsed * 1e-12,
};

export const EVICTION_POLICIES: Record<string, EvictionPolicy> = { lru, value };

type Resident = Pick<ResidentAdapter, 'name' | 'state' | 'inFlight'>;

/** Idle adapters a replica may unload (loaded, no request in flight, not configured static). */
export function evictable<R extends Resident>(
  residents: readonly R[],
  isStatic: (name: string) => boolean,
): R[] {
  return residents.filter((r) => r.state === 'loaded' && r.inFlight === 0 && !isStatic(r.name));
}

/** Residents that count against `max_loaded_adapters`: neither static on the replica nor configured static. */
export function occupyingSlots<R extends Pick<Resident, 'name' | 'state'>>(
  residents: readonly R[],
  isStatic: (name: string) => boolean,
): R[] {
  return residents.filter((r) => r.state !== 'static' && !isStatic(r.name));
}
