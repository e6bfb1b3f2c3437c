/**
 * The load and unload locks this node ended in the shared store, kept until each lock's TTL has
 * passed: a server that missed the last writes (a Sentinel switch, a restart from a snapshot)
 * may still hold one of them, so the adapter reads `loading` or `unloading` there until the TTL
 * while the replica has finished (dst seed 1002201: a finished load lost, a request alone on an
 * idle fleet waited 7 s for it and got a 503). Each end is sent again once the server is found
 * changed; the fence makes it a no-op where the lock is gone or another holder has it. A load's end
 * is sent as `'replayed'`: its lock ends, but the adapter is forgotten there (and marked gone) rather
 * than marked `loaded`, since the replica may have changed since (dst seed 1534246: another node
 * unloaded it, that end lost too, and a request proxied onto the unload); the next poll begun after
 * it reads what the replica holds.
 * Why a switch can lose acknowledged writes: "Redis replication is asynchronous" (redis/redis
 * `redis.conf`, REPLICATION section, point 1, at tag 7.0.15, the `redis-server` the tests run, and
 * the same at 8.0.0), so a promoted replica may lack the primary's last writes.
 */
import type { Clock } from '../../clock';
import { Signal } from '../../signal';
import type { LoadEnd } from '../store';
import type { Fence } from '../types';
import type { SharedStore } from './shared-store';

type EndedLock = {
  url: string;
  adapter: string;
  fence: Fence;
  /** On this node's clock: past it the lock has expired in the shared store anyway. */
  until: number;
} & ({ op: 'load'; ok: LoadEnd } | { op: 'unload'; ok: boolean }); // a load's `ok` is not sent again

export class EndedLocks {
  /** TTL end of each lock this node holds in the shared store, by fence. */
  private readonly begun = new Map<Fence, number>();
  private ended: EndedLock[] = [];
  /**
   * Ends adopted from a predecessor since the last replay began: a recovery past its replay sends
   * them in its last pass, as `adopt` would have had this node shared decisions (not this node's
   * own ends: one made during that pass waits for the recovery's end and goes to the shared store).
   */
  private fresh = false;
  /** Told at each end of a lock: a leaving store waits for the last (`endOrAfter`). */
  private readonly ends = new Signal();

  constructor(private readonly clock: Clock) {}

  /** Locks asked of the shared store and not answered yet (`asked`). */
  private asking = 0;

  /** Whether a lock is asked, or begun in the shared store and neither ended here nor past its TTL. */
  get open(): boolean {
    this.forgetExpired();
    return this.asking > 0 || this.begun.size > 0;
  }

  /** `begin` of the lock `ask` is granted, counted open while asked: a leaving store waits for it too. */
  async asked(ask: Promise<Fence | null>, ttlMs: number): Promise<Fence | null> {
    this.asking++;
    try {
      return this.begin(await ask, ttlMs);
    } finally {
      this.asking--;
      this.ends.notify();
    }
  }

  /** Resolves at the next end of a lock, or after `ms`. */
  endOrAfter(ms: number): Promise<void> {
    return this.ends.wait(this.clock, ms);
  }

  /** A lock this node was granted in the shared store, for `ttlMs` (a local one's fence is negative). */
  begin(fence: Fence | null, ttlMs: number): Fence | null {
    if (fence === null || fence <= 0) return fence;
    this.begun.set(fence, this.clock.now() + ttlMs);
    this.handedOutAgain(fence);
    return fence;
  }

  /**
   * `fence` was handed out again to a lock of this node (here, or in another store of this node on
   * this state: FailoverFleetStore `grantedHere`), a server that lost the old lock with its counter
   * rolled back: the end owed for the old lock would end the new one, which the scripts take as
   * this node's own.
   */
  handedOutAgain(fence: Fence): void {
    this.ended = this.ended.filter((e) => e.fence !== fence);
  }

  /** The shared store took this end of a lock begun there. */
  end(op: 'load', url: string, adapter: string, fence: Fence, ok: LoadEnd, _at?: number): void;
  end(op: 'unload', url: string, adapter: string, fence: Fence, ok: boolean, _at?: number): void;
  end(op: EndedLock['op'], url: string, adapter: string, fence: Fence, ok: LoadEnd): void {
    const until = this.begun.get(fence);
    this.begun.delete(fence);
    this.ends.notify();
    if (until === undefined) return;
    this.forgetExpired();
    this.ended.push({ op, url, adapter, fence, ok, until } as EndedLock);
  }

  /** Whether ends were adopted since the last replay began. */
  get unsent(): boolean {
    return this.fresh;
  }

  /** Takes the ends and begun locks of a runtime replaced on the same state: it never replays them itself. */
  adopt(pred: EndedLocks): void {
    // One node id: an end owed under a fence handed out again to a lock the other runtime holds
    // would end that lock, as in `begin` (test/core/failover-review-57.test.ts).
    const theirs = pred.ended.filter((e) => !this.begun.has(e.fence));
    this.ended = this.ended.filter((e) => !pred.begun.has(e.fence));
    for (const [fence, until] of pred.begun) this.begun.set(fence, until);
    if (theirs.length > 0) this.fresh = true;
    this.ended.push(...theirs);
    pred.begun.clear();
    pred.ended = [];
  }

  /** Sends each end again whose lock may still be held in `shared`. */
  async replay(shared: SharedStore): Promise<void> {
    this.fresh = false;
    this.forgetExpired();
    for (const e of [...this.ended]) {
      // Dropped while an earlier one was on its way: its fence handed out again meanwhile.
      if (!this.ended.includes(e)) continue;
      const at = this.clock.now();
      // Only if the lock there is this node's: another node's under the same fence is not this end's.
      // A load's end is old news by now: the replica may have changed since (another node unloaded
      // the adapter, that end lost too: dst seed 1534246). Its lock ends, the adapter gone.
      if (e.op === 'load') await shared.finishLoad(e.url, e.adapter, e.fence, 'replayed', at, true);
      else await shared.finishUnload(e.url, e.adapter, e.fence, e.ok, at, true);
    }
  }

  /**
   * Whether an end of a lock on `url` may still be owed (within its TTL: a server restored from an
   * older copy may hold the lock). Past it the end is dropped here: kept until the next lock's
   * end, it named a replica that left for good on a node that loads no more (dst/process-audit.ts,
   * seed 3120006).
   */
  owes(url: string): boolean {
    this.forgetExpired();
    return this.ended.some((e) => e.url === url);
  }

  private forgetExpired(): void {
    const now = this.clock.now();
    this.ended = this.ended.filter((e) => e.until > now);
    for (const [fence, until] of this.begun) if (until <= now) this.begun.delete(fence);
  }
}
