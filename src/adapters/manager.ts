import type { Clock } from '../clock';
import type { Signal } from '../signal';
import type { ReplicaApi } from '../backends/replica-api';
import { errors } from '../errors';
import type { FleetStore } from '../fleet/store';
import type { AdapterRef, ReplicaView, ResidentAdapter } from '../fleet/types';
import { LoadBackoff } from './backoff';
import { CallEnds } from './call-end';
import { keptDuring } from './call-keep';
import { PlacementClaims } from './claims';
import { IdleUnload } from './idle-unload';
import { LoadCalls } from './load-call';
import { OwnUnloads } from './own-unloads';
import {
  accessEnd,
  CallerRefused,
  keepLeases,
  loadWaitRanOut,
  type AdapterPolicy,
  type EnsureOutcome,
  type KeepLease,
  type LoadRecord,
} from './policy';
import { Room, ROOM_FALLBACK_MS } from './room';
import { RoomWants } from './room-wants';

export type { AdapterPolicy, EnsureOutcome, LoadRecord } from './policy';
import { ReplicaWord } from './replica-word';
import { UnknownNames } from './unknown-names';
import type { Logger } from '../log';

/**
 * Puts adapters on replicas: each cold adapter is loaded once (concurrent callers wait on the
 * same load), the cheapest idle adapter (by the eviction policy; LRU by default) makes room,
 * an adapter with requests in flight is never unloaded, and a failing load backs off
 * exponentially per (replica, adapter).
 * Process-wide and keyed by replica URL, like the store: plugin instances come and go.
 */
export class AdapterManager {
  /** Loads under way, by replica and adapter: joiners await the same promise (and its failure). */
  private flights = new Map<string, Promise<boolean>>();
  /**
   * The leases of the requests awaiting a load under way here, by replica and adapter: that load
   * keeps them young where and when it keeps its own caller's (AdapterPolicy.keepLease, its timer
   * too), since a joiner's wait has no wake of its own.
   */
  private joiners = new Map<string, Set<KeepLease>>();
  private readonly claims: PlacementClaims;
  /** Failed loads held off by replica and adapter; the scheduler routes around them (`load-backoff`). */
  readonly backoff: LoadBackoff;
  /** Names known to exist, and the replicas where an unknown one may not evict for now. */
  private readonly unknownNames: UnknownNames;
  /** Notified whenever a slot may have freed up (a load or unload ended, a lease was released). */
  readonly roomChanged: Signal;
  private readonly room: Room;
  /** Requests of this process waiting for room: prefetching leaves their replicas alone. */
  readonly roomWants = new RoomWants();
  /** Ends load and unload calls: their locks, records and listeners (call-end.ts). */
  private readonly ends: CallEnds;
  /** A load call's whole life, once ensure has a flight for it (load-call.ts). */
  private readonly loads: LoadCalls;
  /** What the replica itself says before an unload. */
  readonly replicaWord: ReplicaWord;
  /** Unloads only what no lease holds and the replica, asked afresh, does not run. */
  private readonly idleUnload: IdleUnload;
  /** This node's unload calls under way: its decisions keep off them whatever the store says. */
  readonly ownUnloads = new OwnUnloads();
  /**
   * Whether a request this store does not count may be on an adapter (a `redis` record change:
   * the other runtime's requests live in another state): such an adapter is not unloaded.
   */
  leasedElsewhere: ((url: string, adapter: string) => boolean) | null = null;
  /** Told as each load call goes to a replica; the function it returns, when the call ends (the work model's engine stalls). */
  onLoadCall: ((url: string, adapter: string) => (() => void) | undefined) | null = null;
  /**
   * Whether this runtime was replaced by one on other state: a wait for room here ends at once
   * (RuntimeReplaced) and the request is decided again there.
   */
  replaced: () => boolean = () => false;

  /**
   * Drops what is kept of `url` (a replica that left): its own unloads' ends, the names blocked
   * there, its failed loads' backoff, the replica's word on it. False, and nothing dropped, while a
   * load, an unload or a placement of this process is under way there, or an unseen hold is (a
   * request of a router this node cannot see may run there: UNSEEN_HOLD_MS, tried next round).
   */
  forgetReplica(url: string): boolean {
    const prefix = `${url}\u0000`;
    for (const key of this.flights.keys()) if (key.startsWith(prefix)) return false;
    for (const key of this.joiners.keys()) if (key.startsWith(prefix)) return false;
    if (this.claims.on(url) || this.replicaWord.holding(url) || !this.ownUnloads.forget(url)) return false;
    this.unknownNames.forget(url);
    this.backoff.forget(url);
    this.replicaWord.forget(url);
    return true;
  }

  /** A wait for room to change, ended by RuntimeReplaced on a replaced runtime (Room.waitForRoom). */
  waitForRoom(): Promise<void> {
    return this.room.waitForRoom();
  }

  constructor(
    private readonly store: FleetStore,
    api: ReplicaApi,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.claims = new PlacementClaims(clock);
    this.backoff = new LoadBackoff(clock);
    this.unknownNames = new UnknownNames(clock);
    this.replicaWord = new ReplicaWord(api, clock, log);
    this.idleUnload = new IdleUnload(
      store,
      api,
      clock,
      this.replicaWord,
      () => this.leasedElsewhere,
      // Called only once a call ends, after this constructor set `ends`.
      (url, adapter, fence, ok) => this.ends.finish('unload', url, adapter, fence, ok),
      (r, why) => this.ends.record(r, why),
      this.ownUnloads,
    );
    this.room = new Room(store, clock, this.replicaWord, this.unknownNames, this.idleUnload, () =>
      this.replaced(),
    );
    this.roomChanged = this.room.changed;
    this.ends = new CallEnds(store, clock, log, this.roomChanged);
    this.loads = new LoadCalls({
      store,
      api,
      clock,
      log,
      room: this.room,
      roomWants: this.roomWants,
      replicaWord: this.replicaWord,
      backoff: this.backoff,
      unknownNames: this.unknownNames,
      ends: this.ends,
      leasedElsewhere: () => this.leasedElsewhere,
      onLoadCall: () => this.onLoadCall,
      ownUnloads: this.ownUnloads,
    });
  }

  /** Unloads idle adapters while `url` holds more than the limit (Room.trim). */
  trim(url: string, policy: AdapterPolicy): Promise<void> {
    return this.room.trim(url, policy);
  }

  /** Adds a listener told after every load and unload call; the others keep theirs. */
  addCallListener(fn: (r: LoadRecord) => void): void {
    this.ends.addListener(fn);
  }

  /**
   * Makes `adapter` resident on `url`; throws a RouterError (502/503/404) when it cannot.
   * `victimCost` orders idle adapters when room must be made (cheapest first; default LRU).
   * `beforeLoad` runs once, when this call has room to load into (not when it joins a load, nor
   * when no slot frees up in time), and may refuse the load by throwing (the cold-load budget).
   */
  async ensure(
    url: string,
    adapter: AdapterRef,
    policy: AdapterPolicy,
    victimCost: (v: ResidentAdapter) => number = (v) => v.lastUsed,
    beforeLoad?: () => Promise<void>,
  ): Promise<EnsureOutcome> {
    const key = `${url}\u0000${adapter.name}`;
    const deadline = Math.min(
      this.clock.now() + policy.queueTimeoutMs + policy.loadTimeoutMs,
      accessEnd(policy),
    );
    let joined = false;
    // Once however often a load loses its slot and this call looks again.
    let spent = false;
    const spendOnce =
      beforeLoad &&
      (async () => {
        if (spent) return;
        await beforeLoad();
        spent = true;
      });
    /** Waited for another process's load or unload: the placement is checked again before a load. */
    let waited = false;
    for (;;) {
      const flight = this.flights.get(key);
      if (flight) {
        // A joiner keeps its own bound: the load it joins may have begun long after it came
        // (an escalated request), and Kong gives up on the plugin server at 60 s.
        let done: boolean;
        try {
          done = await this.joinWithin(flight, deadline, key, policy.keepLease);
        } catch (err) {
          // Refused for its starter's own reason (a prefetch stopped by a `redis` record change,
          // or over its budget): nothing was started, and this caller still wants it. Look again.
          if (!(err instanceof CallerRefused)) throw err;
          if (this.flights.get(key) === flight) this.flights.delete(key);
          continue;
        }
        if (!done) throw loadWaitRanOut(adapter.name, url);
        joined = true;
        continue;
      }
      const [view] = await this.store.views([url], adapter);
      // A placement only says where the load should happen: nobody is loading it yet.
      // This node's own unload under way there reads `unloading`, whatever the store says (a reset lost it).
      const state = this.ownUnloads.stateOf(
        url,
        adapter.name,
        view?.adapter?.placed ? undefined : view?.adapter?.state,
      );
      if (state === 'loaded' || state === 'static') {
        await this.store.touch(url, adapter.name, this.clock.now());
        return joined ? 'joined' : 'hit';
      }
      if (state === 'loading' || state === 'unloading') {
        // Another process (sharing the store) is loading or unloading it: wait and look again.
        if (this.clock.now() >= deadline)
          throw state === 'loading' ? loadWaitRanOut(adapter.name, url) : errors.noRoom(adapter.name, url, 1);
        // An unload is a wait for room: on a runtime replaced by one on other state it ends at once,
        // decided again there (RuntimeReplaced). This store is polled no more, so the end of this
        // node's own unload it missed would read `unloading` until the deadline (dst seed 741908
        // under another timer order: 503 after 11 s).
        if (state === 'unloading') await this.waitForRoom();
        else await this.roomChanged.wait(this.clock, ROOM_FALLBACK_MS);
        waited = true;
        // The caller's lease kept young meanwhile (AdapterPolicy.keepLease).
        const kept = policy.keepLease?.();
        if (kept) await kept;
        continue;
      }
      // Someone in this process started the load while we read the store: join it.
      if (this.flights.has(key)) continue;
      this.backoff.check(url, adapter.name);
      // `beforeLoad` runs inside, once there is room to load into (Room.claimSlot); the flight
      // is set first, so requests here that come meanwhile join this load instead of spending.
      // The load keeps its joiners' leases with its caller's (a prefetch has none of its own).
      const own = policy.keepLease;
      const flightPolicy = {
        ...policy,
        keepLease: () => keepLeases([own, ...(this.joiners.get(key) ?? [])]),
      };
      // Its leases kept young every ROOM_FALLBACK_MS for its whole life too: in the queue behind
      // another load's room-making, in one unload or replica read of its own, in the load call, none
      // of which wakes on its own. That is lease_max_age_ms / 4 at the smallest allowed (1 s), and a
      // lease younger than half its max age takes nothing (WaitingLease.keep).
      const load = keptDuring(this.clock, ROOM_FALLBACK_MS, flightPolicy.keepLease, this.log, () =>
        this.loads.load(url, adapter, flightPolicy, victimCost, waited, spendOnce),
      );
      this.flights.set(key, load);
      try {
        // false: it became resident (or started loading elsewhere) while we made room; look again.
        if (await load) return 'loaded';
      } finally {
        if (this.flights.get(key) === load) this.flights.delete(key);
      }
    }
  }

  /**
   * Waits for `flight` until `deadline` on the clock: false if the deadline came first. Its failure
   * propagates. Meanwhile the flight keeps `keep`'s lease young (`joiners`).
   */
  private async joinWithin(
    flight: Promise<unknown>,
    deadline: number,
    key: string,
    keep: KeepLease | undefined,
  ): Promise<boolean> {
    const left = deadline - this.clock.now();
    if (left <= 0) return false;
    let cancel = () => {};
    let joined = this.joiners.get(key);
    if (keep) {
      if (!joined) this.joiners.set(key, (joined = new Set()));
      joined.add(keep);
    }
    try {
      return await Promise.race([
        flight.then(() => true),
        new Promise<boolean>((resolve) => (cancel = this.clock.after(left, () => resolve(false)))),
      ]);
    } finally {
      cancel();
      if (keep && joined) {
        joined.delete(keep);
        if (joined.size === 0 && this.joiners.get(key) === joined) this.joiners.delete(key);
      }
    }
  }

  /** Records (synchronously) that a decision placed `adapter` on `url`; undo with `unclaim`. */
  claim(url: string, adapter: string): void {
    this.claims.claim(url, adapter);
  }

  unclaim(url: string, adapter: string): void {
    this.claims.unclaim(url, adapter);
  }

  /** Shows claimed placements in `views` (see PlacementClaims.overlay). */
  overlayClaims(views: ReplicaView[], adapter: string): void {
    this.claims.overlay(views, adapter);
  }
}
