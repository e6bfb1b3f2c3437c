import type { Clock } from '../clock';
import type { AdapterManager, AdapterPolicy } from '../adapters/manager';
import { CallerRefused, CallerStopped } from '../adapters/policy';
import type { BudgetWindow, FleetStore } from '../fleet/store';
import type { Logger } from '../log';
import { COLD_LOAD_WINDOW_MS, FLEET_BUDGET_KEY } from '../router/cold-budget';
import { DemandTracker } from './demand';
import { planPrefetch, roomWaitedFor, type PlannerReplica, type PrefetchLoad } from './planner';

/** A router configuration's prefetch settings (config/router-fields/placement.ts `prefetch_*`). */
export interface PrefetchSettings {
  enabled: boolean;
  halfLifeMs: number;
  intervalMs: number;
  hysteresis: number;
  evictFactor: number;
  /** Prefetch loads a minute, fleet-wide; and at most a quarter of `coldLoadsPerMinute` when that is set. */
  loadsPerMinute: number;
  /** The configuration's `cold_loads_per_minute` (0: no fleet budget). */
  coldLoadsPerMinute: number;
  /** A snapshot older than this is not planned on (`stale_after_ms`). */
  staleAfterMs: number;
}

export interface PrefetchStats {
  ticks: number;
  /** Loads planned, those that ended with the adapter resident, and those that failed. */
  planned: number;
  loaded: number;
  failed: number;
  /** Planned loads the budget refused (no unit of the store's, nor one a load of the tick left unused). */
  overBudget: number;
  /** Planned loads dropped at their start: a request began waiting for room on that replica. */
  leftToRequests: number;
  /** Units spent and followed by no load call, sent back to the store at their tick's end (`TickBudget.settle`). */
  refunded: number;
}

/** Fixed-window budget keys in the fleet store (shared by every node on one state). */
const WINDOW_MS = 60_000;
export const PREFETCH_BUDGET_KEY = 'prefetch';
const TICK_KEY = 'prefetch-tick';

/** Raised by the budget check inside the manager's `beforeLoad`: no load was started. */
class OverBudget extends CallerRefused {}
/** Raised inside `beforeLoad` when a request waits for room on the replica: no load was started. */
class RoomWaited extends CallerRefused {}

/**
 * Loads hot adapters ahead of demand, one tick every `intervalMs` (driven by the poller's timer).
 * Each tick, one node of the fleet plans (a fixed-window token in the store: concurrent nodes do
 * not plan twice), from the demand this process saw and the store's residency; every load goes
 * through the manager's load path (once per cold adapter, load locks, `max_loaded_adapters`, the
 * unload path's guards for a victim) and spends the cold-load budget first: prefetch's own key
 * (`prefetchLimit`) and then the fleet's, so requests keep at least half of the fleet's budget in
 * every window of it.
 */
export class Prefetcher {
  readonly demand: DemandTracker;
  readonly stats: PrefetchStats = {
    ticks: 0,
    planned: 0,
    loaded: 0,
    failed: 0,
    overBudget: 0,
    leftToRequests: 0,
    refunded: 0,
  };
  settings: PrefetchSettings | null = null;
  private lastTick = -Infinity;
  /** The tick under way, if one is. */
  private running: Promise<void> | null = null;
  /** Its runtime was replaced (`stop`): no tick, no load, no unload from here on. */
  private stopped = false;

  constructor(
    private readonly store: FleetStore,
    private readonly manager: AdapterManager,
    private readonly clock: Clock,
    private readonly log: Logger,
    /** The adapter policy of the configuration routing to a replica, if one does. */
    private readonly policyOf: (url: string) => AdapterPolicy | undefined,
    halfLifeMs = 60_000,
  ) {
    this.demand = new DemandTracker(halfLifeMs);
  }

  /** Turns prefetching on or off with a configuration's settings (the latest registered wins). */
  configure(settings: PrefetchSettings): void {
    this.settings = settings;
    this.demand.halfLifeMs = settings.halfLifeMs;
  }

  /** A request asked for an on-demand adapter (the access phase; synchronous and O(1) when tracked). */
  observe(adapter: { name: string; path?: string }, urls: readonly string[], now: number): void {
    if (this.settings?.enabled) this.demand.observe(adapter, urls, now);
  }

  /** Runs a tick if one is due and none is under way; the poller calls it after each round. */
  maybeTick(): Promise<void> {
    const s = this.settings;
    const now = this.clock.now();
    if (this.stopped || !s?.enabled || this.running || now - this.lastTick < s.intervalMs)
      return Promise.resolve();
    this.lastTick = now;
    const tick = this.tick(s)
      .catch((err: Error) => this.log.warn(`prefetch tick failed: ${err.message}`))
      .finally(() => (this.running = null));
    this.running = tick;
    return tick;
  }

  /**
   * Its runtime was replaced (a `redis` record change): planning is the successor's. No tick
   * starts from here, and the tick under way starts no load or unload (each is checked right
   * before its lock and its replica call: `AdapterPolicy.halted`). Resolves once that tick has
   * ended, so the store it spoke to stays open until the ends of its calls are sent there.
   */
  stop(): Promise<void> {
    this.stopped = true;
    return this.running ?? Promise.resolve();
  }

  private async tick(s: PrefetchSettings): Promise<void> {
    const now = this.clock.now();
    const demand = this.demand.snapshot(now);
    // Only the replicas this node still routes to: demand keeps those of the configuration that saw
    // it, lapsed since perhaps, and a replica the store forgot, asked of, reads to the failover store
    // as a state emptied, which registers its local copy's replicas again (dst seed 2892202).
    const urls = [...new Set(demand.flatMap((d) => d.demand.urls))].filter((u) => this.policyOf(u));
    // Nothing to plan here: the window's one plan is left to a node that has (review 68).
    if (urls.length === 0) return;
    // One planner a window across the nodes sharing the store.
    if ((await this.store.spendBudget(TICK_KEY, 1, s.intervalMs, now)) > 0) return;
    this.stats.ticks++;
    const views = await this.store.views(urls, undefined, true);
    const replicas: PlannerReplica[] = [];
    for (const v of views) {
      const policy = this.policyOf(v.url);
      if (!policy) continue;
      replicas.push({
        url: v.url,
        maxLoadedAdapters: policy.maxLoadedAdapters,
        available:
          v.health === 'up' &&
          v.snapshotAt !== null &&
          now - v.snapshotAt <= s.staleAfterMs &&
          v.waiting === 0 &&
          v.backend === 'vllm',
        residents: v.residents ?? [],
        isStatic: policy.isStatic,
        roomWanted: this.manager.roomWants.on(v.url),
        heldOff: (name) => this.manager.backoff.holdsOff(v.url, name),
      });
    }
    const plan = planPrefetch(demand, replicas, {
      hysteresis: s.hysteresis,
      evictFactor: s.evictFactor,
      maxLoads: replicas.length,
    });
    const count = new Map(demand.map((d) => [d.demand.adapter.name, d.count]));
    // Copies requests are making are theirs: the plan's loads of those adapters wait a tick.
    const asked = new Map(demand.map((d) => [d.demand.adapter.name, d.demand.at]));
    const theirs = await this.placing(plan, urls);
    for (const p of plan)
      if (p.copies === 0 && now - (asked.get(p.adapter.name) ?? -Infinity) < s.intervalMs)
        theirs.add(p.adapter.name);
    const loads = plan.filter((p) => !theirs.has(p.adapter.name));
    // Replaced while it planned: its successor plans now.
    if (this.stopped) return;
    // One load a replica, in parallel; the budget is spent just before each load starts.
    const budget = new TickBudget(
      () => spendPrefetchBudget(this.store, s, this.clock.now()),
      (window, n) => this.store.refundBudget(window, n, this.clock.now()),
    );
    this.stats.planned += loads.length;
    try {
      const outcomes = await Promise.all(loads.map((p) => this.load(p, count, budget)));
      // A unit spent by a load another router made first goes to a load the budget refused.
      for (const [i, p] of loads.entries())
        if (outcomes[i] === 'refused' && budget.spare > 0 && !this.stopped)
          outcomes[i] = await this.load(p, count, budget);
      this.stats.overBudget += outcomes.filter((o) => o === 'refused').length;
    } finally {
      // Units no load call followed: given back to the store, before `stop` lets it close.
      this.stats.refunded += await budget.settle();
    }
  }

  /**
   * Planned adapters a request is placing (its cold load about to start, on this node or another
   * sharing the store): that request makes the copy, on its own budget, and the residency the plan
   * read does not show it yet. Their loads wait for the next tick, which sees it loading. A request
   * still deciding has no placement yet: the tick leaves to it the first copy of an adapter asked
   * for within the last interval (refused for want of room, it leaves none a prefetch would find).
   */
  private async placing(plan: readonly PrefetchLoad[], urls: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (const adapter of new Map(plan.map((p) => [p.adapter.name, p.adapter])).values()) {
      const views = await this.store.views(urls, adapter);
      this.manager.overlayClaims(views, adapter.name);
      if (views.some((v) => v.adapter?.placed || v.adapter?.claimed)) out.add(adapter.name);
    }
    return out;
  }

  /** Whether a request of this process waits for room on `url` for an adapter it does not hold. */
  private async roomWaited(url: string, adapter: string): Promise<boolean> {
    // Asked from inside the load, which wants room for its own adapter: a request waiting for
    // that adapter here is served by this load.
    const roomWanted = this.manager.roomWants.on(url).filter((name) => name !== adapter);
    return roomWanted.length > 0 && roomWaitedFor({ residents: await this.store.residents(url), roomWanted });
  }

  /** 'refused': the budget refused it (no unit left); 'done': it ran its course, whatever came of it. */
  private async load(
    p: PrefetchLoad,
    count: Map<string, number>,
    budget: TickBudget,
  ): Promise<'done' | 'refused'> {
    const policy = this.policyOf(p.url);
    if (!policy) return 'done';
    const victims = new Set(p.victims);
    /** The unit this call holds: the manager may ask again after a load it lost to another router. */
    let unit = null as BudgetUnit | null;
    /** Its load call went to the replica: the unit is spent, whatever the call's answer. */
    let called = false;
    /** The budget refused the unit at a victim's unload: no room was made. */
    let refusedAtUnload = false;
    try {
      const outcome = await this.manager.ensure(
        p.url,
        p.adapter,
        {
          ...policy,
          // Never waits for room: a slot free now, or an allowed idle victim now, or nothing.
          queueTimeoutMs: 0,
          deadline: this.clock.now() + policy.loadTimeoutMs + 1000,
          mayEvict: (name) => victims.has(name),
          halted: () => this.stopped,
          // The manager unloads a victim before it asks `beforeLoad` (Room.claimSlot: a request
          // keeps the room it made). A prefetch has no request to keep it for: its unit is taken
          // once a victim's unload lock is granted, before the call, so a refused load unloads
          // nothing (seed 60 of the simulation: a victim gone, its slot left empty). Not before
          // the room is made: a victim a request leased meanwhile left no load, and the unit (the
          // fleet's cold-load budget's too) spent for nothing (test/core/review-60.test.ts).
          beforeUnload: async () => {
            if (unit) return true;
            if (this.stopped) return false;
            // A spend that fails withholds the unload too; its noRoom reports the prefetch failed.
            const granted = await budget.take().catch(() => undefined);
            if (granted === null) refusedAtUnload = true;
            if (!granted) return false;
            unit = granted;
            return true;
          },
          // A load call that failed keeps its unit: the replica did the work (and the fleet's
          // budget bounds the replicas' load work, not the adapters made resident).
          loadCalled: () => (called = true),
        },
        (v) => count.get(v.name) ?? 0,
        async () => {
          // Stopped while the plan ran: no budget spent (Room.claimSlot asks again after).
          if (this.stopped) throw new CallerStopped('load', p.adapter.name, p.url);
          // The plan is a tick old: a request may have begun waiting for room here since.
          if (await this.roomWaited(p.url, p.adapter.name)) throw new RoomWaited();
          if (unit) return;
          unit = await budget.take();
          if (!unit) throw new OverBudget();
        },
      );
      if (outcome === 'loaded') {
        this.stats.loaded++;
        this.log.info(
          `prefetched adapter '${p.adapter.name}' on ${p.url} (target ${p.target.toFixed(2)} copies, had ${p.copies})`,
        );
      }
    } catch (err) {
      if (err instanceof OverBudget || refusedAtUnload) return 'refused';
      if (err instanceof CallerStopped) {
        this.log.info(`prefetch of '${p.adapter.name}' on ${p.url} left out: its runtime was replaced`);
        return 'done';
      }
      if (err instanceof RoomWaited) {
        this.stats.leftToRequests++;
        this.log.info(`prefetch of '${p.adapter.name}' on ${p.url} left out: a request waits for room there`);
        return 'done';
      }
      this.stats.failed++;
      this.log.info(`prefetch of '${p.adapter.name}' on ${p.url} not made: ${(err as Error).message}`);
    } finally {
      // Taken, and no load call followed (another router loaded it first, the victim's unload was
      // withheld or failed, the load lock was refused after the room was made, the call left out):
      // the unit is the tick's to use, once, or the store's again at the tick's end.
      if (!called) unit?.giveBack();
    }
    return 'done';
  }
}

/** A unit of a tick's budget, held by one load; given back at most once. */
export interface BudgetUnit {
  /** Back to the tick's spare units; a second call does nothing. */
  giveBack(): void;
}

/** The store's windows one prefetch unit was counted in (prefetch's own, the fleet's). */
export type CountedIn = readonly BudgetWindow[];

/**
 * The prefetch budget of one tick's loads: units spent in the store, and those a load took but
 * made no load call for (given back), which the next load takes instead of spending again. A
 * spare unit left at the end of the tick (`settle`) goes back to the windows it was counted in:
 * requests' cold loads are not refused for loads nobody made.
 */
export class TickBudget {
  private readonly spareUnits: CountedIn[] = [];
  constructor(
    private readonly spendOne: () => Promise<CountedIn | null>,
    private readonly refund: (window: BudgetWindow, count: number) => Promise<number>,
  ) {}

  /** Units given back and not taken again. */
  get spare(): number {
    return this.spareUnits.length;
  }

  /** A spare unit, else one from the store; null: refused. */
  async take(): Promise<BudgetUnit | null> {
    const unit = this.spareUnits.pop() ?? (await this.spendOne());
    if (!unit) return null;
    let back = false;
    return {
      giveBack: () => {
        if (back) return;
        back = true;
        this.spareUnits.push(unit);
      },
    };
  }

  /**
   * The tick is over: its spare units go back to the store, each window the count of units
   * counted there (a window ended or opened anew since takes none back). Returns the units.
   */
  async settle(): Promise<number> {
    const spare = this.spareUnits.splice(0);
    const windows = new Map<string, { window: BudgetWindow; count: number }>();
    for (const w of spare.flat()) {
      const id = JSON.stringify([w.key, w.opened, w.epoch]);
      const had = windows.get(id);
      if (had) had.count++;
      else windows.set(id, { window: w, count: 1 });
    }
    for (const { window, count } of windows.values()) await this.refund(window, count).catch(() => 0);
    return spare.length;
  }
}

/**
 * Prefetching's budget a minute: `loadsPerMinute`, and at most a quarter of the fleet's
 * `cold_loads_per_minute`. Both are fixed one-minute windows that open at their first spend, so
 * one window of the fleet's overlaps at most two of prefetching's: requests keep at least half.
 */
export function prefetchLimit(s: Pick<PrefetchSettings, 'loadsPerMinute' | 'coldLoadsPerMinute'>): number {
  return s.coldLoadsPerMinute > 0
    ? Math.min(s.loadsPerMinute, Math.floor(s.coldLoadsPerMinute / 4))
    : s.loadsPerMinute;
}

/**
 * Spends one prefetch load: prefetching's own window first, then the fleet's. Returns the windows
 * it was counted in; null: refused (prefetch's own unit, granted before the fleet's refusal, is
 * given back at once: no load follows it).
 */
export async function spendPrefetchBudget(
  store: Pick<FleetStore, 'takeBudget' | 'refundBudget'>,
  s: Pick<PrefetchSettings, 'loadsPerMinute' | 'coldLoadsPerMinute'>,
  now: number,
): Promise<CountedIn | null> {
  const limit = prefetchLimit(s);
  if (limit <= 0) return null;
  const own = await store.takeBudget(PREFETCH_BUDGET_KEY, limit, WINDOW_MS, now);
  if (own.waitMs > 0) return null;
  const counted = own.window ? [own.window] : [];
  if (s.coldLoadsPerMinute <= 0) return counted;
  const fleet = await store.takeBudget(FLEET_BUDGET_KEY, s.coldLoadsPerMinute, COLD_LOAD_WINDOW_MS, now);
  if (fleet.waitMs > 0) {
    if (own.window) await store.refundBudget(own.window, 1, now).catch(() => 0);
    return null;
  }
  return fleet.window ? [...counted, fleet.window] : counted;
}
