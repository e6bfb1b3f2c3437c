/**
 * Shared fleet state with a local fallback: the store operations of a node that decides alone
 * while the shared store is away, and the hand-over between the stores of a runtime and its
 * successor (`succeed`, `adopt`, `carrySpends`, `leave`). What it owes the shared state after
 * deciding alone (recovery, reclaim after an emptied state) lives in recovering-store.ts, which
 * store decides each operation in degradable-store.ts, the outage itself in outage.ts, the
 * lease list in held-leases.ts, the budget share in outage-budget.ts.
 */
import { sleep, systemClock, type Clock } from '../../clock';
import type { Logger } from '../../log';
import { Signal } from '../../signal';
import type { BudgetTaken, BudgetWindow, FleetStore } from '../store';
import type { AdapterRef, Fence, Lease, Released, ReplicaSpec, ReplicaView, ResidencyState } from '../types';
import { FAILOVER_DEFAULTS, type FailoverOptions } from './outage';
import type { HeldLease } from './held-leases';
import { RecoveringFleetStore } from './recovering-store';
import type { SharedStore } from './shared-store';

/**
 * While the shared store answers, it decides; when a shared call fails or times out, this node
 * decides from its local state until a probe finds the shared store again: requests keep
 * flowing, each bounded by one shared timeout at most (and one more when it waits for a
 * recovery's last pass: `Outage.recovering`). Leases taken locally are re-taken in the
 * shared store on recovery, and releases that failed are replayed.
 */
export class FailoverFleetStore extends RecoveringFleetStore implements FleetStore {
  /**
   * The store of the runtime that replaced this one on other state: each cold load granted here
   * from then on counts there too, before its caller has it (`carrySpends`).
   */
  private spendsGoTo: FailoverFleetStore | null = null;
  /** Spends carried from a predecessor on other state, until added here: grants wait for them. */
  private carrying: Promise<void> = Promise.resolve();
  /** Told when `adopt` has taken a predecessor's records: `leave` waits for the last. */
  private readonly adopted = new Signal();

  constructor(
    shared: SharedStore,
    log: Logger,
    options: FailoverOptions = FAILOVER_DEFAULTS,
    clock: Clock = systemClock,
  ) {
    super(shared, log, options, clock);
  }

  /**
   * This store's runtime moved to other shared state (a `redis` record change) and its last
   * lease was given back here: once the loads and unloads still under way here have ended,
   * replays the releases waiting here (those made while Redis was unreachable) and the lock ends
   * owed there, drops any lease of this node still there, then closes. The ends matter to peers
   * not yet moved (Kong pushes a configuration to its nodes in turn): an adapter read `loading`
   * there until its lock's TTL. Retried every probe while Redis is unreachable, for at most
   * `maxMs` (after lease_max_age_ms they expire by age anyway); a retired store never decides
   * again, so nothing else waits on this.
   */
  async leave(maxMs: number): Promise<void> {
    // Nothing here waits for room any more: only the command link stays, for the replay.
    this.shared.unsubscribe?.();
    // A predecessor on this state still draining hands its releases owed here to this store when
    // it closes (`adopt`): leaving first, this store closed its link and they were never sent
    // (the simulation's seed 556526). Its probes go on meanwhile, should Redis be unreachable.
    while (this.predecessor && !this.outage.closed)
      await this.adopted.wait(this.clock, this.outage.options.probeMs);
    await this.ownCallsEnded();
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
   * Resolves once each load and unload begun here in the shared store has ended, or its lock's
   * TTL has passed (its end does nothing then), or this store closed. A retired runtime's
   * prefetch load or trim after a poll runs in no decision and under no lease (RuntimeDrain), so
   * the runtime may be drained while one runs: closed first, this store sent its end nowhere,
   * and the adapter read `loading` (or `unloading`) until the lock's TTL, to every node
   * (test/core/failover-review-57.test.ts).
   */
  async locksEnded(): Promise<void> {
    while (this.endedLocks.open && !this.outage.closed)
      await this.endedLocks.endOrAfter(this.outage.options.probeMs);
  }

  /**
   * Once this store's own calls under way have ended: its loads' and unloads' locks
   * (`locksEnded`), then what its probe or a reclaim hands back (`handBackEnded`). Asked before it
   * is adopted (same state) or leaves (other state).
   */
  async ownCallsEnded(): Promise<void> {
    await this.locksEnded();
    await this.handBackEnded();
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

  /**
   * A registration of this node's own may be the first after the shared state was emptied (a
   * router configuration registered then): it begins the new state and notes its epoch, so no
   * heartbeat finds the state changed, and an idle node never took its leases back (a peer was
   * granted the unload under one once the grace was over). Taken back from here, as a heartbeat
   * would. Kept on this class: simulation replays set it aside on its prototype
   * (test/helpers/dst-fixtures.ts).
   */
  override async upsertReplica(spec: ReplicaSpec): Promise<void> {
    await super.upsertReplica(spec);
    if (this.shared.takeStateLost?.()) await this.reclaimShared();
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
        // A short answer alone is no emptying: a replica another node's forget check dropped, asked
        // of by a status page, a scrape or a lapsed configuration, is simply not there any more.
        const lost = this.shared.takeStateLost?.() ?? false;
        if (!lost && !this.lacksOwn(urls, views)) return this.reclaiming ? this.withOwnDowns(views) : views;
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
      this.leases.mine.set(lease.id, this.taken(lease, shared, tried));
      // No reclaim since it began (nearly always): no await on the request path.
      if (shared && this.reclaims !== since) await this.takeAgain(lease.id);
      return state;
    } finally {
      this.leases.acquiring.delete(lease.id);
    }
  }

  /**
   * `views` then `acquire` in one shared round trip. Found emptied (or a replica this node routes
   * to unknown there: `lacksOwn`), the lease is given back and both are done again as `views` and `acquire` do them:
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
          if (!lost && !this.lacksOwn(urls, r.views))
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
      this.leases.mine.set(lease.id, this.taken(lease, shared, tried));
      if (shared && this.reclaims !== since) await this.takeAgain(lease.id);
      return r;
    } finally {
      this.leases.acquiring.delete(lease.id);
    }
  }

  /**
   * A lease just taken. Its shared call sent and failed (a timeout, say): Redis may still run it,
   * since ioredis leaves the command on its connection (held-leases.ts `retakeUnanswered`). Its
   * release then goes on that link, behind it: replayed over a successor's link (`adopt`), it
   * landed first and the acquire left the lease open until lease_max_age_ms
   * (test/core/acquire-overtake.test.ts).
   */
  private taken(lease: Lease, shared: boolean, tried: boolean): HeldLease {
    // One shape for every lease (no spread of a condition on each acquire of the request path).
    const uncertain = !shared && tried;
    return { lease: { ...lease }, shared, uncertain, unansweredOn: uncertain ? this.shared : undefined };
  }

  async release(leaseId: string, at: number, status?: number): Promise<Released | undefined> {
    const m = this.leases.mine.get(leaseId);
    this.leases.mine.delete(leaseId);
    // Its acquire or a retake over a link (this store's or a successor's) got no answer: released
    // there too, behind it; that failing, replayed where this store goes. Sent, not waited for here:
    // the order is the link's, and that link has just failed to answer. A router that waited for a
    // guessed lease's give-back (it no longer does: router/guessed-lease.ts) sat out a timeout on a
    // decision its node's polls overtook (dst seed 1635447, test/core/release-unanswered.test.ts).
    // A shared one's carries the status: of the two releases on this state the first to find it
    // counts it and answers (the retake landed, the second found nothing: test/core/review-62b.test.ts).
    const behindUnanswered = m?.unansweredOn
      ? this.leases.releaseOn(m.unansweredOn, leaseId, at, m.shared ? status : undefined)
      : undefined;
    if (m && !m.shared) {
      // Released in Redis too when it returns, in case the timed-out acquire ran there.
      if (m.uncertain && !m.unansweredOn) this.leases.pendingReleases.add(leaseId);
      return this.local.release(leaseId, at, status);
    }
    // What the upstream said is an observation: the local store learns it too.
    this.leases.releasing.add(leaseId);
    try {
      if (m && status !== undefined)
        await this.local.observeOutcome(m.lease.url, m.lease.adapter, status, at);
      const released = await this.decide(
        (s) => s.release(leaseId, at, status),
        async () => {
          // Its count stays in the shared store until it returns: replay the release then.
          if (m) this.leases.pendingReleases.add(leaseId);
          return m ? { ...m.lease, adapterIdle: true } : undefined;
        },
      );
      // Found first by the release behind the unanswered call: that one has the answer. Waited for
      // only then, and only in the log phase (a status): a give-back never waits on that link.
      if (released !== undefined || !behindUnanswered || status === undefined) return released;
      return await behindUnanswered;
    } finally {
      this.leases.releasing.delete(leaseId);
    }
  }

  // Each lock's TTL and end is noted (ended-locks.ts): a server that missed the end is told again.
  override async beginLoad(...a: Parameters<FleetStore['beginLoad']>): Promise<Fence | null> {
    return this.grantedHere(await this.endedLocks.asked(super.beginLoad(...a), a[4]));
  }

  override finishLoad(...a: Parameters<FleetStore['finishLoad']>): Promise<boolean> {
    this.endedLocks.end('load', ...a);
    return super.finishLoad(...a);
  }

  override async beginUnload(...a: Parameters<FleetStore['beginUnload']>): Promise<Fence | null> {
    return this.grantedHere(await this.endedLocks.asked(super.beginUnload(...a), a[3]));
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
    // And the node count as `pred` held it: nodes cut off earlier still count for the window.
    if (pred.shared.nodeCount) this.shared.inheritNodeCount?.(pred.shared.nodeCount);
    this.predecessor = pred;
    pred.superseded = true;
    pred.successor = this;
    pred.budget.succeededBy(this.budget);
    this.knowReplicasOf(pred);
    // Degraded, the next probe's recovery prunes.
    if (!this.outage.degraded) await this.pruneShared().catch((err: Error) => this.degrade(err));
  }

  /**
   * The local copy registers the replicas `pred`'s routes to (claims) and this one does not know: the
   * shared state has them for both, but deciding alone this store reads its own copy, and a
   * superseded configuration still in use (a stale worker's, registered on `pred` only) decides here
   * (`FleetRuntime.current`). Before, its replicas were missing from its views, and with the one
   * replica left marked down by Kong's 502 the health filter failed open onto it (the simulation's
   * seed 3044962). Specs only: their readings come from this runtime's polls. One known here already
   * (by a newer configuration) keeps its spec. Not one the node left (`pred`'s copy keeps it until its
   * forget check): copied, and claimed, it was a replica this node routes to, and a read or the
   * reclaim after an emptied state registered it again once the shared state had forgotten it
   * (test/core/failover-review-69.test.ts). Synchronous: a registration of this store's own landing
   * mid-copy was overwritten by `pred`'s older spec.
   */
  private knowReplicasOf(pred: FailoverFleetStore): void {
    this.local.knowReplicasOf(pred.local);
  }

  /**
   * The replicas this node routes to as its local copy was last told (each registration claims,
   * each retain lists exactly them): what it hands a successor, same state or other. Not one it
   * left (its copy keeps it unclaimed until its own forget check), nor another node's.
   */
  async claimedSpecs(): Promise<ReplicaSpec[]> {
    return (await this.local.replicaSpecs()).filter((s) => this.local.claimedBy(s.url));
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
    return (await this.takeBudget(key, limit, windowMs, at)).waitMs;
  }

  /** A unit granted alone has no window a refund can reach: it stays counted (stricter). */
  async takeBudget(key: string, limit: number, windowMs: number, at: number): Promise<BudgetTaken> {
    await this.carrying;
    let window: BudgetWindow | null = null;
    const waitMs = await this.decide(
      async (s) => {
        const taken = await s.takeBudget(key, limit, windowMs, at);
        if (taken.waitMs === 0) this.budget.spentShared(key, windowMs);
        if (taken.window) window = { ...taken.window, epoch: s.currentEpoch ?? null };
        return taken.waitMs;
      },
      async () => this.budget.spendAlone(key, limit, windowMs, this.outage.options.probeMs),
    );
    if (waitMs === 0 && this.spendsGoTo) await this.spendsGoTo.takeSpendsOf(this);
    return { waitMs, window: waitMs === 0 ? window : null };
  }

  /**
   * Forwarded to the shared state the units were counted in, while it answers under the same
   * epoch; else (degraded, emptied, failed) nothing is given back and the units stay counted.
   */
  async refundBudget(window: BudgetWindow, count: number, at: number): Promise<number> {
    if (this.outage.degraded || window.epoch === undefined) return 0;
    if (window.epoch !== (this.shared.currentEpoch ?? null)) return 0;
    const back = await this.shared.refundBudget(window, count, at).catch(() => 0);
    this.budget.refundedShared(window.key, window.epoch, back);
    return back;
  }

  async close(): Promise<void> {
    this.outage.close();
    await this.shared.close?.();
  }
}
