/**
 * What a node owes the shared state after deciding alone or finding it emptied: on recovery, and
 * once the state is found emptied (`reclaim`), its replicas registered again with those it saw
 * down, its leases (and its draining predecessors' on this state) taken again, its missed
 * releases and lock ends replayed, the leases it no longer holds pruned, its cold loads merged
 * into the shared budget. The store operations and the hand-over between runtimes are the
 * subclass's (failover-store.ts); which store decides each operation lives in
 * degradable-store.ts, the outage itself in outage.ts.
 */
import type { Clock } from '../../clock';
import type { Logger } from '../../log';
import type { Fence, ReplicaSnapshot, ReplicaView } from '../types';
import { DegradableFleetStore } from './degradable-store';
import { EndedLocks } from './ended-locks';
import { HeldLeases, retake } from './held-leases';
import type { FailoverOptions } from './outage';
import { OutageBudget } from './outage-budget';
import { SeenDown } from './seen-down';
import type { SharedStore } from './shared-store';

/** Passes of a recovery re-taking leases admitted during the previous pass before it gives up until the next probe. */
const RECOVERY_PASSES = 100;
/** Passes of a registration the shared state was emptied during before it fails (`registerReplicas`). */
const REGISTRATION_PASSES = 3;

/** Recovery and reclaim of a failover store: what it owes the shared state, handed there. */
export abstract class RecoveringFleetStore extends DegradableFleetStore {
  protected readonly leases: HeldLeases;
  protected readonly budget: OutageBudget;
  /** Locks this node ended whose end a server that missed the last writes may lack. */
  protected readonly endedLocks: EndedLocks;
  /** The replicas this node saw down while it decided alone, owed to the shared store on recovery. */
  private readonly seenDown = new SeenDown();
  /**
   * Replaced on the same shared state (same node id): the successor prunes for both, this one
   * never (it would drop the successor's leases, which it does not know).
   */
  superseded = false;
  /** Re-registering and re-taking leases after the shared state was emptied, while under way. */
  protected reclaiming: Promise<void> | null = null;
  /** Set once this store hands over (`handBackEnded`): it begins no reclaim after that. */
  private handingOver = false;
  /** Reclaims begun so far: an acquire under way across one is taken again after it (`takeAgain`). */
  protected reclaims = 0;
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
  predecessor: RecoveringFleetStore | null = null;
  /** The store that replaced this one on the same shared state (`succeed`): one node id. */
  successor: RecoveringFleetStore | null = null;

  constructor(shared: SharedStore, log: Logger, options: FailoverOptions, clock: Clock) {
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
  protected reclaim(): Promise<void> {
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
   * Stops probing, then waits for what this store is handing the shared state under way (a
   * probe's recovery, a reclaim) to end, before its records are adopted or it leaves and closes.
   * Each re-takes leases over this store's link, and one whose request ended while its retake was
   * on the wire is released after the reply (`HeldLeases.restore`): closed first, that release
   * went to a closed link, the retake landed after the successor's prune, and the lease stayed
   * open until it aged out (the simulation's seed 19811).
   */
  async handBackEnded(): Promise<void> {
    // None begins from now: one begun after the wait would be cut off by the close the same way.
    // What is left is the successor's (`adopt`) or dropped by the leave's prune.
    this.handingOver = true;
    this.outage.stopProbing();
    await this.outage.probeEnded();
    await this.reclaiming?.catch(() => undefined);
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
  protected withOwnDowns(views: ReplicaView[]): ReplicaView[] {
    const down = new Set(this.local.seenDown(this.clock.now()).map((d) => d.url));
    for (const v of views) if (v.health === 'unknown' && down.has(v.url)) v.health = 'down';
    return views;
  }

  /** The reclaims an acquire begun now may have missed: those begun from now, and one under way. */
  protected reclaimsMissable(): number {
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
  protected async takeAgain(id: string): Promise<void> {
    await this.reclaiming?.catch(() => undefined);
    const m = this.leases.mine.get(id);
    if (!m?.shared || this.outage.degraded) return;
    await retake(this.shared, [m.lease]).catch(async (err: Error) => {
      this.degrade(err);
      // It may still land: its release goes behind it, not ahead over a successor's link once
      // this store's pending releases are adopted (test/core/acquire-overtake.test.ts).
      await this.leases.retakeUnanswered(this.shared, [[id, m]]);
    });
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
    // Only those it routes to now: its local copy keeps one it left until its own forget check, and
    // registered from here it came back after the shared state forgot it (and, claimed in this
    // node's name, stayed another grace): polled by every node again.
    const specs = (await this.local.replicaSpecs()).filter((s) => this.routesTo(s.url));
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
  protected async reclaimShared(): Promise<void> {
    if (this.handingOver) return;
    if (this.outage.degraded) this.emptiedSinceRegistration = true;
    else await this.reclaim().catch((err: Error) => this.degrade(err));
  }

  /**
   * Whether this store still owes the shared state something on `url`: the end of a lock it may
   * have missed (ended-locks.ts). Its records of the replica stay until then (`forgetSeen`).
   */
  owesOn(url: string): boolean {
    return this.endedLocks.owes(url);
  }

  /** Drops what this store keeps of a replica that left (runtime-departures.ts `forgetReplica`; `owesOn` false). */
  forgetSeen(url: string): void {
    this.seenDown.forget(url);
  }

  override applySnapshot(url: string, snapshot: ReplicaSnapshot): Promise<void> {
    this.seenDown.note(url, snapshot);
    return super.applySnapshot(url, snapshot);
  }

  /**
   * A lock granted here under `fence`: the other stores of this node on this state (a predecessor
   * still draining, a successor) owe no end under it any more. Each replays what it owes when it
   * finds the state lost or back (`reclaim`, `recover`), before any adoption: the end owed for an
   * older lock under a fence handed out again ended this lock, taken for that store's own (one node
   * id), and the adapter read `loaded` while it loaded (test/core/failover-review-58.test.ts).
   */
  protected grantedHere(fence: Fence | null): Fence | null {
    if (fence === null || fence <= 0) return fence;
    for (let p = this.predecessor; p; p = p.predecessor) p.endedLocks.handedOutAgain(fence);
    for (let s = this.successor; s; s = s.successor) s.endedLocks.handedOutAgain(fence);
    return fence;
  }

  /** `urls` and those this node's open leases are on: the local copy keeps them (`retainReplicas`). */
  protected override routedTo(urls: readonly string[]): readonly string[] {
    const leased = new Set<string>();
    for (const m of this.leases.mine.values()) leased.add(m.lease.url);
    return leased.size === 0 ? urls : [...new Set([...urls, ...leased])];
  }

  /**
   * Whether this node routes to `url` now: its local copy's claim (each registration claims, each
   * retain lists exactly what the node routes to: `retainReplicas`), or an open lease on it of its
   * own or of a predecessor still draining (taken again, it must count against a known replica).
   */
  protected routesTo(url: string): boolean {
    return this.local.claimedBy(url) || this.leasesOn(url);
  }

  /** Whether this store or a predecessor still draining holds an open lease on `url`. */
  private leasesOn(url: string): boolean {
    for (const m of this.leases.mine.values()) if (m.lease.url === url) return true;
    return this.predecessor?.leasesOn(url) ?? false;
  }

  /**
   * Whether views read of `urls` in an answering state with its epoch unchanged lack one this node
   * routes to: the state lost it without an emptying the epoch tells (a restore from an older copy
   * of the same epoch, a forget while this node was silent past node_ttl_ms), and a reclaim
   * registers it again. One it does not route to was forgotten (no live node claims it): no read
   * brings it back (before, any short answer read as an emptied state, and a status page, a metrics
   * scrape or a request through a lapsed configuration asking of one registered the node's local
   * copy again: dst seeds 2892202, 2901338; test/core/views-forgotten-redis.test.ts).
   */
  protected lacksOwn(urls: readonly string[], views: readonly ReplicaView[]): boolean {
    if (views.length >= urls.length) return false;
    const found = new Set(views.map((v) => v.url));
    return urls.some((u) => !found.has(u) && this.routesTo(u));
  }

  /** Every lease id this node may hold in the shared state: its own and an unadopted predecessor's. */
  protected held(): string[] {
    const ids = this.leases.ids();
    return this.predecessor ? [...ids, ...this.predecessor.held()] : ids;
  }

  /**
   * Drops this node's leases that the shared state holds and this node does not: a release Redis
   * acknowledged and then lost in a restart from a snapshot (chaos run seed 1: four leases open
   * until lease_max_age_ms). This node's own list is the truth about its leases.
   */
  protected async pruneShared(): Promise<void> {
    if (this.superseded) return;
    const n = (await this.shared.prune?.(() => this.held())) ?? 0;
    if (n > 0) this.log.warn(`shared fleet state held ${n} lease(s) of this node it had released: dropped`);
  }
}
