/**
 * Shared fleet state with a local fallback, and what this node owes the shared state after
 * deciding alone: its leases re-taken and its missed releases replayed on recovery or once the
 * state is found emptied, its cold loads merged into the shared budget, and the hand-over between
 * the stores of a runtime and its successor (`succeed`, `adopt`, `carrySpends`, `leave`).
 * Which store decides each operation lives in degradable-store.ts, the outage itself in
 * outage.ts, the lease list in held-leases.ts, the budget share in outage-budget.ts.
 */
import { sleep, systemClock, type Clock } from '../../clock';
import type { Logger } from '../../log';
import { Signal } from '../../signal';
import type { FleetStore } from '../store';
import type {
  AdapterRef,
  Fence,
  Lease,
  Released,
  ReplicaSnapshot,
  ReplicaSpec,
  ReplicaView,
  ResidencyState,
} from '../types';
import { DegradableFleetStore } from './degradable-store';
import { EndedLocks } from './ended-locks';
import { HeldLeases, retake } from './held-leases';
import { FAILOVER_DEFAULTS, type FailoverOptions } from './outage';
import { OutageBudget } from './outage-budget';
import { SeenDown } from './seen-down';
import type { SharedStore } from './shared-store';

/** Passes of a recovery re-taking leases admitted during the previous pass before it gives up until the next probe. */
const RECOVERY_PASSES = 100;
/** Passes of a registration the shared state was emptied during before it fails (`registerReplicas`). */
const REGISTRATION_PASSES = 3;

/**
 * While the shared store answers, it decides; when a shared call fails or times out, this node
 * decides from its local state until a probe finds the shared store again: requests keep
 * flowing, each bounded by one shared timeout at most (and one more when it waits for a
 * recovery's last pass: `Outage.recovering`). Leases taken locally are re-taken in the
 * shared store on recovery, and releases that failed are replayed.
 */
export class FailoverFleetStore extends DegradableFleetStore implements FleetStore {
  private readonly leases: HeldLeases;
  private readonly budget: OutageBudget;
  /** Locks this node ended whose end a server that missed the last writes may lack. */
  private readonly endedLocks: EndedLocks;
  /** The replicas this node saw down while it decided alone, owed to the shared store on recovery. */
  private readonly seenDown = new SeenDown();
  /**
   * Replaced on the same shared state (same node id): the successor prunes for both, this one
   * never (it would drop the successor's leases, which it does not know).
   */
  superseded = false;
  /**
   * The store of the runtime that replaced this one on other state: each cold load granted here
   * from then on counts there too, before its caller has it (`carrySpends`).
   */
  private spendsGoTo: FailoverFleetStore | null = null;
  /** Spends carried from a predecessor on other state, until added here: grants wait for them. */
  private carrying: Promise<void> = Promise.resolve();
  /** Re-registering and re-taking leases after the shared state was emptied, while under way. */
  private reclaiming: Promise<void> | null = null;
  /** Reclaims begun so far: an acquire under way across one is taken again after it (`takeAgain`). */
  private reclaims = 0;
  /**
   * The shared state was found emptied again after the reclaim or recovery under way began
   * registering (the registration's start resets this): its leases may have gone to the new,
   * empty state, counted nowhere, so it runs again (a recovery: at the next probe).
   */
  private emptiedSinceRegistration = false;
  /**
   * The store this one replaces on the same shared state (a runtime retired for a changed
   * `timeout_ms`, say) until `adopt` takes what is left of its records: it still holds the
   * leases taken through it (one node id), which pruning here must keep.
   */
  predecessor: FailoverFleetStore | null = null;
  /** Told when `adopt` has taken a predecessor's records: `leave` waits for the last. */
  private readonly adopted = new Signal();

  constructor(
    shared: SharedStore,
    log: Logger,
    options: FailoverOptions = FAILOVER_DEFAULTS,
    clock: Clock = systemClock,
  ) {
    super(shared, log, options, clock);
    this.leases = new HeldLeases(this.local, clock);
    this.endedLocks = new EndedLocks(clock);
    this.budget = new OutageBudget(shared, clock, () => this.predecessor?.budget ?? null);
    // An emptied Redis seen from a heartbeat: a node with requests running but no decision to
    // make must re-take its leases too, or another node may unload under them.
    shared.onStateLost = () => void this.reclaimShared();
  }

  /**
   * Hands this node's leases and missed releases to the shared store, after a probe found it
   * answering; true once all are there (decisions are shared again). Every open lease is taken
   * again, not only local ones: Redis may have come back empty, and taking a lease it still
   * holds changes nothing (same id).
   */
  protected async recover(): Promise<boolean> {
    try {
      // First the replicas (Redis may have come back empty): leases count only against known ones.
      await this.registerReplicas(true);
      await this.leases.replayReleases(this.shared);
      await this.restoreHeld();
      await this.endedLocks.replay(this.shared);
      // The server that answers may have restarted from a snapshot older than some releases.
      // Before the loop below, never after it: a release or an admission during any await after
      // its last check would stay local (the sentinel failover test left two leases open so).
      await this.pruneShared();
      // Spends carried here from other state while this store decided alone (a record change
      // during an outage): counted here only now. Dated by the epoch the registration read; none
      // read (no replica), left for a later one, or each recovery would add them again.
      if ((this.shared.currentEpoch ?? null) !== null) await this.budget.republish();
      // Requests admitted and ended during the walk were decided locally (still degraded):
      // take those leases, replay those releases and merge those budget spends too, until none
      // is left. No await separates the last check from sharing again. Decisions from now on wait
      // for the end of this recovery (`Outage.recovering`), so the passes run out; a local lease
      // ended meanwhile is released locally still (in the store that took it). Lock ends adopted
      // from a predecessor after the replay above are sent too: left, they waited for the next
      // outage, and the adapter read `loading` there until the lock's TTL
      // (test/core/failover-review.test.ts, "adopted during its successor's recovery").
      this.outage.recovering();
      let passes = 0;
      while (
        this.leases.pendingReleases.size > 0 ||
        this.budget.unmerged ||
        this.leases.holdsLocal() ||
        this.endedLocks.unsent
      ) {
        if (++passes > RECOVERY_PASSES) return false; // admissions outran the walk: the next probe goes on
        await this.leases.replayReleases(this.shared);
        await this.leases.restore(this.shared, true);
        await this.budget.merge();
        if (this.endedLocks.unsent) await this.endedLocks.replay(this.shared);
      }
      // Emptied again after the registration above (a heartbeat told it, `reclaimShared`): the
      // leases re-taken since may count nowhere, and that heartbeat was this node's only word of
      // it (test/core/failover-review.test.ts, suspicion 2). The next probe registers again.
      if (this.emptiedSinceRegistration) return false;
    } catch {
      return false; // Not back yet: the next probe tries again.
    }
    return true;
  }

  /**
   * Registers this node's replicas and takes its open leases again, once, however many callers
   * found the shared state emptied (FLUSHALL, or a restart without persistence).
   */
  private reclaim(): Promise<void> {
    this.outage.stateEmptied();
    if (this.reclaiming) {
      // Told during a reclaim: once its registration is done, this is another emptying.
      this.emptiedSinceRegistration = true;
      return this.reclaiming;
    }
    this.reclaims++;
    this.reclaiming = (async () => {
      // Again while told of an emptying after the registration: before, a second emptying told by
      // the heartbeat during the retake was taken as this one, and an idle node's leases stayed
      // counted nowhere (the retake had gone to the empty state).
      do {
        // The downs only: this node shared the state until it was emptied, which left no down to undo.
        await this.registerReplicas(false);
        await this.restoreHeld();
        await this.endedLocks.replay(this.shared);
        await this.pruneShared();
        await this.budget.republish();
      } while (this.emptiedSinceRegistration);
    })().finally(() => (this.reclaiming = null));
    return this.reclaiming;
  }

  /**
   * Takes every open lease of this node again: its own, and those of the predecessors on this
   * state still draining (one node id). A retired runtime decides nothing more, so it never finds
   * the state emptied itself: its requests on their way were counted nowhere and another node
   * unloaded under them (dst seed 311722: lost in a lossy switch, then taken again by nobody).
   */
  private async restoreHeld(): Promise<void> {
    await this.leases.restore(this.shared, false);
    for (let p = this.predecessor; p; p = p.predecessor) await p.leases.restore(this.shared, false);
  }

  /**
   * `views` read on an emptied shared state before this node's reclaim handed on the replicas it
   * saw down (`registerReplicas`): each the state knows nothing of yet (`unknown`: registered again,
   * by another node first, and no poll or verdict since) reads down as this node's own store holds
   * it, as it reads there once that push lands. Read so, every replica `unknown`, a held request
   * went to one this node had polled down 0.9 s before (the simulation's seed 542328).
   */
  private withOwnDowns(views: ReplicaView[]): ReplicaView[] {
    const down = new Set(this.local.seenDown(this.clock.now()).map((d) => d.url));
    for (const v of views) if (v.health === 'unknown' && down.has(v.url)) v.health = 'down';
    return views;
  }

  /** The reclaims an acquire begun now may have missed: those begun from now, and one under way. */
  private reclaimsMissable(): number {
    return this.reclaiming ? this.reclaims - 1 : this.reclaims;
  }

  /**
   * Takes lease `id` again once the reclaim under way ends, if one ran during its acquire: the
   * acquire may have reached the emptied state before the replicas were registered again (counted
   * nowhere) and its reply come after the restore read the leases held, so that nobody took it
   * again and a trim unloaded under its request (dst seed 609813). Counted already, it changes nothing.
   * Called only when a reclaim began since (`reclaims` moved past `since`): the callers check, so
   * that the request path awaits nothing otherwise.
   */
  private async takeAgain(id: string): Promise<void> {
    await this.reclaiming?.catch(() => undefined);
    const m = this.leases.mine.get(id);
    if (!m?.shared || this.outage.degraded) return;
    await retake(this.shared, [m.lease]).catch((err: Error) => this.degrade(err));
  }

  /**
   * Registers this node's replicas in the shared store, with those it has seen down: a poll made
   * while it decided alone reached its local store only, and the shared one would still say up as
   * last polled before the outage, sending a request to a replica this node saw down (dst seeds
   * 1025140, 1039269). A poll the shared store applied that began later (another node's) wins.
   * `ups`: after deciding alone, those it has seen up too (`SeenDown.push`).
   */
  private async registerReplicas(ups: boolean): Promise<void> {
    // Reset before the writes, not after: a heartbeat reply handled between the last write's reply
    // and a reset after it would be an emptying after the registration, and lost.
    this.emptiedSinceRegistration = false;
    const specs = await this.local.replicaSpecs();
    // Again while the epoch moved between two of its writes: emptied again mid-way, the state the
    // rest went to lacks the replicas written before, and the takeStateLost below swallowed that
    // emptying, so no heartbeat told it either. A lease then stayed counted nowhere
    // (test/core/failover-suspects.test.ts, suspicion 1).
    // A few passes at most: a state emptied in every pass kept the loop going with no end. Past
    // them the registration fails as a write does: the caller degrades, the next probe registers.
    for (let passes = 1; ; passes++) {
      const epochs = new Set<string | null>();
      for (const spec of specs) {
        await this.shared.upsertReplica(spec);
        epochs.add(this.shared.currentEpoch ?? null);
      }
      if (epochs.size <= 1) break;
      if (passes >= REGISTRATION_PASSES)
        throw new Error(
          `shared fleet state emptied during each of ${passes} registrations of this node's replicas`,
        );
    }
    // An emptied state noted so far (this registration reads the new epoch) is taken back by the
    // caller, recovery or `reclaim`, whose hold-off runs from now: left noted, the next views
    // call took it back again and held unloads off anew (the simulation's seed 264535).
    this.shared.takeStateLost?.();
    await this.seenDown.push(this.local, this.shared, this.clock, ups);
  }

  /**
   * A registration of this node's own may be the first after the shared state was emptied (a
   * router configuration registered then): it begins the new state and notes its epoch, so no
   * heartbeat finds the state changed, and an idle node never took its leases back (a peer was
   * granted the unload under one once the grace was over). Taken back from here, as a heartbeat
   * would.
   */
  override async upsertReplica(spec: ReplicaSpec): Promise<void> {
    await super.upsertReplica(spec);
    if (this.shared.takeStateLost?.()) await this.reclaimShared();
  }

  /**
   * Also while a predecessor on this state (a runtime replaced for a changed `timeout_ms`, say)
   * decides alone, and for its hold-off after: the leases it admitted alone are in no shared
   * count until its probe's recovery takes them there, and this store would unload under them
   * (test/core/failover-suspects.test.ts, suspicion 2).
   */
  override unloadsHeldOff(): boolean {
    if (super.unloadsHeldOff()) return true;
    for (let p = this.predecessor; p; p = p.predecessor)
      if (!p.outage.closed && (p.outage.degraded || p.outage.unloadHeldOff())) return true;
    return false;
  }

  /**
   * Takes this node's state back into an emptied Redis, unless it decides alone: the probe's
   * recovery does then, noted so, should its registration have gone to the state emptied.
   */
  private async reclaimShared(): Promise<void> {
    if (this.outage.degraded) this.emptiedSinceRegistration = true;
    else await this.reclaim().catch((err: Error) => this.degrade(err));
  }

  override applySnapshot(url: string, snapshot: ReplicaSnapshot): Promise<void> {
    this.seenDown.note(url, snapshot);
    return super.applySnapshot(url, snapshot);
  }

  /** Every lease id this node may hold in the shared state: its own and an unadopted predecessor's. */
  private held(): string[] {
    const ids = this.leases.ids();
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
   * This store's runtime moved to other shared state (a `redis` record change) and its last
   * lease was given back here: replays the releases waiting here (those made while Redis was
   * unreachable) and the lock ends owed there, drops any lease of this node still there, then
   * closes. The ends matter to peers not yet moved (Kong pushes a configuration to its nodes in
   * turn): an adapter read `loading` there until its lock's TTL. Retried every
   * probe while Redis is unreachable, for at most `maxMs` (after lease_max_age_ms they expire
   * by age anyway); a retired store never decides again, so nothing else waits on this.
   */
  async leave(maxMs: number): Promise<void> {
    // Nothing here waits for room any more: only the command link stays, for the replay.
    this.shared.unsubscribe?.();
    // A predecessor on this state still draining hands its releases owed here to this store when
    // it closes (`adopt`): leaving first, this store closed its link and they were never sent
    // (the simulation's seed 556526). Its probes go on meanwhile, should Redis be unreachable.
    while (this.predecessor && !this.outage.closed)
      await this.adopted.wait(this.clock, this.outage.options.probeMs);
    this.outage.stopProbing();
    const end = this.clock.now() + maxMs;
    while (!this.outage.closed) {
      try {
        await this.shared.ping();
        await this.leases.replayReleases(this.shared);
        // Its probe stopped above, so no recovery sends them (test/core/failover-leftovers.test.ts).
        await this.endedLocks.replay(this.shared);
        await this.shared.prune?.(() => this.held(), true);
        break;
      } catch (err) {
        if (this.clock.now() >= end) {
          this.log.warn(
            `left shared fleet state unreachable (${(err as Error).message}): its leases and locks of this node expire by age`,
          );
          break;
        }
        await sleep(this.clock, this.outage.options.probeMs);
      }
    }
    await this.close();
  }

  /**
   * Takes over what `pred` (a runtime on other shared state: another database, prefix or server)
   * spent this window and adds it to this state's budgets, once `registered` (the state's epoch
   * dates the spends): the operator's change does not hand the fleet a fresh budget. Each node
   * carries its own, so the new state's sum is the fleet's. From now on a grant here waits until
   * they are added, and what `pred`'s decisions still under way are granted counts here before
   * they have it.
   */
  carrySpends(pred: FailoverFleetStore, registered: Promise<void>): Promise<void> {
    pred.spendsGoTo = this;
    // Counted here at once, whether or not this state answers the registration: deciding alone,
    // this store grants only what the node left of its share (seed 102791: a registration cut off
    // by a partition left them behind, and a fresh share was granted here).
    this.budget.carry(pred.budget);
    // Never rejects: a grant waits for it, and a failure here is logged, then the budget goes on.
    this.carrying = this.carrying
      .then(async () => {
        await registered;
        await this.takeSpendsOf(pred);
      })
      .catch((err: Error) => this.log.warn(`carrying this window's cold loads failed: ${err.message}`));
    return this.carrying;
  }

  /** What `pred` spent and this store does not count yet, added here (or where this one's go now). */
  private async takeSpendsOf(pred: FailoverFleetStore): Promise<void> {
    this.budget.carry(pred.budget);
    if (this.spendsGoTo) return this.spendsGoTo.takeSpendsOf(this);
    if (!this.outage.degraded) await this.budget.republish().catch((err: Error) => this.degrade(err));
  }

  /** A `redis` record change from other state made this store the node's: see `Outage.receiving`. */
  receiving(decided: Promise<void>): Promise<void> {
    return this.outage.receiving(decided);
  }

  views(urls: readonly string[], adapter?: AdapterRef, withResidents?: boolean): Promise<ReplicaView[]> {
    return this.decide(
      async (s) => {
        const views = await s.views(urls, adapter, withResidents);
        // The same reply says whether Redis was emptied (restarted empty, or flushed), even when
        // another node registered the replicas again first (the epoch changed).
        const lost = this.shared.takeStateLost?.() ?? false;
        if (views.length === urls.length && !lost) return this.reclaiming ? this.withOwnDowns(views) : views;
        // Register them again from here, with this node's open leases (a lease it lost would
        // let another node unload under it).
        await this.reclaim();
        return views.length === urls.length
          ? this.withOwnDowns(views)
          : s.views(urls, adapter, withResidents);
      },
      () => this.local.views(urls, adapter, withResidents),
    );
  }

  async acquire(lease: Lease): Promise<ResidencyState | undefined> {
    let shared = true;
    // Whether the shared call was sent: not when degraded, unless a recovery's end was awaited.
    let tried = false;
    const since = this.reclaimsMissable();
    this.leases.acquiring.add(lease.id);
    try {
      const state = await this.decide(
        (s) => {
          tried = true;
          return s.acquire(lease);
        },
        () => {
          shared = false;
          return this.local.acquire(lease);
        },
      );
      // The shared call failed (a timeout, say): Redis may still run it once it answers again.
      this.leases.mine.set(lease.id, { lease: { ...lease }, shared, uncertain: !shared && tried });
      // No reclaim since it began (nearly always): no await on the request path.
      if (shared && this.reclaims !== since) await this.takeAgain(lease.id);
      return state;
    } finally {
      this.leases.acquiring.delete(lease.id);
    }
  }

  /**
   * `views` then `acquire` in one shared round trip. Found emptied (or the replicas unknown
   * there), the lease is given back and both are done again as `views` and `acquire` do them:
   * the state registered anew first, so that the lease counts.
   */
  async viewsAndLease(
    urls: readonly string[],
    adapter: AdapterRef | undefined,
    lease: Lease,
  ): Promise<{ views: ReplicaView[]; state: ResidencyState | undefined }> {
    let shared = true;
    let tried = false; // as in `acquire`
    const since = this.reclaimsMissable();
    this.leases.acquiring.add(lease.id);
    try {
      const r = await this.decide(
        async (s) => {
          tried = true;
          const r = s.viewsAndLease
            ? await s.viewsAndLease(urls, adapter, lease)
            : { views: await s.views(urls, adapter), state: await s.acquire(lease) };
          const lost = this.shared.takeStateLost?.() ?? false;
          if (r.views.length === urls.length && !lost)
            return this.reclaiming ? { ...r, views: this.withOwnDowns(r.views) } : r;
          await s.release(lease.id, this.clock.now());
          await this.reclaim();
          const views = await s.views(urls, adapter);
          return { views, state: await s.acquire(lease) };
        },
        () => {
          shared = false;
          return this.local.viewsAndLease(urls, adapter, lease);
        },
      );
      // The shared call failed (a timeout, say): Redis may still run it once it answers again.
      this.leases.mine.set(lease.id, { lease: { ...lease }, shared, uncertain: !shared && tried });
      if (shared && this.reclaims !== since) await this.takeAgain(lease.id);
      return r;
    } finally {
      this.leases.acquiring.delete(lease.id);
    }
  }

  async release(leaseId: string, at: number, status?: number): Promise<Released | undefined> {
    const m = this.leases.mine.get(leaseId);
    this.leases.mine.delete(leaseId);
    if (m && !m.shared) {
      // Released in Redis too when it returns, in case the timed-out acquire ran there.
      if (m.uncertain) this.leases.pendingReleases.add(leaseId);
      return this.local.release(leaseId, at, status);
    }
    // What the upstream said is an observation: the local store learns it too.
    this.leases.releasing.add(leaseId);
    try {
      if (m && status !== undefined)
        await this.local.observeOutcome(m.lease.url, m.lease.adapter, status, at);
      return await this.decide(
        (s) => s.release(leaseId, at, status),
        async () => {
          // Its count stays in the shared store until it returns: replay the release then.
          if (m) this.leases.pendingReleases.add(leaseId);
          return m ? { ...m.lease, adapterIdle: true } : undefined;
        },
      );
    } finally {
      this.leases.releasing.delete(leaseId);
    }
  }

  // Each lock's TTL and end is noted (ended-locks.ts): a server that missed the end is told again.
  override async beginLoad(...a: Parameters<FleetStore['beginLoad']>): Promise<Fence | null> {
    return this.endedLocks.begin(await super.beginLoad(...a), a[4]);
  }

  override finishLoad(...a: Parameters<FleetStore['finishLoad']>): Promise<boolean> {
    this.endedLocks.end('load', ...a);
    return super.finishLoad(...a);
  }

  override async beginUnload(...a: Parameters<FleetStore['beginUnload']>): Promise<Fence | null> {
    return this.endedLocks.begin(await super.beginUnload(...a), a[3]);
  }

  override finishUnload(...a: Parameters<FleetStore['finishUnload']>): Promise<boolean> {
    this.endedLocks.end('unload', ...a);
    return super.finishUnload(...a);
  }

  async expireLeases(now: number, maxAgeMs: number): Promise<Lease[]> {
    const local = await this.local.expireLeases(now, maxAgeMs);
    const shared = await this.decide(
      (s) => s.expireLeases(now, maxAgeMs),
      async () => [],
    );
    this.leases.forgetExpired(local, shared, now, maxAgeMs);
    return [...local, ...shared];
  }

  /**
   * Replaces `pred` on the same shared state (one node id): `pred` keeps its leases until they
   * are given back, and prunes nothing from here on; this store prunes for both, at once (`pred`
   * may have seen the server restart from an old snapshot, this store's connection never did).
   */
  async succeed(pred: FailoverFleetStore): Promise<void> {
    // Before this store registers anything: should its registration be the first after a FLUSHALL,
    // it asks the grace, as `pred` would have (before: none, and a peer not yet told unloaded under
    // a lease the FLUSHALL lost; test/core/empty-restart.test.ts).
    this.shared.inheritEpoch?.(pred.shared.currentEpoch ?? null);
    this.predecessor = pred;
    pred.superseded = true;
    pred.budget.succeededBy(this.budget);
    if (this.outage.degraded) return; // the next probe's recovery prunes
    await this.pruneShared().catch((err: Error) => this.degrade(err));
  }

  /**
   * Takes what is left of the records of `pred`, the store of a runtime replaced on the same
   * shared state (only timeouts changed), once that runtime has drained: its releases waiting to
   * be replayed, its budget spends, and the ends of load and unload locks it made alone (they were
   * dropped, and an adapter whose load failed read `loading` in Redis until its lock's TTL: the
   * simulation's seed 662665). No lease moves: each was given back through `pred`
   * (LeaseHandle) or aged out, and pruning here stops keeping `pred`'s. `pred` leaves the chain
   * of predecessors; those it replaced stay in it (their leases are still open until they drain).
   */
  async adopt(pred: FailoverFleetStore): Promise<void> {
    this.leases.adopt(pred.leases);
    this.budget.adopt(pred.budget);
    this.endedLocks.adopt(pred.endedLocks);
    if (this.predecessor === pred) this.predecessor = pred.predecessor;
    else
      for (let s = this.predecessor; s; s = s.predecessor)
        if (s.predecessor === pred) s.predecessor = pred.predecessor;
    try {
      if (this.outage.degraded) return; // the next probe's recovery replays them
      await this.leases.replayReleases(this.shared);
      await this.endedLocks.replay(this.shared);
      await this.budget.merge();
      await this.pruneShared();
    } catch (err) {
      this.degrade(err as Error);
    } finally {
      this.adopted.notify();
    }
  }

  /** Degraded, a node grants cold loads only from its share of the budget: see `OutageBudget`. */
  async spendBudget(key: string, limit: number, windowMs: number, at: number): Promise<number> {
    await this.carrying;
    const waitMs = await this.decide(
      async (s) => {
        const waitMs = await s.spendBudget(key, limit, windowMs, at);
        if (waitMs === 0) this.budget.spentShared(key, windowMs);
        return waitMs;
      },
      async () => this.budget.spendAlone(key, limit, windowMs, this.outage.options.probeMs),
    );
    if (waitMs === 0 && this.spendsGoTo) await this.spendsGoTo.takeSpendsOf(this);
    return waitMs;
  }

  async close(): Promise<void> {
    this.outage.close();
    await this.shared.close?.();
  }
}
