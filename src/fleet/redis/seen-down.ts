/**
 * What a node that decided alone owes the shared store about the replicas it saw down meanwhile:
 * its polls then reached its local store only (dst seeds 1025140, 1039269). And those it saw up:
 * else the shared store kept a down heard before the node was cut off, and with every replica
 * read down the health filter failed open onto one really down (dst seed 503368).
 */
import { monotonic, type Clock } from '../../clock';
import type { MemoryFleetStore } from '../memory-store';
import type { ReplicaSnapshot } from '../types';
import type { SharedStore } from './shared-store';
import { SKEW_MARGIN_MS } from './scripts/prelude';

/**
 * Hands the shared store each replica the local store holds down, as a failed poll begun when its
 * newest poll began (after deciding alone, each it holds up too, as an up verdict without figures,
 * `verdictOnly`), dated here on the shared clock: the shared store keeps it only if no poll it
 * applied began later. Left to the store to date by when it runs the call, a push that reached it
 * late looked newer than another node's up poll begun after the down one, and the shared state
 * said a healthy replica down until the next poll.
 *
 * Both errors matter. Too late, that newer poll is overwritten; too early, the push loses to this
 * node's own up poll before the down one (the seeds' bug). So the start is the shared clock read
 * now, less the local time since the down poll began and a margin (never later than the truth,
 * however slow the read), but never before the shared start of this node's last poll that began
 * no later and carried one (`note`): that one the shared store may hold, and it is older news.
 * The local time since is measured on the monotonic clock where the poll noted its start there
 * (`monoStartedAt`): on the wall clock, a step during the outage (a skew correction) moved the
 * start by the step, either way.
 */
export class SeenDown {
  /**
   * Per replica, this node's newest poll that carried a shared start: when it began, on each clock
   * (`mono`: this node's monotonic one, where the poll said).
   */
  private readonly dated = new Map<string, { local: number; mono?: number; shared: number }>();

  /** A poll this node made (`sharedStartedAt`: the shared clock at its scrape's start, poller.ts). */
  note(url: string, s: ReplicaSnapshot): void {
    if (s.sharedStartedAt === undefined) return;
    const local = s.startedAt ?? s.at;
    const cur = this.dated.get(url);
    if (!cur || !begunBefore({ local, mono: s.monoStartedAt }, cur))
      this.dated.set(url, { local, mono: s.monoStartedAt, shared: s.sharedStartedAt });
  }

  /** The replica left the fleet (runtime-departures.ts): its entry goes, or one stayed per address ever polled. */
  forget(url: string): void {
    this.dated.delete(url);
  }

  /**
   * `ups`: the up verdicts too, after deciding alone: the shared store may still hold a down from
   * before this node was cut off, older than this node's up poll (dst seed 503368). Not after an
   * emptied state the node shared until then: no down of it is left to undo, and each verdict is a
   * round trip more before the decisions waiting on the reclaim.
   */
  async push(local: MemoryFleetStore, shared: SharedStore, clock: Clock, ups: boolean): Promise<void> {
    const down = [...local.seenDown(clock.now()), ...(ups ? local.seenUp(clock.now()) : [])];
    if (down.length === 0) return;
    const sharedNow = await shared.sharedTime?.();
    const now = { local: clock.now(), mono: monotonic(clock) };
    for (const { url, snapshot } of down) {
      const sharedStartedAt = this.sharedStart(url, snapshot, sharedNow, now);
      await shared.applySnapshot(url, { ...snapshot, sharedStartedAt });
    }
  }

  private sharedStart(
    url: string,
    s: ReplicaSnapshot,
    sharedNow: number | undefined,
    now: { local: number; mono: number },
  ): number | undefined {
    const began = s.startedAt;
    if (sharedNow === undefined || began === undefined || !Number.isFinite(began)) return undefined;
    const last = this.dated.get(url);
    const floor =
      last && !begunBefore({ local: began, mono: s.monoStartedAt }, last) ? last.shared : -Infinity;
    const since = s.monoStartedAt === undefined ? now.local - began : now.mono - s.monoStartedAt;
    return Math.max(sharedNow - since - SKEW_MARGIN_MS, floor);
  }
}

/**
 * Whether poll `a` began before poll `b`, both this node's: on its monotonic clock where both said
 * (a wall clock stepped back between them read the later one as begun first: the down poll then
 * went unfloored, dated before this node's up poll the shared store held, and lost to it).
 */
function begunBefore(a: { local: number; mono?: number }, b: { local: number; mono?: number }): boolean {
  return a.mono !== undefined && b.mono !== undefined ? a.mono < b.mono : a.local < b.local;
}
