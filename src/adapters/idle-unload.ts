/**
 * An unload happens only to an idle adapter, and idle takes two words: no lease holds it (the
 * store, atomically, under a fenced lock) and the replica, asked afresh after the lock was
 * taken, does not report it running or waiting. Bookkeeping can be wrong after a partition, an
 * expired lease or an emptied store; the replica knows what it runs.
 */
import type { ReplicaApi } from '../backends/replica-api';
import type { Clock } from '../clock';
import type { FleetStore } from '../fleet/store';
import type { Fence, ResidentAdapter } from '../fleet/types';
import { evictable } from './eviction';
import { OwnUnloads } from './own-unloads';
import { FRESH_WORD_ASKS, type ReplicaWord, type Withheld } from './replica-word';

/**
 * A load or unload lock outlives its replica call (bounded by the load timeout) by this much;
 * past it, a shared store lets another node take over from a holder that died or stalled.
 */
export const LOCK_MARGIN_MS = 5000;

/** What of a configuration's adapter policy an unload needs (AdapterPolicy, manager.ts). */
type UnloadPolicy = {
  loadTimeoutMs: number;
  isStatic: (name: string) => boolean;
  /** True once the caller may start nothing more (AdapterPolicy.halted). */
  halted?: () => boolean;
  /** False withholds an unload whose lock was granted (AdapterPolicy.beforeUnload). */
  beforeUnload?: () => Promise<boolean>;
};

/** An unload call made, as the manager records it (LoadRecord; CallEnds.record, call-end.ts). */
type UnloadRecord = { url: string; adapter: string; op: 'unload'; ok: boolean; ms: number };

export class IdleUnload {
  /**
   * `leasedElsewhere`: whether a request another store counts may be on an adapter (a `redis`
   * record change); `finish` ends the unload's lock; `record` reports the call.
   */
  constructor(
    private readonly store: FleetStore,
    private readonly api: ReplicaApi,
    private readonly clock: Clock,
    private readonly replicaWord: ReplicaWord,
    private readonly leasedElsewhere: () => ((url: string, adapter: string) => boolean) | null,
    /** Ends the lock; false: the store had lost it (CallEnds.finish). */
    private readonly finish: (
      url: string,
      adapter: string,
      fence: Fence,
      ok: boolean,
    ) => Promise<boolean | void>,
    private readonly record: (r: UnloadRecord, why?: string) => void,
    /** This node's unloads under way, which its decisions keep off whatever the store says. */
    private readonly own: OwnUnloads = new OwnUnloads(),
  ) {}

  /**
   * Unloads the cheapest idle adapter; false if every one is busy or moving, or the replica
   * could not be asked. Idle takes two words: no lease holds it (the store), and the replica,
   * asked afresh, does not report it running or waiting. Bookkeeping can be wrong after a
   * partition, an expired lease or an emptied store; the replica knows what it runs.
   */
  async evictOne(
    url: string,
    occupying: ResidentAdapter[],
    policy: UnloadPolicy,
    victimCost: (v: ResidentAdapter) => number,
    forAdapter: string,
    /**
     * `max_loaded_adapters` by the store's count (Room's `storeLimit`): its test of whether a room
     * made for `forAdapter` is still free, and of a trim's excess (beginUnload).
     */
    limit: number,
    /** When the caller's wait ends, on the clock: no victim is tried, asked or unloaded past it. */
    until = Infinity,
  ): Promise<boolean> {
    const idle = evictable(occupying, policy.isStatic).sort((a, b) => victimCost(a) - victimCost(b));
    // The lock covers the replica's fresh word (asked up to twice) as well as the unload call: a
    // lock that lapsed during a slow scrape would let new requests lease the adapter before the unload.
    const ttl = policy.loadTimeoutMs + FRESH_WORD_ASKS * this.replicaWord.timeoutMs() + LOCK_MARGIN_MS;
    // Adapters the replica reported busy in this round: not worth another scrape.
    const reportedBusy = new Set<string>();
    for (const victim of idle) {
      if (this.clock.now() >= until) return false;
      if (reportedBusy.has(victim.name)) continue;
      // A request of another runtime (a `redis` record change) may be on it: that store counts it.
      if (this.leasedElsewhere()?.(url, victim.name)) continue;
      // A stopped caller (a replaced runtime's trim or prefetch) asks no lock.
      if (policy.halted?.()) return false;
      // Atomic in the store: refused if a request (on any node) took a lease on it since we looked.
      const begun = this.clock.now();
      const fence = await this.store.beginUnload(url, victim.name, begun, ttl, forAdapter, limit);
      if (fence === null) continue;
      // From the grant until the lock is ended: this node's decisions keep off it (own-unloads.ts).
      this.own.begin(url, victim.name);
      try {
        const started = this.clock.now();
        let ok = false;
        let why: string | undefined;
        let withheld: Withheld['reason'] | 'lost' | 'stopped' | undefined;
        let called = false;
        try {
          if (!(await this.store.holds(url, victim.name, fence))) continue;
          // The caller's say before the replica is asked (a prefetch's budget): withheld, no call.
          if (policy.beforeUnload && !(await policy.beforeUnload())) withheld = 'stopped';
          // Asked after beginUnload: requests admitted through the store from here wait for the
          // unload, so the replica's answer covers every request that got past the router before.
          // Still ours after the scrape (a lock past its TTL hands the adapter back to requests), by
          // this node's clock against the TTL it set: a store round trip there would widen the
          // window the replica's word must cover (ReplicaWord.idleNow). The unload call follows
          // with no await.
          // Each ask, and the unload, gets no more than the wait has left.
          const asks = Math.min(this.replicaWord.timeoutMs(), (until - started) / (FRESH_WORD_ASKS + 1));
          const word =
            withheld ??
            (await this.replicaWord.idleNow(
              url,
              victim.name,
              reportedBusy,
              asks,
              () => this.clock.now() - begun < ttl - LOCK_MARGIN_MS,
            ));
          // Lost by this node's clock: no call, and ended below as not done, so the in-process store
          // (whose locks never lapse) puts it back; a shared store refuses that end past a newer fence.
          withheld = word;
          const callMs = Math.min(policy.loadTimeoutMs, until - this.clock.now());
          if (!withheld && callMs <= 0) withheld = 'stale';
          // Stopped during the replica's word: no call, the lock ended as not done.
          if (!withheld && policy.halted?.()) withheld = 'stopped';
          if (!withheld) {
            called = true;
            await this.api.unloadAdapter(url, victim.name, callMs);
            ok = true;
          }
        } catch (err) {
          why = (err as Error).message;
          // The call failed, but the replica may have unloaded it (the connection dropped after, its
          // answer came past the bound): ended as loaded, requests would be sent to an adapter the
          // replica answers 404 "does not exist" for, until a poll. Its registry, asked under the lock
          // (no load of it can start meanwhile; the read ends before the lock's TTL by this node's
          // clock), says which; unlisted, the unload stands.
          const left = Math.min(until, begun + ttl) - this.clock.now();
          if (called && (await this.replicaWord.listed(url, victim.name, left)) === false) {
            ok = true;
            why = undefined;
          }
        }
        const current = await this.finish(url, victim.name, fence, ok);
        // Done; `false`: the store had lost the lock (a reset after the grant), it may still read `loaded`.
        if (ok) this.own.ended(url, victim.name, this.clock.now(), current !== false);
        // No call was made: the adapter stays loaded. A replica that cannot be asked now, or whose
        // word comes back too late to act on, gets no unload at all (its callers wait for room, as
        // for busy leases).
        if (withheld === 'unreachable' || withheld === 'stale' || withheld === 'stopped') return false;
        if (withheld) continue;
        this.record({ url, adapter: victim.name, op: 'unload', ok, ms: this.clock.now() - started }, why);
        if (ok) return true;
      } finally {
        this.own.end(url, victim.name);
      }
    }
    return false;
  }
}
