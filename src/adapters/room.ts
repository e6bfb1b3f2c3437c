import type { Clock } from '../clock';
import { errors } from '../errors';
import type { FleetStore } from '../fleet/store';
import type { Fence, ResidentAdapter } from '../fleet/types';
import { Signal } from '../signal';
import { PlacedElsewhere } from './claims';
import { RoomQueue } from './room-queue';
import { occupyingSlots } from './eviction';
import { IdleUnload, LOCK_MARGIN_MS } from './idle-unload';
import { accessEnd, CallerStopped, within, type AdapterPolicy } from './policy';
import type { ReplicaWord } from './replica-word';
import type { UnknownNames } from './unknown-names';

/** How long a wait for room sleeps without a signal (changes made by other processes). */
export const ROOM_FALLBACK_MS = 250;
/** What a trimming unload makes room for: no adapter name can be this. */
const EXCESS = '\u0000excess';

/**
 * Thrown by a wait for room (or for a replica with room) on a runtime replaced by a `redis` record
 * change to other state: there no unload will make room (the new runtime may admit a request on
 * any adapter, unseen here), and the new runtime unloads nothing while this decision runs (its
 * hold-off), so the wait could only end at `queue_timeout_ms` (seed 16974). The decision gives
 * back what it took here and is decided again on the runtime current now (RouterService.route).
 */
export class RuntimeReplaced extends Error {
  constructor() {
    super('the runtime was replaced while the request waited for room: decided again on the new one');
  }
}

/**
 * `max_loaded_adapters` by the store's count (beginLoad, beginUnload), which takes configured static
 * adapters loaded at runtime for non-static ones and lacks what the replica holds unseen (an emptied
 * store): those slots are taken too, or two nodes sharing the store each load into the one slot left.
 */
function storeLimit(residents: readonly ResidentAdapter[], policy: AdapterPolicy, unseenN: number): number {
  const configuredStatic = residents.filter((r) => r.state !== 'static' && policy.isStatic(r.name));
  return policy.maxLoadedAdapters + configuredStatic.length - unseenN;
}

/**
 * A replica's slots: a free one claimed for a load (room made among idle adapters, or waited
 * for), and the excess over the limit trimmed. Every unload goes through IdleUnload's guards.
 */
export class Room {
  /** Notified whenever a slot may have freed up (a load or unload ended, a lease was released). */
  readonly changed = new Signal();
  /** Loads queued behind a room lock here, each done waiting once its adapter is read resident. */
  readonly queued = new RoomQueue();

  constructor(
    private readonly store: FleetStore,
    private readonly clock: Clock,
    private readonly replicaWord: ReplicaWord,
    private readonly unknownNames: UnknownNames,
    private readonly idleUnload: IdleUnload,
    /** Whether this runtime was replaced by one on other state (RuntimeReplaced). */
    private readonly replaced: () => boolean = () => false,
  ) {}

  /**
   * Waits for room to change (a release, a load or unload ended here or on another node), at most
   * ROOM_FALLBACK_MS; on a runtime replaced by one on other state, throws RuntimeReplaced instead:
   * no room will come here. Every wait for room goes through this (placement's too).
   */
  async waitForRoom(): Promise<void> {
    if (this.replaced()) throw new RuntimeReplaced();
    await this.changed.wait(this.clock, ROOM_FALLBACK_MS);
  }

  /**
   * Under the replica's room lock: unload the cheapest idle adapters until a slot is
   * free, then claim it (state `loading`). Waits for an adapter to go idle up to the queue
   * timeout. Returns the load's fence, or null if the adapter became resident meanwhile.
   * `spend` (the cold-load budget, which may refuse by throwing; the manager runs it once per
   * call) comes just before a free slot is claimed: a request refused for want of a slot starts
   * no load, so it spends nothing (a 30-minute fault run spent the whole budget so: 28 loads in
   * 30 minutes, 15,049 requests refused 429). Not before an unload either, which the replica may
   * still refuse (it runs requests the leases do not show). So a request the budget refuses may
   * have unloaded an idle adapter: the slot stays free for the next load, without unloading again.
   */
  async claimSlot(
    url: string,
    name: string,
    policy: AdapterPolicy,
    deadline: number,
    victimCost: (v: ResidentAdapter) => number,
    waited: boolean,
    spend?: () => Promise<void>,
  ): Promise<Fence | null> {
    const ttl = policy.loadTimeoutMs + LOCK_MARGIN_MS;
    for (;;) {
      const residents = await this.store.residents(url);
      this.queued.seen(url, residents);
      if (residents.some((r) => r.name === name)) return null;
      const occupying = occupyingSlots(residents, policy.isStatic);
      // The replica's last word on loads too: after an emptied store or a load by a node cut
      // off from it, the replica can hold adapters the store has never seen.
      const unseen =
        occupying.length < policy.maxLoadedAdapters
          ? await this.replicaWord.occupied(
              url,
              name,
              new Set(residents.map((r) => r.name)),
              policy.isStatic,
              within(policy, Infinity, this.clock.now()),
            )
          : undefined;
      const unseenN = unseen?.length ?? 0;
      const limit = storeLimit(residents, policy, unseenN);
      if (occupying.length + unseenN < policy.maxLoadedAdapters) {
        // The store checks the limit again atomically: another node may have taken the slot.
        if (waited && policy.recheckPlacement) {
          const placedOn = await policy.recheckPlacement();
          if (placedOn !== url) throw new PlacedElsewhere(name, placedOn);
          waited = false;
        }
        await spend?.();
        // The caller's lease kept young before the load (AdapterPolicy.keepLease): it lands under it.
        const kept = policy.keepLease?.();
        if (kept) await kept;
        // Stopped (a replaced runtime's prefetch) while it waited here: no lock asked.
        if (policy.halted?.()) throw new CallerStopped('load', name, url);
        const fence = await this.store.beginLoad(url, name, this.clock.now(), limit, ttl);
        if (fence !== null) return fence;
        // Refused: another node took the slot (the next read sees it full), or the store does not
        // know the replica (an emptied Redis before it is registered again), where every read says
        // free and every load is refused: a 503, not a retry without end.
        if ((await this.store.views([url])).length === 0)
          throw errors.noRoom(name, url, 1, 'the fleet state does not know this replica right now');
        continue;
      }
      // Full, by the store's count or the replica's own word: make room among what the store
      // knows (the usual unload path, which asks the replica what runs), else wait until a poll
      // adopts what the replica holds unseen.
      this.unknownNames.check(url, name, policy);
      // Tried even with no queue time left (a 0 wait), as long as the access phase has time.
      const victims = policy.mayEvict ? occupying.filter((r) => policy.mayEvict!(r.name)) : occupying;
      // The store's limit too: a room made for `name` is still free below it (one unload per load).
      if (await this.idleUnload.evictOne(url, victims, policy, victimCost, name, limit, accessEnd(policy))) {
        waited = true;
        continue;
      }
      if (this.clock.now() >= deadline) {
        throw errors.noRoom(name, url, Math.max(1, Math.ceil(policy.queueTimeoutMs / 1000)));
      }
      // No slot claimed yet, so nothing to undo here: the caller gives its lease back.
      await this.waitForRoom();
      waited = true;
      // The caller's lease kept young (the loads queued behind this lock keep theirs: AdapterManager.ensure).
      const kept = policy.keepLease?.();
      if (kept) await kept;
    }
  }

  /**
   * Unloads idle adapters while `url` holds more than the limit (a load that timed out landed
   * later, two nodes took the last slot at once, a poll adopted what an emptied store forgot):
   * the limit holds again on the poll that sees it, once the excess is idle. Not behind the room
   * lock, which a load waiting for room holds up to the queue timeout: each unload is decided
   * atomically in the store (its fence), and a load's own check of the limit follows it.
   */
  async trim(url: string, policy: AdapterPolicy): Promise<void> {
    for (;;) {
      const residents = await this.store.residents(url);
      const occupying = occupyingSlots(residents, policy.isStatic);
      if (occupying.length <= policy.maxLoadedAdapters) return;
      // One trimming unload at a time per replica across nodes (they may all trim after a poll), each
      // granted only while the store's count is over its limit (this reading may be stale). Nothing
      // unseen is taken off: the poll before the trim adopted what the replica holds, and this loop
      // stops at the limit by what the store knows.
      const limit = storeLimit(residents, policy, 0);
      if (!(await this.idleUnload.evictOne(url, occupying, policy, (v) => v.lastUsed, EXCESS, limit))) return;
    }
  }
}
