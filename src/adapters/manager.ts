import type { Clock } from '../clock';
import { KeyedLock } from '../keyed-lock';
import { Signal } from '../signal';
import { BackendError } from '../backends/errors';
import { AdapterNotFoundError, AdapterRejectedError } from '../backends/replica-api';
import type { LoadOutcome, ReplicaApi } from '../backends/replica-api';
import { errors } from '../errors';
import type { FleetStore, LoadEnd } from '../fleet/store';
import type { AdapterRef, Fence, ReplicaView, ResidentAdapter } from '../fleet/types';
import { LoadBackoff } from './backoff';
import { PlacementClaims } from './claims';
import { IdleUnload } from './idle-unload';
import {
  accessEnd,
  loadWaitRanOut,
  within,
  type AdapterPolicy,
  type EnsureOutcome,
  type LoadRecord,
} from './policy';
import { Room, ROOM_FALLBACK_MS } from './room';
import { RoomWants } from './room-wants';

export type { AdapterPolicy, EnsureOutcome, LoadRecord } from './policy';
import { ReplicaWord } from './replica-word';
import { clientReason, rejectionReason } from './load-failures';
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
  /** Serialises room-making per replica within this process. */
  private readonly roomLock = new KeyedLock();
  private readonly claims: PlacementClaims;
  private readonly backoff: LoadBackoff;
  /** Names known to exist, and the replicas where an unknown one may not evict for now. */
  private readonly unknownNames: UnknownNames;
  /** Notified whenever a slot may have freed up (a load or unload ended, a lease was released). */
  readonly roomChanged: Signal;
  private readonly room: Room;
  /** Requests of this process waiting for room: prefetching leaves their replicas alone. */
  readonly roomWants = new RoomWants();
  /** Told after every load and unload call (metrics, status). */
  private readonly callListeners: ((r: LoadRecord) => void)[] = [];
  /** What the replica itself says before an unload. */
  readonly replicaWord: ReplicaWord;
  /** Unloads only what no lease holds and the replica, asked afresh, does not run. */
  private readonly idleUnload: IdleUnload;
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

  /** A wait for room to change, ended by RuntimeReplaced on a replaced runtime (Room.waitForRoom). */
  waitForRoom(): Promise<void> {
    return this.room.waitForRoom();
  }

  constructor(
    private readonly store: FleetStore,
    private readonly api: ReplicaApi,
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
      (url, adapter, fence, ok) => this.finish('unload', url, adapter, fence, ok),
      (r, why) => this.record(r, why),
    );
    this.room = new Room(store, clock, this.replicaWord, this.unknownNames, this.idleUnload, () =>
      this.replaced(),
    );
    this.roomChanged = this.room.changed;
  }

  /** Unloads idle adapters while `url` holds more than the limit (Room.trim). */
  trim(url: string, policy: AdapterPolicy): Promise<void> {
    return this.room.trim(url, policy);
  }

  /** Adds a listener told after every load and unload call; the others keep theirs. */
  addCallListener(fn: (r: LoadRecord) => void): void {
    this.callListeners.push(fn);
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
        if (!(await this.joinWithin(flight, deadline))) throw loadWaitRanOut(adapter.name, url);
        joined = true;
        continue;
      }
      const [view] = await this.store.views([url], adapter);
      // A placement only says where the load should happen: nobody is loading it yet.
      const state = view?.adapter?.placed ? undefined : view?.adapter?.state;
      if (state === 'loaded' || state === 'static') {
        await this.store.touch(url, adapter.name, this.clock.now());
        return joined ? 'joined' : 'hit';
      }
      if (state === 'loading' || state === 'unloading') {
        // Another process (sharing the store) is loading or unloading it: wait and look again.
        if (this.clock.now() >= deadline)
          throw state === 'loading' ? loadWaitRanOut(adapter.name, url) : errors.noRoom(adapter.name, url, 1);
        await this.roomChanged.wait(this.clock, ROOM_FALLBACK_MS);
        waited = true;
        continue;
      }
      // Someone in this process started the load while we read the store: join it.
      if (this.flights.has(key)) continue;
      this.backoff.check(key, adapter.name, url);
      // `beforeLoad` runs inside, once there is room to load into (Room.claimSlot); the flight
      // is set first, so requests here that come meanwhile join this load instead of spending.
      const load = this.load(url, adapter, policy, key, victimCost, waited, spendOnce);
      this.flights.set(key, load);
      try {
        // false: it became resident (or started loading elsewhere) while we made room; look again.
        if (await load) return 'loaded';
      } finally {
        if (this.flights.get(key) === load) this.flights.delete(key);
      }
    }
  }

  /** Waits for `flight` until `deadline` on the clock: false if the deadline came first. Its failure propagates. */
  private async joinWithin(flight: Promise<unknown>, deadline: number): Promise<boolean> {
    const left = deadline - this.clock.now();
    if (left <= 0) return false;
    let cancel = () => {};
    try {
      return await Promise.race([
        flight.then(() => true),
        new Promise<boolean>((resolve) => (cancel = this.clock.after(left, () => resolve(false)))),
      ]);
    } finally {
      cancel();
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

  /** Loads it; false if another caller claimed the adapter first. */
  private async load(
    url: string,
    adapter: AdapterRef,
    policy: AdapterPolicy,
    key: string,
    victimCost: (v: ResidentAdapter) => number,
    waited: boolean,
    beforeLoad?: () => Promise<void>,
  ): Promise<boolean> {
    if (adapter.path === undefined)
      throw errors.loadFailed(adapter.name, url, 'no path is configured for this adapter');
    // The queue timeout counts from here, including the wait for the room lock; a retry (ensure
    // looks again) gets no more than the access phase has left.
    const asked = this.clock.now();
    const deadline = Math.min(asked + policy.queueTimeoutMs, accessEnd(policy));
    // Until its slot is claimed (behind another load's room-making, or waiting for an adapter to
    // go idle) the room it waits for is no prefetch's; once claimed, it is resident (`loading`).
    const unwant = this.roomWants.add(adapter.name, [url]);
    const fence = await this.roomLock
      .run(url, () =>
        // Behind another load's room-making here: that is a wait too.
        this.room.claimSlot(
          url,
          adapter.name,
          policy,
          deadline,
          victimCost,
          waited || this.clock.now() > asked,
          beforeLoad,
        ),
      )
      .finally(unwant);
    if (fence === null) return false;
    // Held off when decided: a peer still on the old state may load the same adapter beside this one,
    // be answered "already loaded" when this lands (vLLM runs loads one by one), after the hold-off,
    // and send its request (dst seed 37497).
    const heldOffAtClaim = this.store.undoHeldOff?.(fence) ?? false;
    const started = this.clock.now();
    // Room was made until the access phase ran out of time: no load call.
    const callMs = within(policy, policy.loadTimeoutMs, this.clock.now());
    if (callMs <= 0) {
      await this.finish('load', url, adapter.name, fence, false);
      throw errors.noRoom(adapter.name, url, 1);
    }
    let outcome: LoadOutcome;
    let called = false;
    try {
      // A holder that stalled past its lock must not call the replica on stale authority.
      if (!(await this.store.holds(url, adapter.name, fence))) return false;
      const ended = this.onLoadCall?.(url, adapter.name);
      try {
        called = true;
        outcome = await this.api.loadAdapter(url, adapter.name, adapter.path, callMs);
      } finally {
        ended?.();
      }
    } catch (err) {
      // The call failed but the replica may have loaded it (the connection dropped after, the answer
      // came past the bound): its registry, read under this load's lock, says so. Landed, it is this
      // load's, and goes through the after-load checks as any; else each request until a poll
      // adopted it was failed, then held off by the backoff, with the adapter resident.
      // Listed at a path no configuration loads: the replica's start-up adapter, not this load
      // landing (dst seed 310213), static at once as after an "already loaded" for it.
      const listed =
        called && err instanceof BackendError
          ? await this.replicaWord.listedAfterLoad(
              url,
              adapter.name,
              within(policy, Infinity, this.clock.now()),
            )
          : undefined;
      if (listed === 'start-up') {
        this.backoff.clear(key);
        this.unknownNames.loaded(adapter.name);
        return this.startUp(url, adapter, fence);
      }
      if (listed === true) outcome = 'loaded';
      else return this.loadFailed(url, adapter, policy, key, fence, started, err);
    }
    return this.landed(url, adapter, policy, key, fence, started, outcome, heldOffAtClaim);
  }

  /** A load call that failed: its lock ended, the backoff told, the client's error thrown. */
  private async loadFailed(
    url: string,
    adapter: AdapterRef,
    policy: AdapterPolicy,
    key: string,
    fence: Fence,
    started: number,
    err: unknown,
  ): Promise<never> {
    const ms = this.clock.now() - started;
    await this.finish('load', url, adapter.name, fence, false);
    const why =
      err instanceof BackendError ||
      err instanceof AdapterNotFoundError ||
      err instanceof AdapterRejectedError
        ? err.message
        : String(err);
    const told = clientReason(err);
    this.backoff.fail(key, policy, told);
    this.record({ url, adapter: adapter.name, op: 'load', ok: false, ms }, why);
    if (err instanceof AdapterNotFoundError) {
      this.unknownNames.notFound(url, adapter.name, policy);
      throw errors.modelNotFound(adapter.name);
    }
    if (err instanceof AdapterRejectedError)
      throw errors.adapterRejected(adapter.name, url, rejectionReason(err.message), why);
    throw errors.loadFailed(adapter.name, url, told, why);
  }

  /** The adapter is the replica's own from its start: its lock ends with it static, the request served there. */
  private async startUp(url: string, adapter: AdapterRef, fence: Fence): Promise<boolean> {
    await this.finish('load', url, adapter.name, fence, 'static');
    return true;
  }

  /** A load the replica took (or had already): the after-load checks, then its lock ended. */
  private async landed(
    url: string,
    adapter: AdapterRef,
    policy: AdapterPolicy,
    key: string,
    fence: Fence,
    started: number,
    outcome: LoadOutcome,
    heldOffAtClaim: boolean,
  ): Promise<boolean> {
    const ms = this.clock.now() - started;
    this.backoff.clear(key);
    this.unknownNames.loaded(adapter.name);
    // "Already loaded" by the replica's own start-up registration (a name pattern matched it, and no
    // registry read since an emptied state said so): nothing of ours landed. Its request is served
    // there; the store keeps it static at once (no trim unloads it, dst seed 18826; a poll applied
    // during the load cannot make it ours; the next request finds it, no load nor room made again).
    if (
      outcome === 'already-loaded' &&
      (await this.replicaWord.registeredAtStart(
        url,
        adapter.name,
        within(policy, Infinity, this.clock.now()),
      ))
    )
      return this.startUp(url, adapter, fence);
    // "Already loaded" while this load's undo is held off (decided alone, Redis now back; a record
    // change): the copy may be a peer's load, still `loading` in the shared state, whose after-load
    // check may undo it, having seen no request of it. Looked at again there, as any request
    // would: its load under way is waited for (dst seed 1793).
    if (outcome === 'already-loaded' && this.store.undoHeldOff?.(fence)) {
      await this.finish('load', url, adapter.name, fence, true);
      this.record({ url, adapter: adapter.name, op: 'load', ok: true, ms });
      return false;
    }
    // Still `loading` in the store: no request was sent to it yet, here or on a node sharing it,
    // while its lock is this load's (asked with the replica's word, not after it: the unload must
    // go out on a fresh word).
    const checked = outcome === 'loaded' && policy.maxLoadedAdapters > 0;
    const ours = checked ? this.store.holds(url, adapter.name, fence).catch(() => false) : undefined;
    const word = checked
      ? await this.replicaWord.afterLoad(
          url,
          adapter.name,
          policy.maxLoadedAdapters,
          policy.isStatic,
          within(policy, Infinity, this.clock.now()),
        )
      : 'within';
    // Not during an unload hold-off (a record change from other state, Redis just back), at the claim or now (a peer
    // still on the old state loaded the same adapter at once, answered "already loaded", and sent
    // its request unseen here, dst seed 789), nor for a load decided alone once Redis is back (a
    // peer that also decided alone did the same, its lease now in Redis, seed 1111), nor once the
    // load's lock is no longer its own (a FLUSHALL lost it, a peer then loaded the same adapter
    // there, was answered "already loaded" and sent its request: dst seed 1018463). The trim
    // after a poll decides: it asks the leases and the replica. Nor where another runtime of this
    // process, on other state, may have a request on it, as for any unload; a runtime replaced by a
    // record change to other state never undoes: requests routed on the new state, this node's or a
    // peer's, are not in its store (a peer there loaded the adapter at once, was answered "already
    // loaded" and sent its request: dst seed 13185).
    const undo =
      word === 'undo' &&
      !heldOffAtClaim &&
      !(this.store.undoHeldOff?.(fence) ?? false) &&
      !(this.leasedElsewhere?.(url, adapter.name) ?? false) &&
      (await ours) === true;
    if (undo && (await this.undoLoad(url, adapter.name, policy, ms))) {
      await this.finish('load', url, adapter.name, fence, false);
      throw errors.noRoom(adapter.name, url, 1, 'another router took the last slot at the same moment');
    }
    await this.finish('load', url, adapter.name, fence, true);
    if (!undo) this.record({ url, adapter: adapter.name, op: 'load', ok: true, ms });
    return true;
  }

  /**
   * Unloads the adapter this call just loaded, which took the replica over the limit (the
   * replica's word, ReplicaWord.afterLoad): loads decided on different words (nodes cut off from
   * Redis, a runtime and its successor during a hand-over, a lock that lapsed) can each see the
   * last slot free. vLLM lists an adapter in `/v1/models` once `add_lora` returned, before it
   * answers the load (`load_lora_adapter` awaits `engine_client.add_lora`, then appends to
   * `lora_requests`, which `show_available_models` lists, and returns with no await between;
   * vllm/entrypoints/openai/serving_models.py at vllm 075e9ba825 and 0f1457b0e1, V0-era commits;
   * not read at a release tag), so of loads that overlap, the last to land sees them all. Its own
   * adapter is the one there no request can be on; the others may be another node's fresh load,
   * about to be used. False if the unload failed: it stays loaded, and the trim after a poll takes
   * over.
   */
  private async undoLoad(url: string, name: string, policy: AdapterPolicy, loadMs: number): Promise<boolean> {
    this.record({ url, adapter: name, op: 'load', ok: true, ms: loadMs });
    this.log.warn(
      `adapter '${name}' took ${url} over its limit of ${policy.maxLoadedAdapters}: unloading it`,
    );
    const started = this.clock.now();
    let ok = false;
    let called = false;
    let why: string | undefined;
    // Past the access deadline the excess stays for the trim after a poll.
    const callMs = within(policy, policy.loadTimeoutMs, this.clock.now());
    try {
      if (callMs <= 0) throw new Error('the access phase ran out of time before the undo');
      called = true;
      await this.api.unloadAdapter(url, name, callMs);
      ok = true;
    } catch (err) {
      why = (err as Error).message;
      // Done by the replica, its answer lost (as for IdleUnload's): ended as landed, the request
      // would be sent to an adapter the replica no longer holds. Its registry says which.
      if (
        called &&
        (await this.replicaWord.listed(url, name, within(policy, Infinity, this.clock.now()))) === false
      ) {
        ok = true;
        why = undefined;
      }
    }
    this.record({ url, adapter: name, op: 'unload', ok, ms: this.clock.now() - started }, why);
    return ok;
  }

  /** Ends a load or unload; a stale fence means another node took over, whose result stands. */
  private async finish(op: 'load', url: string, adapter: string, fence: Fence, ok: LoadEnd): Promise<void>;
  private async finish(op: 'unload', url: string, adapter: string, fence: Fence, ok: boolean): Promise<void>;
  private async finish(op: 'load' | 'unload', url: string, adapter: string, fence: Fence, ok: LoadEnd) {
    const at = this.clock.now();
    const current =
      op === 'load'
        ? await this.store.finishLoad(url, adapter, fence, ok, at)
        : await this.store.finishUnload(url, adapter, fence, ok as boolean, at);
    if (!current)
      this.log.warn(`${op} of adapter '${adapter}' on ${url} outlived its lock; the next poll reconciles it`);
  }

  private record(r: LoadRecord, why?: string): void {
    this.store
      .pushEvent({
        at: this.clock.now(),
        url: r.url,
        adapter: r.adapter,
        op: r.op,
        result: r.ok ? 'ok' : 'error',
        ms: r.ms,
        detail: why,
      })
      .catch((err: Error) => this.log.warn(`could not record ${r.op} event: ${err.message}`));
    if (r.ok) this.log.info(`${r.op}ed adapter '${r.adapter}' on ${r.url} in ${Math.round(r.ms)} ms`);
    else
      this.log.warn(
        `${r.op} of adapter '${r.adapter}' on ${r.url} failed after ${Math.round(r.ms)} ms: ${why}`,
      );
    for (const fn of this.callListeners) fn(r);
    this.roomChanged.notify();
  }
}
