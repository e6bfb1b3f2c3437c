import type { AdapterRef, ResidencyState } from '../fleet/types';
import { evictable, occupyingSlots } from '../adapters/eviction';
import type { AdapterDemand } from './demand';

/** What the planner knows of one replica: fresh, up, and whether a load there would stall no queue. */
export interface PlannerReplica {
  url: string;
  /** Non-static adapters it may hold (`max_loaded_adapters` of the configuration routing there). */
  maxLoadedAdapters: number;
  /** Up, freshly polled and with nothing waiting: a load now stalls no queued request. */
  available: boolean;
  residents: readonly { name: string; state: ResidencyState; inFlight: number }[];
  isStatic: (name: string) => boolean;
  /** Adapters requests waiting in the gateway want room for here (held, or waiting for room). */
  roomWanted?: readonly string[];
  /** Whether a load of `adapter` here backs off after a failure (src/adapters/backoff.ts): none planned. */
  heldOff?: (adapter: string) => boolean;
}

export interface PlannerSettings {
  /** A copy is made only when the adapter's target exceeds its copies by this much (copies). */
  hysteresis: number;
  /** A prefetch evicts only an adapter whose demand times this is below the newcomer's. */
  evictFactor: number;
  /** Loads planned at most (what the budget allows this tick). */
  maxLoads: number;
}

/** One load to make ahead of demand, and the residents it may evict for room (none: a free slot). */
export interface PrefetchLoad {
  url: string;
  adapter: AdapterRef;
  /** The adapter's share of demand times the fleet's slots, and its copies before this load. */
  target: number;
  copies: number;
  victims: string[];
}

/** Residency states that count as a copy (a load under way will be one). */
const COPY: ReadonlySet<ResidencyState> = new Set(['loaded', 'loading', 'static']);

/**
 * Whether a request waiting in the gateway wants room here for an adapter the replica does not
 * hold: it goes as soon as the replica can take it, so a prefetch takes neither the free slot nor
 * an idle adapter it could unload, and plans nothing here while it waits.
 */
export function roomWaitedFor(r: Pick<PlannerReplica, 'residents' | 'roomWanted'>): boolean {
  if (!r.roomWanted?.length) return false;
  const copies = new Set(r.residents.filter((a) => COPY.has(a.state)).map((a) => a.name));
  return r.roomWanted.some((name) => !copies.has(name));
}

/**
 * Where to load adapters ahead of demand: each adapter's target is its share of the demand times
 * the slots of the available replicas (at most one copy a replica); a copy is made where the
 * target exceeds the copies by `hysteresis`, the largest shortfall first, one load a replica,
 * into a free slot when there is one. Else it may take the slot of an idle adapter only when that
 * one's demand times `evictFactor` is below the newcomer's and losing the copy leaves it within
 * `hysteresis` of its own target (so it would not be made again at the next tick: no copy is
 * made and dropped in turn). A replica where a waiting request wants room (`roomWaitedFor`) is
 * left out, and so is one where the adapter's load backs off after a failure (`heldOff`). Pure:
 * what it decides the manager carries out with all its guards.
 */
export function planPrefetch(
  demand: readonly { demand: AdapterDemand; count: number }[],
  replicas: readonly PlannerReplica[],
  s: PlannerSettings,
): PrefetchLoad[] {
  const avail = replicas.filter((r) => r.available && r.maxLoadedAdapters > 0 && !roomWaitedFor(r));
  const slots = avail.reduce((n, r) => n + r.maxLoadedAdapters, 0);
  const total = demand.reduce((n, d) => n + d.count, 0);
  if (s.maxLoads <= 0 || slots === 0 || total <= 0) return [];
  const countOf = new Map(demand.map((d) => [d.demand.adapter.name, d.count]));
  const urlsOf = new Map(demand.map((d) => [d.demand.adapter.name, new Set(d.demand.urls)]));
  // Residents as the plan goes: names per replica (copies), and those a load may displace.
  const held = new Map(
    avail.map((r) => [r.url, new Set(r.residents.filter((a) => COPY.has(a.state)).map((a) => a.name))]),
  );
  const copies = (name: string) => avail.filter((r) => held.get(r.url)!.has(name)).length;
  const target = (name: string) => {
    const urls = urlsOf.get(name);
    const reach = urls ? avail.filter((r) => urls.has(r.url)).length : 0;
    return Math.min(reach, ((countOf.get(name) ?? 0) / total) * slots);
  };
  const used = new Set<string>();
  const plan: PrefetchLoad[] = [];
  let pending = demand;
  while (plan.length < s.maxLoads) {
    let best: { d: AdapterDemand; count: number; gap: number; copies: number; target: number } | undefined;
    for (const { demand: d, count } of pending) {
      const name = d.adapter.name;
      const c = copies(name);
      const t = target(name);
      const gap = t - c;
      if (gap >= s.hysteresis && (!best || gap > best.gap)) best = { d, count, gap, copies: c, target: t };
    }
    if (!best) break;
    const name = best.d.adapter.name;
    const urls = urlsOf.get(name)!;
    let choice: { r: PlannerReplica; victims: string[] } | undefined;
    for (const r of avail) {
      if (used.has(r.url) || !urls.has(r.url) || held.get(r.url)!.has(name)) continue;
      // Its load would be refused there: another replica takes the copy this tick.
      if (r.heldOff?.(name)) continue;
      // Every non-static resident holds a slot, one being unloaded too (as the manager counts).
      if (occupyingSlots(r.residents, r.isStatic).length < r.maxLoadedAdapters) {
        choice = { r, victims: [] };
        break;
      }
      const victims = evictable(r.residents, r.isStatic)
        .filter(
          (a) =>
            held.get(r.url)!.has(a.name) &&
            (countOf.get(a.name) ?? 0) * s.evictFactor < best.count &&
            copies(a.name) - 1 + s.hysteresis > target(a.name),
        )
        .map((a) => a.name);
      if (victims.length > 0 && !choice) choice = { r, victims };
    }
    if (!choice) {
      // No replica can take it this tick: leave it out and plan the others.
      pending = pending.filter((d) => d.demand.adapter.name !== name);
      continue;
    }
    used.add(choice.r.url);
    const h = held.get(choice.r.url)!;
    // The manager evicts the coldest allowed victim: the plan assumes that one goes.
    const coldest = choice.victims.reduce<string | undefined>(
      (v, n) => (v === undefined || (countOf.get(n) ?? 0) < (countOf.get(v) ?? 0) ? n : v),
      undefined,
    );
    if (coldest !== undefined) h.delete(coldest);
    h.add(name);
    plan.push({
      url: choice.r.url,
      adapter: best.d.adapter,
      target: best.target,
      copies: best.copies,
      victims: choice.victims,
    });
  }
  return plan;
}
