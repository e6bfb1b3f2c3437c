/**
 * The leases this node holds and where each was taken, so that each is released in the store
 * that counts it: local leases are re-taken in the shared store on recovery (or after it was
 * found emptied), and shared releases that failed are replayed there. This list is the truth
 * about this node's leases: pruning keeps in the shared state only what `held` names.
 */
import type { Clock } from '../../clock';
import { LEASE_CEILING } from '../memory-leases';
import type { MemoryFleetStore } from '../memory-store';
import { RETAKE_BATCH } from '../store';
import type { Lease, Released } from '../types';
import type { SharedStore } from './shared-store';

/**
 * How long this node remembers an open lease whose release never came (Kong skipped its log
 * phase): bounds memory only; the stores reclaim such leases after `lease_max_age_ms`.
 */
const OPEN_LEASE_MEMORY_MS = 24 * 3600_000;

/** A lease this node holds. `uncertain`: local, its shared acquire failed without an answer, so it may have run in Redis. */
export interface HeldLease {
  lease: Lease;
  shared: boolean;
  uncertain?: boolean;
  /**
   * The link of a call taking it in the shared store that got no answer (its acquire, or a retake:
   * `retakeUnanswered`): its release goes there too, behind that call, which may still land after
   * a release sent over another link. Cleared once a later retake over that link answers.
   */
  unansweredOn?: SharedStore;
}

export class HeldLeases {
  /** Leases this node holds, and where: released in the store that took them. */
  readonly mine = new Map<string, HeldLease>();
  /**
   * Leases whose shared acquire or release is under way (not in `mine`, or out of it already):
   * a prune sent meanwhile must keep them, or it could drop one just taken.
   */
  readonly acquiring = new Set<string>();
  readonly releasing = new Set<string>();
  /** Shared releases that failed: replayed when the shared store returns. */
  readonly pendingReleases = new Set<string>();

  constructor(
    private readonly local: MemoryFleetStore,
    private readonly clock: Clock,
  ) {}

  /** Every lease id this node may hold in the shared state (a predecessor's aside). */
  ids(): string[] {
    return [...this.mine.keys(), ...this.acquiring, ...this.releasing];
  }

  holdsLocal(): boolean {
    for (const m of this.mine.values()) if (!m.shared) return true;
    return false;
  }

  async replayReleases(shared: SharedStore): Promise<void> {
    for (const id of [...this.pendingReleases]) {
      await shared.release(id, this.clock.now());
      this.pendingReleases.delete(id);
    }
  }

  /**
   * Takes this node's open leases in `shared` (again); local ones move there. `onlyLocal`: those
   * not counted there yet (admitted while degraded). One call per RETAKE_BATCH leases, not per
   * lease: a link cut between two calls left those after it counted nowhere (dst seed 72667).
   */
  async restore(shared: SharedStore, onlyLocal: boolean): Promise<void> {
    const due = [...this.mine].filter(([, m]) => !onlyLocal || !m.shared);
    for (let i = 0; i < due.length; i += RETAKE_BATCH) {
      const batch = due.slice(i, i + RETAKE_BATCH).filter(([id, m]) => this.mine.get(id) === m); // not ended meanwhile
      if (batch.length === 0) continue;
      let refusedIds: string[];
      try {
        refusedIds = await retake(
          shared,
          batch.map(([, m]) => m.lease),
        );
      } catch (err) {
        await this.retakeUnanswered(shared, batch);
        throw err;
      }
      const refused = new Set(refusedIds);
      for (const [id, m] of batch) {
        // Reclaimed by age by a node's expiry sweep: it stays so (its store forgot it; a local copy goes too).
        if (refused.has(id)) {
          if (this.mine.get(id) === m) this.mine.delete(id);
          if (!m.shared) await this.local.release(id, this.clock.now());
          continue;
        }
        // Its request may have ended while the shared copy was being taken.
        if (this.mine.get(id) !== m) {
          await shared.release(id, this.clock.now());
          continue;
        }
        // Answered on the link of an unanswered call taking it: that call has run there, or never will.
        if (m.unansweredOn === shared) m.unansweredOn = undefined;
        if (m.shared) continue;
        m.shared = true;
        await this.local.release(id, this.clock.now());
      }
    }
  }

  /**
   * A retake that failed without an answer (a timeout) may still run in Redis: ioredis's
   * `commandTimeout` only rejects the caller's promise, the command stays written on its connection
   * and its reply is read in turn (ioredis v5.11.1, lib/Command.ts `setTimeout`). A lease of the batch that ended meanwhile was released where it was held
   * only (or over another store's link, ahead of the retake): its release goes on this link, behind
   * the retake, so whichever lands it stays open nowhere. Before, a superseded store's reclaim whose
   * retake landed after its successor's prune left it open until lease_max_age_ms
   * (test/core/hand-back-close.test.ts). One still held may be counted there now: its release goes
   * on this link too once it ends (`unansweredOn`), shared or not. Before, a local one's waited in
   * `pendingReleases`, which a successor adopts and sends over its own link, and a shared one's went
   * over its store's link: each ahead of the retake (test/core/review-61.test.ts).
   */
  async retakeUnanswered(shared: SharedStore, batch: [string, HeldLease][]): Promise<void> {
    const ended: string[] = [];
    for (const [id, m] of batch) {
      if (this.mine.get(id) !== m) ended.push(id);
      else {
        if (!m.shared) m.uncertain = true;
        m.unansweredOn = shared;
      }
    }
    const now = this.clock.now();
    await Promise.all(ended.map((id) => this.releaseOn(shared, id, now)));
  }

  /**
   * Releases `id` on the link `shared`, with the upstream's `status` if any; no answer: replayed
   * when the shared store answers again (a release twice is none: the one that finds it counts the
   * status and answers; test/core/review-62b.test.ts).
   */
  async releaseOn(
    shared: SharedStore,
    id: string,
    at: number,
    status?: number,
  ): Promise<Released | undefined> {
    return shared.release(id, at, status).catch(() => {
      this.pendingReleases.add(id);
      return undefined;
    });
  }

  /**
   * Forgotten here once a store reclaimed it (a lease the replica reports running is renewed and
   * may outlive lease_max_age_ms), or once LEASE_CEILING max ages old (by this node's clock, as
   * it was taken): every store has reclaimed it by then, but another node's sweep tells only that
   * node, and Redis forgets the reclaim 4 max ages later; kept, the next recovery took the orphan
   * again and counted it anew. A day at most whatever happened.
   */
  forgetExpired(local: Lease[], shared: Lease[], now: number, maxAgeMs: number): void {
    for (const l of local) if (this.mine.get(l.id)?.shared === false) this.mine.delete(l.id);
    for (const l of shared) if (this.mine.get(l.id)?.shared) this.mine.delete(l.id);
    const ceiling = Math.min(OPEN_LEASE_MEMORY_MS, LEASE_CEILING * maxAgeMs);
    for (const [id, m] of this.mine) if (now - m.lease.at >= ceiling) this.mine.delete(id);
  }

  /** Takes the releases `pred` (the same node on the same state) still had to replay. */
  adopt(pred: HeldLeases): void {
    for (const id of pred.pendingReleases) this.pendingReleases.add(id);
    pred.pendingReleases.clear();
  }
}

/**
 * Takes `leases` (at most RETAKE_BATCH) again in `shared`, in one call; the ids its expiry sweep
 * reclaimed (see FleetStore.retake). A store without `retake`: one `acquire` each.
 */
export async function retake(shared: SharedStore, leases: readonly Lease[]): Promise<string[]> {
  if (shared.retake) return shared.retake(leases);
  for (const l of leases) await shared.acquire(l);
  return [];
}
