import { sleep, systemClock, type Clock } from '../../clock';
import type { Logger } from '../../log';
import { MemoryFleetStore } from '../memory-store';
import type { FleetDump, FleetStore, StoreMode } from '../store';
import type {
  AdapterRef,
  Fence,
  FleetEvent,
  Lease,
  Released,
  ReplicaSnapshot,
  ReplicaSpec,
  ReplicaView,
  ResidencyState,
  ResidentAdapter,
} from '../types';

/** Probe intervals after the shared store comes back during which this node unloads nothing. */
export const UNLOAD_HOLD_OFF_PROBES = 2;

export interface FailoverOptions {
  /** How often a degraded node checks whether the shared store is back. */
  probeMs: number;
  /** While degraded, "still unreachable" is logged at most this often. */
  logEveryMs: number;
}

/** What the shared side must offer besides the store operations: a cheap liveness check. */
export interface SharedStore extends FleetStore {
  ping(): Promise<unknown>;
  /** Whether the shared state was emptied since last asked (its epoch changed or vanished). */
  takeStateLost?(): boolean;
  /** Told when the shared state was found emptied outside a decision (a heartbeat). */
  onStateLost?: (() => void) | null;
  /**
   * Nodes sharing the state, as last seen: this node's share of a budget during an outage. Null
   * (or absent) until the state first answered this process: then its share is nothing.
   */
  readonly liveNodes?: number | null;
  /** The shared state's epoch as last seen (null before any): spends are counted under it. */
  readonly currentEpoch?: string | null;
  /** Adds cold loads counted during an outage to the current window of `key`. */
  addToBudget?(key: string, count: number, windowMs: number): Promise<void>;
  /**
   * Drops this node's leases in the shared state that `held` (read just before the call is sent)
   * does not name; `leaving`: the node leaves this state for good.
   */
  prune?(held: () => string[], leaving?: boolean): Promise<number>;
}

/**
 * How long this node remembers an open lease whose release never came (Kong skipped its log
 * phase): bounds memory only; the stores reclaim such leases after `lease_max_age_ms`.
 */
const OPEN_LEASE_MEMORY_MS = 24 * 3600_000;
/** Passes of a recovery re-taking leases admitted during the previous pass before it gives up until the next probe. */
const RECOVERY_PASSES = 100;
/** Budget keys whose recent spends this node remembers (one per router configuration in practice). */
const RECENT_SPEND_KEYS = 1024;

/** A cold load this node was granted, and the shared epoch it is counted under (null: none yet). */
interface Spend {
  t: number;
  epoch: string | null;
}

/**
 * Shared fleet state with a local fallback. While the shared store answers, it decides; the
 * local store is fed every observation (polls, upstream outcomes) so it is warm. When a shared
 * call fails or times out, this node decides from its local state until a probe finds the
 * shared store again: requests keep flowing, each bounded by one shared timeout at most.
 *
 * Degraded, a node loads into free slots but never unloads: it cannot see other nodes'
 * requests, and an adapter in flight must never be unloaded. Leases taken locally are
 * re-taken in the shared store on recovery, and releases that failed are replayed.
 */
export class FailoverFleetStore implements FleetStore {
  readonly local = new MemoryFleetStore();
  /** Since when this node decides alone, or null while the shared store answers. */
  private degradedSince: number | null = null;
  /** When the shared store last came back to this node (this node's clock); null if never lost. */
  private backSince: number | null = null;
  /** Record changes into this store whose old runtime still decides (`receiving`): no unload meanwhile. */
  private recordChanges = 0;
  private lastLog = 0;
  /** Cancels the next probe while degraded. */
  private cancelProbe: (() => void) | null = null;
  /**
   * Leases this node holds, and where: released in the store that took them. `uncertain`: a
   * local lease whose shared acquire failed without an answer, so it may have run in Redis.
   */
  private readonly mine = new Map<string, { lease: Lease; shared: boolean; uncertain?: boolean }>();
  /**
   * Leases whose shared acquire or release is under way (not in `mine`, or out of it already):
   * a prune sent meanwhile must keep them, or it could drop one just taken.
   */
  private readonly acquiring = new Set<string>();
  private readonly releasing = new Set<string>();
  /**
   * Replaced on the same shared state (same node id): the successor prunes for both, this one
   * never (it would drop the successor's leases, which it does not know).
   */
  superseded = false;
  private closed = false;
  /** Shared releases that failed: replayed when the shared store returns. */
  private readonly pendingReleases = new Set<string>();
  /** Cold loads granted from this node's share while degraded, merged into the shared budget on recovery. */
  private readonly localSpends = new Map<string, { count: number; windowMs: number }>();
  /**
   * When this node's cold loads were granted, per budget key, for the last window: re-published
   * when the shared state is found emptied, so FLUSHALL or a restart without persistence does
   * not hand out a fresh budget within the same window.
   */
  private readonly recentSpends = new Map<string, { at: Spend[]; windowMs: number }>();
  /** The fleet's size as the store this one adopted last saw it, until this one's link answers. */
  private inheritedNodes: number | null = null;
  /** Re-registering and re-taking leases after the shared state was emptied, while under way. */
  private reclaiming: Promise<void> | null = null;
  /**
   * The store this one replaces on the same shared state (a runtime retired for a changed
   * `timeout_ms`, say) until `adopt` takes what is left of its records: it still holds the
   * leases taken through it (one node id), which pruning here must keep.
   */
  predecessor: FailoverFleetStore | null = null;

  constructor(
    readonly shared: SharedStore,
    private readonly log: Logger,
    private readonly options: FailoverOptions = { probeMs: 1000, logEveryMs: 30_000 },
    private readonly clock: Clock = systemClock,
  ) {
    // An emptied Redis seen from a heartbeat: a node with requests running but no decision to
    // make must re-take its leases too, or another node may unload under them.
    shared.onStateLost = () => {
      if (this.degradedSince === null) this.reclaim().catch((err: Error) => this.degrade(err));
    };
  }

  get onRemoteChange(): (() => void) | null {
    return this.shared.onRemoteChange ?? null;
  }

  set onRemoteChange(fn: (() => void) | null) {
    this.shared.onRemoteChange = fn;
  }

  mode(): StoreMode {
    return this.degradedSince === null ? 'redis' : 'local';
  }

  /** Runs `op` on the shared store unless degraded; on failure degrades and runs `fallback`. */
  private async decide<T>(op: (s: SharedStore) => Promise<T>, fallback: () => Promise<T>): Promise<T> {
    if (this.degradedSince !== null) return fallback();
    try {
      return await op(this.shared);
    } catch (err) {
      this.degrade(err as Error);
      return fallback();
    }
  }

  /** Observations go to both: the local store must be warm when it has to decide. */
  private async observe(op: (s: FleetStore) => Promise<void>): Promise<void> {
    await op(this.local);
    if (this.degradedSince !== null) return;
    try {
      await op(this.shared);
    } catch (err) {
      this.degrade(err as Error);
    }
  }

  private degrade(err: Error): void {
    if (this.degradedSince !== null) return;
    this.degradedSince = this.clock.now();
    this.lastLog = this.degradedSince;
    // Closed (a retired runtime's store, called by a decision that ended late): it answers from
    // local state, and no probe runs, or it would probe a closed link for the rest of the process.
    if (this.closed) return;
    this.log.error(
      `shared fleet state unavailable (${err.message}): this node decides from its own state, loads only into free slots and evicts nothing until it returns`,
    );
    this.scheduleProbe();
  }

  /** The next probe, one `probeMs` after the last one ended, while degraded. */
  private scheduleProbe(): void {
    this.cancelProbe = this.clock.after(this.options.probeMs, () => {
      void this.probe().finally(() => {
        if (this.degradedSince !== null && this.cancelProbe !== null) this.scheduleProbe();
      });
    });
  }

  private probing = false;

  private async probe(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      await this.shared.ping();
      await this.recover();
    } catch (err) {
      const now = this.clock.now();
      if (now - this.lastLog >= this.options.logEveryMs) {
        this.lastLog = now;
        this.log.warn(
          `shared fleet state still unavailable after ${Math.round((now - this.degradedSince!) / 1000)} s: ${(err as Error).message}`,
        );
      }
    } finally {
      this.probing = false;
    }
  }

  /**
   * Hands this node's leases and missed releases to the shared store, then decides there again.
   * Every open lease is taken again, not only local ones: Redis may have come back empty, and
   * taking a lease it still holds changes nothing (same id).
   */
  private async recover(): Promise<void> {
    try {
      // First the replicas (Redis may have come back empty): leases count only against known ones.
      for (const spec of await this.local.replicaSpecs()) await this.shared.upsertReplica(spec);
      await this.replayReleases();
      await this.restoreLeases(this.shared, false);
      // The server that answers may have restarted from a snapshot older than some releases.
      // Before the loop below, never after it: a release or an admission during any await after
      // its last check would stay local (the sentinel failover test left two leases open so).
      await this.pruneShared();
      // Requests admitted and ended during the walk were decided locally (still degraded):
      // take those leases, replay those releases and merge those budget spends too, until none
      // is left. No await separates the last check from sharing again.
      let passes = 0;
      while (this.pendingReleases.size > 0 || this.localSpends.size > 0 || this.holdsLocalLeases()) {
        if (++passes > RECOVERY_PASSES) return; // admissions outran the walk: the next probe goes on
        await this.replayReleases();
        await this.restoreLeases(this.shared, true);
        await this.mergeBudgets();
      }
    } catch {
      return; // Not back yet: the next probe tries again.
    }
    this.cancelProbe?.();
    this.cancelProbe = null;
    const s = Math.round((this.clock.now() - this.degradedSince!) / 1000);
    this.degradedSince = null;
    this.backSince = this.clock.now();
    this.log.info(`shared fleet state is back after ${s} s: decisions are shared again`);
    this.shared.onRemoteChange?.();
  }

  private async replayReleases(): Promise<void> {
    for (const id of [...this.pendingReleases]) {
      await this.shared.release(id, this.clock.now());
      this.pendingReleases.delete(id);
    }
  }

  private holdsLocalLeases(): boolean {
    for (const m of this.mine.values()) if (!m.shared) return true;
    return false;
  }

  /** Cold loads granted here while deciding alone, to merge into the shared budget. */
  private addLocalSpends(key: string, count: number, windowMs: number): void {
    const had = this.localSpends.get(key);
    this.localSpends.set(key, { count: count + (had?.count ?? 0), windowMs });
  }

  /** Spends of this window, kept to re-publish should the state be found emptied. */
  private addRecentSpends(key: string, at: Spend[], windowMs: number): void {
    const had = this.recentSpends.get(key);
    this.recentSpends.set(key, { at: [...(had?.at ?? []), ...at], windowMs });
  }

  /** Adds the cold loads granted locally during the outage to the shared budgets' windows. */
  private async mergeBudgets(): Promise<void> {
    for (const [key, spent] of [...this.localSpends]) {
      this.localSpends.delete(key);
      try {
        await this.shared.addToBudget?.(key, spent.count, spent.windowMs);
      } catch (err) {
        this.addLocalSpends(key, spent.count, spent.windowMs);
        throw err;
      }
    }
  }

  /**
   * Registers this node's replicas and takes its open leases again, once, however many callers
   * found the shared state emptied (FLUSHALL, or a restart without persistence).
   */
  private reclaim(): Promise<void> {
    this.reclaiming ??= (async () => {
      for (const spec of await this.local.replicaSpecs()) await this.shared.upsertReplica(spec);
      await this.restoreLeases(this.shared, false);
      await this.pruneShared();
      await this.republishSpends();
    })().finally(() => (this.reclaiming = null));
    return this.reclaiming;
  }

  /** Every lease id this node may hold in the shared state: its own and an unadopted predecessor's. */
  private held(): string[] {
    const ids = [...this.mine.keys(), ...this.acquiring, ...this.releasing];
    return this.predecessor ? [...ids, ...this.predecessor.held()] : ids;
  }

  /**
   * Drops this node's leases that the shared state holds and this node does not: a release Redis
   * acknowledged and then lost in a restart from a snapshot (chaos run seed 1: four leases open
   * until lease_max_age_ms). This node's own list is the truth about its leases.
   */
  private async pruneShared(): Promise<void> {
    if (this.superseded) return;
    const n = (await this.shared.prune?.(() => this.held())) ?? 0;
    if (n > 0) this.log.warn(`shared fleet state held ${n} lease(s) of this node it had released: dropped`);
  }

  /**
   * This store's runtime moved to other shared state (a `redis` record change) and handed its
   * leases over: replays the releases waiting here (the hand-over's own among them, while Redis
   * was unreachable) and drops any lease of this node still there, then closes. Retried every
   * probe while Redis is unreachable, for at most `maxMs` (after lease_max_age_ms they expire
   * by age anyway); a retired store never decides again, so nothing else waits on this.
   */
  async leave(maxMs: number): Promise<void> {
    this.cancelProbe?.();
    this.cancelProbe = null;
    // Nothing here waits for room any more: only the command link stays, for the replay.
    this.shared.unsubscribe?.();
    const end = this.clock.now() + maxMs;
    while (!this.closed) {
      try {
        await this.shared.ping();
        await this.replayReleases();
        await this.shared.prune?.(() => this.held(), true);
        break;
      } catch (err) {
        if (this.clock.now() >= end) {
          this.log.warn(
            `left shared fleet state unreachable (${(err as Error).message}): its leases of this node expire by age`,
          );
          break;
        }
        await sleep(this.clock, this.options.probeMs);
      }
    }
    await this.close();
  }

  /**
   * Takes over what `pred` (a runtime on other shared state: another database, prefix or server)
   * spent this window and adds it to this state's budgets: the operator's change does not hand
   * the fleet a fresh budget. Each node carries its own, so the new state's sum is the fleet's.
   */
  async carrySpends(pred: FailoverFleetStore): Promise<void> {
    const now = this.clock.now();
    for (const [key, r] of pred.recentSpends) {
      const at = r.at.filter((s) => now - s.t < r.windowMs).map((s) => ({ t: s.t, epoch: null }));
      if (at.length === 0) continue;
      this.addRecentSpends(key, at, r.windowMs);
    }
    pred.recentSpends.clear();
    if (this.degradedSince === null) await this.republishSpends().catch((err: Error) => this.degrade(err));
  }

  /** Remembers a cold load granted to this node (shared or local) for the rest of its window. */
  private rememberSpend(key: string, windowMs: number, at: number): void {
    const r = this.recentSpends.get(key) ?? { at: [], windowMs };
    r.windowMs = windowMs;
    r.at = r.at.filter((s) => at - s.t < windowMs);
    // Counted in the state as last seen (a local one: merged there on recovery).
    r.at.push({ t: at, epoch: this.shared.currentEpoch ?? null });
    // Re-inserted: the least recently spent keys go first past the bound.
    this.recentSpends.delete(key);
    this.recentSpends.set(key, r);
    if (this.recentSpends.size > RECENT_SPEND_KEYS)
      this.recentSpends.delete(this.recentSpends.keys().next().value!);
  }

  /**
   * Adds this node's cold loads of the last window that the shared state does not count (made
   * under another epoch: before it was emptied, or on other state) to its budgets. Each node
   * adds only its own, so the fleet's sum is what the lost window held; a window this opens
   * starts now and may count them a little longer than the lost one would have (stricter).
   */
  private async republishSpends(): Promise<void> {
    const now = this.clock.now();
    const epoch = this.shared.currentEpoch ?? null;
    for (const [key, r] of [...this.recentSpends]) {
      r.at = r.at.filter((s) => now - s.t < r.windowMs);
      if (r.at.length === 0) {
        this.recentSpends.delete(key);
        continue;
      }
      const missing = r.at.filter((s) => s.epoch === null || s.epoch !== epoch);
      if (missing.length === 0) continue;
      await this.shared.addToBudget?.(key, missing.length, r.windowMs);
      for (const s of missing) s.epoch = epoch;
    }
  }

  /**
   * Takes this node's open leases in `shared` (again); local ones move there. `onlyLocal`: those
   * not counted there yet (admitted while degraded).
   */
  private async restoreLeases(shared: SharedStore, onlyLocal: boolean): Promise<void> {
    for (const [id, m] of [...this.mine]) {
      if (this.mine.get(id) !== m) continue; // ended meanwhile
      if (onlyLocal && m.shared) continue;
      await shared.acquire(m.lease);
      // Its request may have ended while the shared copy was being taken.
      if (this.mine.get(id) !== m) {
        await shared.release(id, this.clock.now());
        continue;
      }
      if (m.shared) continue;
      m.shared = true;
      await this.local.release(id, this.clock.now());
    }
  }

  /**
   * A `redis` record change from other state made this store the node's: until the replaced
   * runtime's decisions under way end (`decided`), and for the hold-off after, this node unloads
   * nothing. Kong pushes a configuration to its nodes in turn, so peers may still decide on the
   * old state, where this node cannot see their requests. The 30-minute fault run broke (i) so:
   * 290 ms after a change to another database, an unload under a request a peer still on the old
   * state had just sent (vLLM had it waiting).
   */
  async receiving(decided: Promise<void>): Promise<void> {
    this.recordChanges++;
    try {
      await decided;
    } finally {
      this.recordChanges--;
      this.backSince = this.clock.now();
    }
  }

  sharedTime(): Promise<number | undefined> {
    return this.decide(
      async (s) => s.sharedTime?.(),
      async () => undefined,
    );
  }

  upsertReplica(spec: ReplicaSpec): Promise<void> {
    return this.observe((s) => s.upsertReplica(spec));
  }

  replicaSpecs(): Promise<ReplicaSpec[]> {
    return this.decide(
      (s) => s.replicaSpecs(),
      () => this.local.replicaSpecs(),
    );
  }

  views(urls: readonly string[], adapter?: AdapterRef, withResidents?: boolean): Promise<ReplicaView[]> {
    return this.decide(
      async (s) => {
        const views = await s.views(urls, adapter, withResidents);
        // The same reply says whether Redis was emptied (restarted empty, or flushed), even when
        // another node registered the replicas again first (the epoch changed).
        const lost = this.shared.takeStateLost?.() ?? false;
        if (views.length === urls.length && !lost) return views;
        // Register them again from here, with this node's open leases (a lease it lost would
        // let another node unload under it).
        await this.reclaim();
        return views.length === urls.length ? views : s.views(urls, adapter, withResidents);
      },
      () => this.local.views(urls, adapter, withResidents),
    );
  }

  applySnapshot(url: string, snapshot: ReplicaSnapshot): Promise<void> {
    return this.observe((s) => s.applySnapshot(url, snapshot));
  }

  reportOutcome(url: string, ok: boolean, at: number): Promise<void> {
    return this.observe((s) => s.reportOutcome(url, ok, at));
  }

  residents(url: string): Promise<ResidentAdapter[]> {
    return this.decide(
      (s) => s.residents(url),
      () => this.local.residents(url),
    );
  }

  // Fences from the local store are negative, so a change ends in the store that began it.
  beginLoad(url: string, adapter: string, at: number, limit: number, ttlMs: number): Promise<Fence | null> {
    return this.decide(
      (s) => s.beginLoad(url, adapter, at, limit, ttlMs),
      async () => negate(await this.local.beginLoad(url, adapter, at, limit)),
    );
  }

  async finishLoad(url: string, adapter: string, fence: Fence, ok: boolean, at: number): Promise<boolean> {
    if (fence < 0) return this.local.finishLoad(url, adapter, -fence, ok, at);
    // Shared gone meanwhile: its lock expires there, and polls tell the local store.
    return this.decide(
      (s) => s.finishLoad(url, adapter, fence, ok, at),
      async () => false,
    );
  }

  beginUnload(...args: Parameters<FleetStore['beginUnload']>): Promise<Fence | null> {
    // Peers hit by the same outage decide alone until their own probe finds the shared store
    // (up to a probe interval after this node did, plus the probe itself): they route to what
    // their polls saw loaded and cannot see this unload. The fault run broke (i) that way: a node
    // back 70 ms unloaded an adapter a peer still deciding alone had just sent a request to.
    const back = this.backSince;
    if (this.recordChanges > 0) return Promise.resolve(null);
    if (back !== null && this.clock.now() - back < UNLOAD_HOLD_OFF_PROBES * this.options.probeMs)
      return Promise.resolve(null);
    return this.decide(
      (s) => s.beginUnload(...args),
      async () => null,
    );
  }

  finishUnload(url: string, adapter: string, fence: Fence, ok: boolean, at: number): Promise<boolean> {
    return this.decide(
      (s) => s.finishUnload(url, adapter, fence, ok, at),
      async () => false,
    );
  }

  holds(url: string, adapter: string, fence: Fence): Promise<boolean> {
    if (fence < 0) return this.local.holds(url, adapter, -fence);
    return this.decide(
      (s) => s.holds(url, adapter, fence),
      async () => false,
    );
  }

  forget(url: string, adapter: string, at: number): Promise<void> {
    return this.observe((s) => s.forget(url, adapter, at));
  }

  touch(url: string, adapter: string, at: number): Promise<void> {
    return this.decide(
      (s) => s.touch(url, adapter, at),
      () => this.local.touch(url, adapter, at),
    );
  }

  claimPlacement(adapter: string, url: string, seen: string | undefined, at: number, ttlMs: number) {
    return this.decide(
      (s) => s.claimPlacement(adapter, url, seen, at, ttlMs),
      () => this.local.claimPlacement(adapter, url, seen, at, ttlMs),
    );
  }

  releasePlacement(adapter: string, url: string): Promise<void> {
    return this.observe((s) => s.releasePlacement(adapter, url));
  }

  async acquire(lease: Lease): Promise<ResidencyState | undefined> {
    let shared = true;
    const tried = this.degradedSince === null;
    this.acquiring.add(lease.id);
    try {
      const state = await this.decide(
        (s) => s.acquire(lease),
        () => {
          shared = false;
          return this.local.acquire(lease);
        },
      );
      // The shared call failed (a timeout, say): Redis may still run it once it answers again.
      this.mine.set(lease.id, { lease: { ...lease }, shared, uncertain: !shared && tried });
      return state;
    } finally {
      this.acquiring.delete(lease.id);
    }
  }

  async release(leaseId: string, at: number, status?: number): Promise<Released | undefined> {
    const m = this.mine.get(leaseId);
    this.mine.delete(leaseId);
    if (m && !m.shared) {
      // Released in Redis too when it returns, in case the timed-out acquire ran there.
      if (m.uncertain) this.pendingReleases.add(leaseId);
      return this.local.release(leaseId, at, status);
    }
    // What the upstream said is an observation: the local store learns it too.
    this.releasing.add(leaseId);
    try {
      if (m && status !== undefined)
        await this.local.observeOutcome(m.lease.url, m.lease.adapter, status, at);
      return await this.decide(
        (s) => s.release(leaseId, at, status),
        async () => {
          // Its count stays in the shared store until it returns: replay the release then.
          if (m) this.pendingReleases.add(leaseId);
          return m ? { ...m.lease, adapterIdle: true } : undefined;
        },
      );
    } finally {
      this.releasing.delete(leaseId);
    }
  }

  async expireLeases(now: number, maxAgeMs: number): Promise<Lease[]> {
    const local = await this.local.expireLeases(now, maxAgeMs);
    const shared = await this.decide(
      (s) => s.expireLeases(now, maxAgeMs),
      async () => [],
    );
    // Forgotten here only once a store reclaimed it (a lease the replica reports running is
    // renewed and may outlive lease_max_age_ms), or after a day whatever happened.
    for (const l of local) if (this.mine.get(l.id)?.shared === false) this.mine.delete(l.id);
    for (const l of shared) if (this.mine.get(l.id)?.shared) this.mine.delete(l.id);
    for (const [id, m] of this.mine) if (now - m.lease.at >= OPEN_LEASE_MEMORY_MS) this.mine.delete(id);
    return [...local, ...shared];
  }

  /**
   * Replaces `pred` on the same shared state (one node id): `pred` keeps its leases until they
   * are given back, and prunes nothing from here on; this store prunes for both, at once (`pred`
   * may have seen the server restart from an old snapshot, this store's connection never did).
   */
  async succeed(pred: FailoverFleetStore): Promise<void> {
    this.predecessor = pred;
    pred.superseded = true;
    if (this.degradedSince !== null) return; // the next probe's recovery prunes
    await this.pruneShared().catch((err: Error) => this.degrade(err));
  }

  /**
   * Takes what is left of the records of `pred`, the store of a runtime replaced on the same
   * shared state (only timeouts changed), once that runtime has drained: its releases waiting to
   * be replayed and its budget spends. No lease moves: each was given back through `pred`
   * (LeaseHandle) or aged out, and pruning here stops keeping `pred`'s.
   */
  async adopt(pred: FailoverFleetStore): Promise<void> {
    for (const id of pred.pendingReleases) this.pendingReleases.add(id);
    for (const [key, spent] of pred.localSpends) this.addLocalSpends(key, spent.count, spent.windowMs);
    // What it spent this window, to re-publish should the state be found emptied later.
    for (const [key, r] of pred.recentSpends) this.addRecentSpends(key, r.at, r.windowMs);
    // The same node on the same state: the fleet it saw is this one's until this link answers.
    this.inheritedNodes ??= pred.fleetNodes();
    pred.pendingReleases.clear();
    pred.localSpends.clear();
    pred.recentSpends.clear();
    if (this.predecessor === pred) this.predecessor = null;
    if (this.degradedSince !== null) return; // the next probe's recovery replays them
    try {
      await this.replayReleases();
      await this.mergeBudgets();
      await this.pruneShared();
    } catch (err) {
      this.degrade(err as Error);
    }
  }

  inFlightTotal(): Promise<number> {
    return this.decide(
      (s) => s.inFlightTotal(),
      () => this.local.inFlightTotal(),
    );
  }

  /**
   * Degraded, a node spends only its share of the budget (the budget over the nodes last seen
   * sharing it, rounded down) less what it was granted in the last window, shared or alone, and
   * counts what it grants, merged into the shared window on recovery: N nodes cut off together
   * get at most one more budget between them, not N, and a node that spent its share before the
   * outage gets nothing more. A process that never heard from the shared state (started during
   * the outage) knows neither the fleet's size nor what it spent before a restart: it grants
   * nothing until the state answers.
   */
  spendBudget(key: string, limit: number, windowMs: number, at: number): Promise<number> {
    return this.decide(
      async (s) => {
        const waitMs = await s.spendBudget(key, limit, windowMs, at);
        if (waitMs === 0) this.rememberSpend(key, windowMs, this.clock.now());
        return waitMs;
      },
      async () => {
        const now = this.clock.now();
        const nodes = this.fleetNodes();
        const share = nodes === null ? 0 : Math.floor(limit / Math.max(1, nodes));
        const spent = this.spentInWindow(key, windowMs, now);
        // Refused: retry once enough of its grants left the window, or (no share) once a probe
        // may have found the shared state again.
        if (spent.length >= share)
          return share > 0 ? spent[spent.length - share]! + windowMs - now : this.options.probeMs;
        this.addLocalSpends(key, 1, windowMs);
        this.rememberSpend(key, windowMs, now);
        return 0;
      },
    );
  }

  /**
   * Nodes sharing the state as last seen by this node: by its own link, else by the store it
   * replaces on the same state (same node, a changed `timeout` say); null if never seen.
   */
  private fleetNodes(): number | null {
    return this.shared.liveNodes ?? this.predecessor?.fleetNodes() ?? this.inheritedNodes;
  }

  /** When this node (and a predecessor on the same state not adopted yet) spent from `key` in the last window, oldest first. */
  private spentInWindow(key: string, windowMs: number, now: number): number[] {
    const at = [
      ...(this.recentSpends.get(key)?.at ?? []),
      ...(this.predecessor?.recentSpends.get(key)?.at ?? []),
    ];
    return at
      .map((s) => s.t)
      .filter((t) => now - t < windowMs)
      .sort((a, b) => a - b);
  }

  pushEvent(event: FleetEvent): Promise<void> {
    return this.observe((s) => s.pushEvent(event));
  }

  events(limit: number): Promise<FleetEvent[]> {
    return this.decide(
      (s) => s.events(limit),
      () => this.local.events(limit),
    );
  }

  dump(): Promise<FleetDump> {
    return this.decide(
      (s) => s.dump(),
      () => this.local.dump(),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cancelProbe?.();
    this.cancelProbe = null;
    await this.shared.close?.();
  }
}

function negate(fence: Fence | null): Fence | null {
  return fence === null ? null : -fence;
}
