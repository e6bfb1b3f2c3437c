import type { Clock } from '../clock';
import { BackendError } from '../backends/errors';
import { AdapterNotFoundError, AdapterRejectedError } from '../backends/replica-api';
import type { LoadOutcome, ReplicaApi } from '../backends/replica-api';
import { errors } from '../errors';
import type { FleetStore } from '../fleet/store';
import type { AdapterRef, Fence, ResidentAdapter } from '../fleet/types';
import type { Logger } from '../log';
import type { LoadBackoff } from './backoff';
import type { OwnUnloads } from './own-unloads';
import type { CallEnds } from './call-end';
import { clientReason, rejectionReason } from './load-failures';
import { accessEnd, CallerStopped, within, type AdapterPolicy } from './policy';
import type { ReplicaWord } from './replica-word';
import type { Room } from './room';
import type { RoomWants } from './room-wants';
import type { UnknownNames } from './unknown-names';

/** What a load call uses: the manager's parts, and its hooks read at each call (set after it is built). */
export type LoadCallParts = {
  store: FleetStore;
  api: ReplicaApi;
  clock: Clock;
  log: Logger;
  room: Room;
  roomWants: RoomWants;
  replicaWord: ReplicaWord;
  backoff: LoadBackoff;
  unknownNames: UnknownNames;
  ends: CallEnds;
  /** AdapterManager.leasedElsewhere, as it is now. */
  leasedElsewhere: () => ((url: string, adapter: string) => boolean) | null;
  /** AdapterManager.onLoadCall, as it is now. */
  onLoadCall: () => ((url: string, adapter: string) => (() => void) | undefined) | null;
  /** This node's unloads under way (an undo of its own load is one): its decisions keep off them. */
  ownUnloads: OwnUnloads;
};

/**
 * A load call's whole life, for AdapterManager.ensure (which keeps the single flight and the
 * backoff check): room claimed under the room lock, the replica called, then the failure, the
 * replica's own start-up adapter, or the after-load checks (and the undo of a load over the limit).
 */
export class LoadCalls {
  constructor(private readonly p: LoadCallParts) {}

  /** Loads it; false if another caller claimed the adapter first. */
  async load(
    url: string,
    adapter: AdapterRef,
    policy: AdapterPolicy,
    victimCost: (v: ResidentAdapter) => number,
    waited: boolean,
    beforeLoad?: () => Promise<void>,
  ): Promise<boolean> {
    if (adapter.path === undefined)
      throw errors.loadFailed(adapter.name, url, 'no path is configured for this adapter');
    // The queue timeout counts from here, including the wait for the room lock; a retry (ensure
    // looks again) gets no more than the access phase has left.
    const asked = this.p.clock.now();
    const deadline = Math.min(asked + policy.queueTimeoutMs, accessEnd(policy));
    // Until its slot is claimed (behind another load's room-making, or waiting for an adapter to
    // go idle) the room it waits for is no prefetch's; once claimed, it is resident (`loading`).
    const unwant = this.p.roomWants.add(adapter.name, [url]);
    const fence = await this.p.room.queued
      .claim(url, adapter.name, () =>
        // Behind another load's room-making here: that is a wait too.
        this.p.room.claimSlot(
          url,
          adapter.name,
          policy,
          deadline,
          victimCost,
          waited || this.p.clock.now() > asked,
          beforeLoad,
        ),
      )
      .finally(unwant);
    if (fence === null) return false;
    // Held off when decided: a peer still on the old state may load the same adapter beside this one,
    // be answered "already loaded" when this lands (vLLM runs loads one by one), after the hold-off,
    // and send its request (dst seed 37497).
    const heldOffAtClaim = this.p.store.undoHeldOff?.(fence) ?? false;
    const started = this.p.clock.now();
    // Room was made until the access phase ran out of time: no load call.
    const callMs = within(policy, policy.loadTimeoutMs, this.p.clock.now());
    if (callMs <= 0) {
      await this.p.ends.finish('load', url, adapter.name, fence, false);
      throw errors.noRoom(adapter.name, url, 1);
    }
    let outcome: LoadOutcome;
    let called = false;
    try {
      // A holder that stalled past its lock must not call the replica on stale authority.
      if (!(await this.p.store.holds(url, adapter.name, fence))) return false;
      // Stopped since its lock was granted (a replaced runtime's prefetch): no call, the lock ended.
      if (policy.halted?.()) {
        await this.p.ends.finish('load', url, adapter.name, fence, false);
        throw new CallerStopped('load', adapter.name, url);
      }
      const ended = this.p.onLoadCall()?.(url, adapter.name);
      try {
        called = true;
        policy.loadCalled?.();
        outcome = await this.p.api.loadAdapter(url, adapter.name, adapter.path, callMs);
      } finally {
        ended?.();
      }
    } catch (err) {
      if (err instanceof CallerStopped) throw err;
      // The call failed but the replica may have loaded it (the connection dropped after, the answer
      // came past the bound): its registry, read under this load's lock, says so. Landed, it is this
      // load's, and goes through the after-load checks as any; else each request until a poll
      // adopted it was failed, then held off by the backoff, with the adapter resident.
      // Listed at a path no configuration loads: the replica's start-up adapter, not this load
      // landing (dst seed 310213), static at once as after an "already loaded" for it.
      const listed =
        called && err instanceof BackendError
          ? await this.p.replicaWord.listedAfterLoad(
              url,
              adapter.name,
              within(policy, Infinity, this.p.clock.now()),
            )
          : undefined;
      if (listed === 'start-up') {
        this.p.backoff.clear(url, adapter.name);
        this.p.unknownNames.loaded(adapter.name);
        return this.startUp(url, adapter, fence);
      }
      if (listed === true) outcome = 'loaded';
      else return this.loadFailed(url, adapter, policy, fence, started, err);
    }
    return this.landed(url, adapter, policy, fence, started, outcome, heldOffAtClaim);
  }

  /** A load call that failed: its lock ended, the backoff told, the client's error thrown. */
  private async loadFailed(
    url: string,
    adapter: AdapterRef,
    policy: AdapterPolicy,
    fence: Fence,
    started: number,
    err: unknown,
  ): Promise<never> {
    const ms = this.p.clock.now() - started;
    await this.p.ends.finish('load', url, adapter.name, fence, false);
    const why =
      err instanceof BackendError ||
      err instanceof AdapterNotFoundError ||
      err instanceof AdapterRejectedError
        ? err.message
        : String(err);
    const told = clientReason(err);
    // A name not found that nobody has seen load is held off here and refused as before, not sent
    // to the next replica: there it would most likely not be found either, after evicting for it
    // (the unknown-name hold, unknown-names.ts). A known name may be missing from this replica only.
    const elsewhere =
      !(err instanceof AdapterNotFoundError) || this.p.unknownNames.known(adapter.name, policy);
    this.p.backoff.fail(url, adapter.name, policy, told, elsewhere);
    this.p.ends.record({ url, adapter: adapter.name, op: 'load', ok: false, ms }, why);
    if (err instanceof AdapterNotFoundError) {
      this.p.unknownNames.notFound(url, adapter.name, policy);
      throw errors.modelNotFound(adapter.name);
    }
    if (err instanceof AdapterRejectedError)
      throw errors.adapterRejected(adapter.name, url, rejectionReason(err.message), why);
    throw errors.loadFailed(adapter.name, url, told, why);
  }

  /** The adapter is the replica's own from its start: its lock ends with it static, the request served there. */
  private async startUp(url: string, adapter: AdapterRef, fence: Fence): Promise<boolean> {
    await this.p.ends.finish('load', url, adapter.name, fence, 'static');
    return true;
  }

  /** A load the replica took (or had already): the after-load checks, then its lock ended. */
  private async landed(
    url: string,
    adapter: AdapterRef,
    policy: AdapterPolicy,
    fence: Fence,
    started: number,
    outcome: LoadOutcome,
    heldOffAtClaim: boolean,
  ): Promise<boolean> {
    const ms = this.p.clock.now() - started;
    this.p.backoff.clear(url, adapter.name);
    this.p.unknownNames.loaded(adapter.name);
    // "Already loaded" by the replica's own start-up registration (a name pattern matched it, and no
    // registry read since an emptied state said so): nothing of ours landed. Its request is served
    // there; the store keeps it static at once (no trim unloads it, dst seed 18826; a poll applied
    // during the load cannot make it ours; the next request finds it, no load nor room made again).
    if (
      outcome === 'already-loaded' &&
      (await this.p.replicaWord.registeredAtStart(
        url,
        adapter.name,
        within(policy, Infinity, this.p.clock.now()),
      ))
    )
      return this.startUp(url, adapter, fence);
    // "Already loaded" while this load's undo is held off (decided alone, Redis now back; a record
    // change): the copy may be a peer's load, still `loading` in the shared state, whose after-load
    // check may undo it, having seen no request of it. Looked at again there, as any request
    // would: its load under way is waited for (dst seed 1793).
    if (outcome === 'already-loaded' && this.p.store.undoHeldOff?.(fence)) {
      await this.p.ends.finish('load', url, adapter.name, fence, true);
      this.p.ends.record({ url, adapter: adapter.name, op: 'load', ok: true, ms });
      return false;
    }
    // Still `loading` in the store: no request was sent to it yet, here or on a node sharing it,
    // while its lock is this load's (asked with the replica's word, not after it: the unload must
    // go out on a fresh word).
    const checked = outcome === 'loaded' && policy.maxLoadedAdapters > 0;
    const ours = checked ? this.p.store.holds(url, adapter.name, fence).catch(() => false) : undefined;
    const word = checked
      ? await this.p.replicaWord.afterLoad(
          url,
          adapter.name,
          policy.maxLoadedAdapters,
          policy.isStatic,
          within(policy, Infinity, this.p.clock.now()),
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
      !(this.p.store.undoHeldOff?.(fence) ?? false) &&
      !(this.p.leasedElsewhere()?.(url, adapter.name) ?? false) &&
      (await ours) === true;
    if (undo) {
      // Under way until the load's lock is ended: a reset meanwhile may have the store read it `loaded`.
      const own = this.p.ownUnloads;
      own.begin(url, adapter.name);
      try {
        if (await this.undoLoad(url, adapter.name, policy, ms)) {
          const recorded = await this.p.ends.finish('load', url, adapter.name, fence, false);
          own.ended(url, adapter.name, this.p.clock.now(), recorded);
          throw errors.noRoom(adapter.name, url, 1, 'another router took the last slot at the same moment');
        }
      } finally {
        own.end(url, adapter.name);
      }
    }
    // The leases of the requests it is for (its caller's, its joiners') kept young before it turns
    // `loaded`, a fresh one awaited (the timer's are not): a lease aged out under it left the adapter
    // idle, for another waiter to unload before its request was sent. A keep that fails is no failure
    // of the load, which the replica took: its lock is ended.
    const kept = policy.keepLease?.();
    if (kept)
      await kept.catch((err: Error) => this.p.log.warn(`could not keep a lease young: ${err.message}`));
    await this.p.ends.finish('load', url, adapter.name, fence, true);
    if (!undo) this.p.ends.record({ url, adapter: adapter.name, op: 'load', ok: true, ms });
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
    this.p.ends.record({ url, adapter: name, op: 'load', ok: true, ms: loadMs });
    this.p.log.warn(
      `adapter '${name}' took ${url} over its limit of ${policy.maxLoadedAdapters}: unloading it`,
    );
    const started = this.p.clock.now();
    let ok = false;
    let called = false;
    let why: string | undefined;
    // Past the access deadline the excess stays for the trim after a poll.
    const callMs = within(policy, policy.loadTimeoutMs, this.p.clock.now());
    try {
      if (callMs <= 0) throw new Error('the access phase ran out of time before the undo');
      called = true;
      await this.p.api.unloadAdapter(url, name, callMs);
      ok = true;
    } catch (err) {
      why = (err as Error).message;
      // Done by the replica, its answer lost (as for IdleUnload's): ended as landed, the request
      // would be sent to an adapter the replica no longer holds. Its registry says which.
      if (
        called &&
        (await this.p.replicaWord.listed(url, name, within(policy, Infinity, this.p.clock.now()))) === false
      ) {
        ok = true;
        why = undefined;
      }
    }
    this.p.ends.record({ url, adapter: name, op: 'unload', ok, ms: this.p.clock.now() - started }, why);
    return ok;
  }
}
