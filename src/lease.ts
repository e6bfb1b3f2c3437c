import { monotonic } from './clock';
import { LEASE_CEILING } from './fleet/memory-leases';
import type { AdapterRef, Lease, Released, ReplicaView, ResidencyState } from './fleet/types';
import { ReplicaCounts } from './replica-counts';
import type { FleetRuntime } from './runtime';

/**
 * A lease given back that is not open: given back already (a bug in the caller; the store would
 * ignore a second release silently), or reclaimed by age.
 */
export class LeaseNotOpen extends Error {
  override readonly name = 'LeaseNotOpen';
  constructor(readonly leaseId: string) {
    super(`lease ${leaseId} is not open (given back already, or reclaimed by age)`);
  }
}

/**
 * This process's open leases by id: the log phase is another call of the plugin server, and
 * Kong carries only the id from access to log. An entry leaves when its lease is given back, or
 * once the lease is past the age at which every store has reclaimed it.
 */
const open = new Map<string, LeaseHandle>();
/**
 * The same handles per runtime, in the order taken: each runtime has its own reclaim age, so
 * only within one runtime does the oldest come first (the sweep stops at the first young one).
 */
const byRuntime = new Map<FleetRuntime, Set<LeaseHandle>>();
/**
 * Per runtime, per replica: how many of those handles are open there. Read synchronously by a
 * class bounded by `max_in_flight` (src/router/in-flight-here.ts): the views a decision reads
 * are a snapshot, taken before the leases of requests decided at the same time.
 */
const openPerReplica = new ReplicaCounts();
/**
 * Counts the store's answers to this process's acquires: a lease answered after a views read
 * began (`viewsMark`) may be missing from those views, one answered before is in them.
 */
let answeredSeq = 0;

/**
 * One request's lease, taken at admission on the runtime its decision runs on (captured once).
 * It is given back there, once, whatever path ends the request (served, load failed, client
 * gone, refused after admission) and whatever `redis` record changes came meanwhile: a replaced
 * runtime keeps its store until its last lease is given back (FleetRuntime.retire), so nothing
 * moves between runtimes. Renewal is the store's, from the replica's word on the adapter.
 */
export class LeaseHandle {
  private ended = false;
  /** `answeredSeq` when its store answered its acquire (Infinity: not yet). */
  private answered = Infinity;
  /** When it was opened, on the monotonic time line (`monotonic`): before its request went out. */
  readonly openedMono: number;

  private constructor(
    readonly lease: Lease,
    /** The runtime the lease was taken on: its store counts it, its work model holds its work. */
    readonly rt: FleetRuntime,
  ) {
    this.openedMono = monotonic(rt.clock);
  }

  get id(): string {
    return this.lease.id;
  }

  /**
   * Takes a lease on `url`'s `adapter` in `rt`'s store; also the adapter's state under it, as this
   * node knows it: `unloading` while its own unload of it there is under way, whatever the store
   * says (a reset lost that unload's entry: src/adapters/own-unloads.ts).
   */
  static async take(
    rt: FleetRuntime,
    url: string,
    adapter: string | null,
  ): Promise<{ lease: LeaseHandle; state: ResidencyState | undefined }> {
    // Written out rather than through a callback: every request takes one (an async closure
    // and a spread result fewer per request; the plugin server runs this cache-cold).
    const h = LeaseHandle.opened(rt, url, adapter);
    try {
      const state = await rt.store.acquire({ ...h.lease });
      h.answered = ++answeredSeq;
      return { lease: h, state: rt.manager.ownUnloads.stateOf(url, adapter, state) };
    } catch (err) {
      // The acquire may have counted it before failing: give it back as any other ending.
      await h.release().catch(() => undefined);
      throw err;
    }
  }

  /**
   * `take` in the call, when `rt`'s store answers in the call (FleetStore.acquireNow: the
   * in-process store); undefined for a shared store, whose acquire is a round trip (`take`).
   */
  static takeNow(
    rt: FleetRuntime,
    url: string,
    adapter: string | null,
  ): { lease: LeaseHandle; state: ResidencyState | undefined } | undefined {
    const store = rt.store;
    if (!store.acquireNow) return undefined;
    const h = LeaseHandle.opened(rt, url, adapter);
    try {
      // The in-process store copies the lease it keeps: no copy made here.
      const state = store.acquireNow(h.lease);
      h.answered = ++answeredSeq;
      return { lease: h, state: rt.manager.ownUnloads.stateOf(url, adapter, state) };
    } catch (err) {
      // As `take`: given back as any other ending, whatever the release says.
      // The acquire's own error is the one to tell.
      try {
        const released = h.releaseInCall();
        if (released instanceof Promise) released.catch(() => undefined);
      } catch {
        // LeaseNotOpen: ended already.
      }
      throw err;
    }
  }

  /**
   * `rt`'s views of `urls` (with `ref`'s presence), then a lease as `take` takes it, in one store
   * step: one round trip to a shared store, for a request whose replica is guessed before its
   * decision. The views are read before the lease, as `views` then `take` read them.
   */
  static async takeWithViews(
    rt: FleetRuntime,
    url: string,
    adapter: string | null,
    urls: readonly string[],
    ref: AdapterRef | undefined,
  ): Promise<{ lease: LeaseHandle; state: ResidencyState | undefined; views: ReplicaView[] }> {
    const store = rt.store;
    const h = LeaseHandle.opened(rt, url, adapter);
    try {
      if (store.viewsAndLease) {
        const t = await store.viewsAndLease(urls, ref, { ...h.lease });
        h.answered = ++answeredSeq;
        return { lease: h, state: rt.manager.ownUnloads.stateOf(url, adapter, t.state), views: t.views };
      }
      const views = await store.views(urls, ref);
      const state = await store.acquire({ ...h.lease });
      h.answered = ++answeredSeq;
      return { lease: h, state: rt.manager.ownUnloads.stateOf(url, adapter, state), views };
    } catch (err) {
      // The acquire may have counted it before failing: give it back as any other ending.
      await h.release().catch(() => undefined);
      throw err;
    }
  }

  /** A new handle, open and counted on `rt` before the acquire's first await: a runtime retired meanwhile waits for it. */
  private static opened(rt: FleetRuntime, url: string, adapter: string | null): LeaseHandle {
    sweep(rt.clock.now());
    const h = new LeaseHandle({ id: rt.nextLeaseId(), url, adapter, at: rt.clock.now() }, rt);
    open.set(h.id, h);
    const mine = byRuntime.get(rt) ?? new Set<LeaseHandle>();
    byRuntime.set(rt, mine.add(h));
    openPerReplica.add(rt, url, 1);
    rt.leaseOpened(h);
    return h;
  }

  /** This process's leases open on `url` in `rt` (taken, not yet given back nor aged out). */
  static openOn(rt: FleetRuntime, url: string): number {
    return openPerReplica.get(rt, url);
  }

  /**
   * This process's leases open on `url` on `rt`'s node: every runtime sharing its lease prefix on
   * its state (a successor on the same state takes its leases under the same node id), the leases
   * a store's view counts as that node's (ReplicaView.ownInFlight) when it shows them.
   */
  static nodeOpenOn(rt: FleetRuntime, url: string): number {
    let n = 0;
    // The runtimes holding a lease open now: one or two per state (a successor and its predecessor).
    for (const other of byRuntime.keys())
      if (other.leasePrefix === rt.leasePrefix && other.stateKey === rt.stateKey)
        n += openPerReplica.get(other, url);
    return n;
  }

  /** Whether `rt` keeps a count of `url` here, at 0 or not (dst/replica-records.ts). */
  static countsOn(rt: FleetRuntime, url: string): boolean {
    return openPerReplica.has(rt, url);
  }

  /** Drops the count of `url` on `rt` (a replica that left); false while a lease there is open. */
  static forgetReplica(rt: FleetRuntime, url: string): boolean {
    return openPerReplica.forget(rt, url);
  }

  /** Taken just before a views read begins: the leases `unseenOn` counts against those views. */
  static viewsMark(): number {
    return answeredSeq;
  }

  /**
   * This process's leases open on `url` in `rt` that views read since `mark` may not show: their
   * acquire answered after it, or not yet. `except`: the deciding request's own.
   */
  static unseenOn(rt: FleetRuntime, url: string, mark: number, except?: LeaseHandle): number {
    let n = 0;
    for (const h of byRuntime.get(rt) ?? [])
      if (h !== except && h.answered > mark && h.lease.url === url) n++;
    return n;
  }

  /** Whether its store answered its acquire before `mark` (LeaseHandle.viewsMark): views read since show it. */
  answeredBy(mark: number): boolean {
    return this.answered <= mark;
  }

  /** The open lease with this id in this process, if any (the log phase's way back to it). */
  static find(id: string): LeaseHandle | undefined {
    return open.get(id);
  }

  /** The open lease with this id in this process; LeaseNotOpen if given back already or reclaimed by age. */
  static open(id: string): LeaseHandle {
    const h = open.get(id);
    if (!h) throw new LeaseNotOpen(id);
    return h;
  }

  /**
   * Gives the lease back where it was taken, with the upstream status (passive health; only a
   * 2xx says its work completed). A second call throws LeaseNotOpen: the first ended it.
   */
  async release(status?: number): Promise<Released | undefined> {
    const rt = this.ending(status);
    // Counted on its runtime until the store has it: a replaced runtime drains on this count,
    // and closing its store under a release under way would lose the release.
    try {
      return await rt.store.release(this.id, rt.clock.now(), status);
    } finally {
      rt.leaseEnded(this);
    }
  }

  /**
   * `release`, answered in the call when its store answers in the call (FleetStore.releaseNow:
   * the in-process store; a log phase then awaits nothing), else its promise. A second call
   * throws LeaseNotOpen, in the call.
   */
  releaseInCall(status?: number): Released | undefined | Promise<Released | undefined> {
    const store = this.rt.store;
    if (!store.releaseNow) return this.release(status);
    const rt = this.ending(status);
    try {
      return store.releaseNow(this.id, rt.clock.now(), status);
    } finally {
      rt.leaseEnded(this);
    }
  }

  /** A release begins: out of the process's lists, its work ended (LeaseNotOpen if ended already). */
  private ending(status: number | undefined): FleetRuntime {
    if (this.ended) throw new LeaseNotOpen(this.id);
    this.forget();
    const rt = this.rt;
    const completed = status !== undefined && status >= 200 && status < 300;
    if (rt.predictsWork) rt.work.release(this.id, rt.clock.now(), completed);
    return rt;
  }

  /** Forgotten without a store call: every store reclaimed it by age already. */
  agedOut(): void {
    if (!this.ended) this.end();
  }

  /** Whether every store has reclaimed it by age at `now` (its log phase never came). */
  reclaimedBy(now: number): boolean {
    return now - this.lease.at >= this.reclaimedAfterMs;
  }

  /** Age past which every store has reclaimed the lease (renewed or not). */
  get reclaimedAfterMs(): number {
    return LEASE_CEILING * this.rt.poller.leaseMaxAgeMs;
  }

  private end(): void {
    this.forget();
    this.rt.leaseEnded(this);
  }

  /** Ended: out of the process's lists (its runtime still counts it until its store has it). */
  private forget(): void {
    if (!this.ended) openPerReplica.add(this.rt, this.lease.url, -1);
    this.ended = true;
    if (open.get(this.id) === this) open.delete(this.id);
    const mine = byRuntime.get(this.rt);
    mine?.delete(this);
    if (mine?.size === 0) byRuntime.delete(this.rt);
  }
}

/**
 * Drops, per runtime, the oldest entries that every store reclaimed by age (their log phase
 * never came): one runtime's young lease must not hide another's reclaimed ones.
 */
function sweep(now: number): void {
  // Deleting the entry being visited is safe while iterating a Map or a Set.
  for (const mine of byRuntime.values())
    for (const h of mine) {
      if (!h.reclaimedBy(now)) break;
      h.agedOut();
    }
}
