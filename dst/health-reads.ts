/**
 * "A replica seen down gets no request" judges a request when it is proxied, but the router can
 * only know what its decision last read of health: the `views` a store call returned. A slow link
 * to Redis (replies late within the timeout) stretches the time from that read to the proxy by the
 * replies the request waits for; that time is not the router's to see anything in (seed 516051:
 * views read 734 ms into a fault no poll had seen yet, two replies 419 ms late each, proxied 1,574
 * ms into it). A wait of any other kind after the read (a load, room) still counts. Nor can it
 * see another replica up that its own polls, timing out, have marked down while it decides alone
 * (`seenUp`, seed 100813).
 */

import { BackendError } from '../src/backends/errors';
import type { ReplicaApi } from '../src/backends/replica-api';
import { PASSIVE_FAILURE_LIMIT } from '../src/fleet/memory-store';

/** One store call a request's decision made, as the modelled Redis ran and answered it. */
export interface StoreCall {
  /** The request's arrival number. */
  request: number;
  /** The script: `views` reads health. */
  name: string;
  /** When the server ran it. */
  at: number;
  /** How late its reply came for a slow link (0: on time). */
  lateMs: number;
}

/** Kong's own 502/504 from a replica, as a request's log phase marked it down (HealthReads.kongMarked). */
export interface KongMark {
  status: number;
  /** When Kong's answer reached the log phase (the world's time). */
  failedAt: number;
  /** When the log phase, its marking done, ended. */
  markedAt: number;
  /** The shared state of the runtime it marked on. */
  db: number;
  /** That runtime (its poll sender's name). */
  by: string;
  /** It shared that state when its log phase ended: the marking reached Redis (its call failing would have made it decide alone). */
  shared: boolean;
  /** The request it was (arrival number). */
  request: number;
}

/** The key of a runtime's view of one replica (its polls, its requests' answers). */
const runtimeReplica = (sender: string, url: string) => `${sender}\u0000${url}`;

/** The key of one replica in one shared state (what every runtime sharing it reads). */
const stateReplica = (db: number, url: string) => `${db}\u0000${url}`;

/** Appends `t` to the times at `key` (a runtime's polls of one replica: a few a schedule). */
function push(m: Map<string, number[]>, key: string, t: number): void {
  const list = m.get(key);
  if (list) list.push(t);
  else m.set(key, [t]);
}

/** Sets `m[key]` to `t` unless it holds a later time. */
function latest(m: Map<string, number>, key: string, t: number): void {
  m.set(key, Math.max(t, m.get(key) ?? -Infinity));
}

/** Keeps `mark` at `key` unless a marking from a later 502/504 is there (the newest decides). */
function newest(m: Map<string, KongMark>, key: string, mark: KongMark): void {
  const cur = m.get(key);
  if (!cur || mark.failedAt >= cur.failedAt) m.set(key, mark);
}

/** Notes a marking's end at `key` unless a later one is there; a later one waits for a poll begun after it. */
function ended(ends: Map<string, number>, answered: Map<string, number>, key: string, at: number): void {
  if (at <= (ends.get(key) ?? -Infinity)) return;
  ends.set(key, at);
  answered.delete(key);
}

/** A poll begun at `begun` answered at `at`: the first one begun after the marking's end at `key`, if it is. */
function firstAfter(
  ends: Map<string, number>,
  answered: Map<string, number>,
  key: string,
  begun: number,
  at: number,
): void {
  const end = ends.get(key);
  if (end !== undefined && begun > end && !answered.has(key)) answered.set(key, at);
}

/** A marking ended at `end` (none: undefined) may hold at `now` unless a poll begun since answered over `slackMs` before. */
function mayHold(
  end: number | undefined,
  answeredAt: number | undefined,
  now: number,
  slackMs: number,
): boolean {
  return end !== undefined && (answeredAt === undefined || now - answeredAt <= slackMs);
}

/** Per request: the store calls its decision made (few: a decision makes a handful). */
export class HealthReads {
  private readonly calls = new Map<number, StoreCall[]>();

  /** A call answered (in the order replies come, not the order the server ran them). */
  note(c: StoreCall): void {
    const list = this.calls.get(c.request);
    if (list) list.push(c);
    else this.calls.set(c.request, [c]);
  }

  /**
   * The time up to `now` the request spent waiting for late replies since its last health read
   * (none read: 0). Replies of calls sent together overlap and count once.
   */
  lateMs(request: number, now: number): number {
    const calls = this.calls.get(request) ?? [];
    const read = Math.max(...calls.filter((c) => c.name === 'views').map((c) => c.at));
    if (read === -Infinity) return 0;
    const spans = calls
      .map((c) => [Math.max(c.at, read), Math.min(c.at + c.lateMs, now)] as const)
      .filter(([a, b]) => b > a)
      .sort((x, y) => x[0] - y[0]);
    let total = 0;
    let end = -Infinity;
    for (const [a, b] of spans) {
      total += Math.max(0, b - Math.max(a, end));
      end = Math.max(end, b);
    }
    return total;
  }

  forget(request: number): void {
    this.calls.delete(request);
  }

  /** By runtime and replica: its polls in a row that timed out, as its poller counts them. */
  private readonly timedOut = new Map<string, number>();
  /** By runtime and replica: when its last poll that timed out did (the world's time). */
  private readonly lastTimedOut = new Map<string, number>();
  /** By runtime and replica: when its poll under way began (its poller runs one at a time). */
  private readonly underWay = new Map<string, number>();
  /** By runtime and replica: when each of its polls that ended with a verdict (not a timeout) began. */
  private readonly verdictsBegun = new Map<string, number[]>();
  /** By runtime and replica: when each of its polls that timed out did. */
  private readonly timeoutsAt = new Map<string, number[]>();
  /** By runtime and replica: its requests' upstream failures in a row (passive health). */
  private readonly failedInRow = new Map<string, number>();
  /** By runtime and replica: when those failures marked it down in its store, not answered by a poll since. */
  private readonly passiveDownAt = new Map<string, number>();
  /** By runtime and replica: Kong's own 502/504 there, its log phase's marking (`kongMarked`). */
  private readonly kongMarks = new Map<string, KongMark>();
  /** By shared state and replica: the newest such marking that reached it (`KongMark.shared`). */
  private readonly sharedKongMarksOn = new Map<string, KongMark>();
  /** By runtime and replica: when its newest poll that answered began (the world's time). */
  private readonly answeredBegun = new Map<string, number>();
  /** By shared state and replica: when the newest poll of any runtime on it that answered began. */
  private readonly answeredBegunOn = new Map<string, number>();
  /** By runtime and replica: when its last marking's log phase ended (the latest `markedAt`, whatever its 502's date). */
  private readonly markEnded = new Map<string, number>();
  /** By shared state and replica: the same, of any runtime's marking on it. */
  private readonly markEndedOn = new Map<string, number>();
  /** By runtime and replica: when its first poll begun after that end answered (none yet: absent). */
  private readonly answeredAfterMark = new Map<string, number>();
  /** By shared state and replica: the same, of any runtime's poll there. */
  private readonly answeredAfterMarkOn = new Map<string, number>();

  /**
   * Notes each poll `sender`'s runtime makes (its scrape, made by polls only) as it begins and as
   * the replicas' HTTP ended it: timed out, or with a verdict (answered, or failed otherwise: the
   * count starts again), as the poller's `unhealthy_timeouts` counts them (src/fleet/poller.ts
   * `givesBenefitOfDoubt`).
   */
  pollsSeen(api: ReplicaApi, sender: string, db: number, now: () => number): void {
    const scrape = api.scrape.bind(api);
    api.scrape = (spec, timeoutMs) => {
      const key = runtimeReplica(sender, spec.url);
      const onState = stateReplica(db, spec.url);
      const begun = now();
      this.underWay.set(key, begun);
      const reply = scrape(spec, timeoutMs);
      const verdict = () => {
        this.underWay.delete(key);
        this.timedOut.delete(key);
        push(this.verdictsBegun, key, begun);
      };
      // Beside the poller's handlers: noted no later than it reads it.
      reply.then(
        () => {
          verdict();
          // An answered poll marks the replica up and starts its passive count again (markUp).
          this.failedInRow.delete(key);
          this.passiveDownAt.delete(key);
          latest(this.answeredBegun, key, begun);
          latest(this.answeredBegunOn, onState, begun);
          firstAfter(this.markEnded, this.answeredAfterMark, key, begun, now());
          firstAfter(this.markEndedOn, this.answeredAfterMarkOn, onState, begun, now());
        },
        (err: unknown) => {
          if (!(err instanceof BackendError && err.code === 'timeout')) return verdict();
          this.underWay.delete(key);
          this.timedOut.set(key, (this.timedOut.get(key) ?? 0) + 1);
          this.lastTimedOut.set(key, now());
          push(this.timeoutsAt, key, now());
        },
      );
      return reply;
    };
  }

  /**
   * From when `sender`'s runtime's own polls of `url` can show a change that came at `since` (a node
   * deciding alone: its health is its own polls). A poll begun at `since` or later that ended with a
   * verdict (answered, refused, 500: not a timeout) has shown it: from `since`, or, a poll having
   * timed out since `since` before the first such poll began, from that timeout's next poll as with
   * no verdict yet (seed 2676738: the poll under way across the change timed out 675 ms into it, the
   * next read the 500 449 ms later, and its write waited out Redis's timeout on the clock read beside
   * it). Otherwise none has yet, and rounds skip the replica while a poll of it is under way
   * (src/fleet/poller.ts `pollAll`): from the next poll after its last one that timed out, which
   * read no verdict (seed 1646547), and no earlier than its poll under way began (seed 1729199:
   * begun 1,335 ms into a refusal, its round having waited out Redis's timeout, and still on a slow
   * path).
   */
  ownSightFrom(sender: string, url: string, since: number): number {
    const key = runtimeReplica(sender, url);
    const first = Math.min(...(this.verdictsBegun.get(key) ?? []).filter((b) => b >= since));
    if (first !== Infinity) {
      const before = (this.timeoutsAt.get(key) ?? []).filter((t) => t <= first);
      return Math.max(since, ...before);
    }
    return Math.max(since, this.lastTimedOut.get(key) ?? -Infinity, this.underWay.get(key) ?? -Infinity);
  }

  /**
   * When `sender`'s runtime's own requests to `url`, failing since `since`, marked it down in its
   * store (passive health: seen at once, whatever its polls), no poll answered since; Infinity: not.
   */
  passiveDownFrom(sender: string, url: string, since: number): number {
    const at = this.passiveDownAt.get(runtimeReplica(sender, url));
    return at !== undefined && at >= since ? at : Infinity;
  }

  /**
   * The upstream `status` a request `sender`'s runtime proxied to `url` got, given back to its store
   * at `at` (its log phase). As the store's passive health counts them (src/fleet/memory-store.ts
   * `passiveOutcome`): PASSIVE_FAILURE_LIMIT failures (5xx) in a row mark the replica down.
   */
  upstreamAnswered(sender: string, url: string, status: number, at: number): void {
    const key = runtimeReplica(sender, url);
    if (status < 500) {
      this.failedInRow.delete(key);
      return;
    }
    const n = (this.failedInRow.get(key) ?? 0) + 1;
    this.failedInRow.set(key, n);
    if (n === PASSIVE_FAILURE_LIMIT && !this.passiveDownAt.has(key)) this.passiveDownAt.set(key, at);
  }

  /**
   * Kong's own 502 or 504 from `url` (source 'error') reached the log phase of a request at `failedAt`,
   * and that log phase, ended at `markedAt`, marked the replica down in the store of `sender`'s
   * runtime, on shared state `db` (src/router/log-phase.ts `proxyFailed`).
   */
  kongMarked(sender: string, url: string, mark: KongMark): void {
    // The newest 502 decides: a poll begun after an older one may have seen the replica up since.
    newest(this.kongMarks, runtimeReplica(sender, url), mark);
    const onState = stateReplica(mark.db, url);
    if (mark.shared) newest(this.sharedKongMarksOn, onState, mark);
    // Whichever 502 is newer, the marking applied last is the one the store holds, dated then.
    ended(this.markEnded, this.answeredAfterMark, runtimeReplica(sender, url), mark.markedAt);
    ended(this.markEndedOn, this.answeredAfterMarkOn, onState, mark.markedAt);
  }

  /**
   * Whether a marking of `url` by `sender`'s runtime may still be what that runtime reads there at
   * `now`, its own polls alone undoing it: the reading that excuses routing elsewhere (another
   * replica is not up as the node sees it while it may hold), so it holds longer than
   * `kongMarkStanding`. The store dates a marking when it applies it (`startedOnArrival`; the memory
   * store by the clock after the release), no earlier than the 502: a poll begun after the 502 but
   * before that is older news, and one that answered before it is overwritten by it (seed 2237878:
   * begun 0.5 ms after the 504, applied 1.5 ms before the marking, which held the replica down). So
   * it holds until a poll begun after the marking's log phase ended has answered, and `slackMs`
   * more (that poll's store call, the decision's read of it).
   */
  kongMarkMayHold(sender: string, url: string, now: number, slackMs: number): boolean {
    const key = runtimeReplica(sender, url);
    return mayHold(this.markEnded.get(key), this.answeredAfterMark.get(key), now, slackMs);
  }

  /** `kongMarkMayHold` on shared state `db`: any runtime's marking there (made alone too), any runtime's poll. */
  kongMarkMayHoldOn(db: number, url: string, now: number, slackMs: number): boolean {
    const key = stateReplica(db, url);
    return mayHold(this.markEndedOn.get(key), this.answeredAfterMarkOn.get(key), now, slackMs);
  }

  /**
   * The newest marking of `url` that reached shared state `db` (its runtime shared it at its log
   * phase's end) no poll there begun after its 502 has answered, if any: what binds a node sharing
   * that state. The excuse reading is `kongMarkMayHoldOn`.
   */
  kongMarkStandingOn(db: number, url: string): KongMark | undefined {
    const onState = stateReplica(db, url);
    const mark = this.sharedKongMarksOn.get(onState);
    if (!mark) return undefined;
    return (this.answeredBegunOn.get(onState) ?? -Infinity) > mark.failedAt ? undefined : mark;
  }

  /**
   * Kong's marking of `url` on `sender`'s runtime that no poll begun after its 502 has answered since,
   * if any. Deciding alone, the runtime's own polls only (its local store holds what it polled);
   * sharing, any runtime's on the same shared state (any node's poll there says up for all).
   */
  kongMarkStanding(sender: string, url: string, alone: boolean): KongMark | undefined {
    const mark = this.kongMarks.get(runtimeReplica(sender, url));
    if (!mark) return undefined;
    const own = this.answeredBegun.get(runtimeReplica(sender, url)) ?? -Infinity;
    const any = alone ? -Infinity : (this.answeredBegunOn.get(stateReplica(mark.db, url)) ?? -Infinity);
    return Math.max(own, any) > mark.failedAt ? undefined : mark;
  }

  /** `sender`'s runtime's last polls of `url` that timed out in a row (0: its last one did not). */
  timeoutsInRow(sender: string, url: string): number {
    return this.timedOut.get(runtimeReplica(sender, url)) ?? 0;
  }
}

/**
 * Whether a replica's change (down, or back up) since `change.since` is older at `now` than a poll
 * takes to see it (`change.seenWithinMs` and `slackMs`), the time a request waited on late replies
 * since its last health read (`lateMs`) left out.
 */
export function pastSeenDown(
  now: number,
  change: { since: number; seenWithinMs: number },
  lateMs: number,
  slackMs: number,
): boolean {
  return now - lateMs - change.since > change.seenWithinMs + slackMs;
}

/**
 * `pastSeenDown` for a node deciding alone: its polls' sight of the down (`change.since` from
 * HealthReads.ownSightFrom), or its requests' failures there that marked it down at `passiveFrom`
 * (HealthReads.passiveDownFrom), known at once.
 */
export function pastOwnSight(
  now: number,
  change: { since: number; seenWithinMs: number },
  passiveFrom: number,
  lateMs: number,
  slackMs: number,
): boolean {
  return (
    pastSeenDown(now, change, lateMs, slackMs) ||
    pastSeenDown(now, { since: passiveFrom, seenWithinMs: 0 }, lateMs, slackMs)
  );
}

/**
 * Whether a replica up (`up`: since when, how long a poll takes to see it so) is seen up by the
 * node routing now: up long enough for a poll to see it, and, the node deciding alone, its own
 * last `unhealthyTimeouts` polls of it not all timed out (`own`). Those mark it down in its local
 * store however healthy the replica (seed 100813: a slow path from its host, every poll 2 x
 * 2,107 ms past its 1,000 ms timeout); one timeout leaves it up there, as the poller does. Sharing
 * decisions, its health is Redis's, where another node's poll begun later says up: no excuse.
 */
export function seenUp(
  now: number,
  up: { since: number; seenWithinMs: number } | null,
  own: { alone: boolean; timeoutsInRow: number },
  unhealthyTimeouts: number,
  slackMs: number,
): boolean {
  const ownDown = own.alone && own.timeoutsInRow >= unhealthyTimeouts;
  return up !== null && pastSeenDown(now, up, 0, slackMs) && !ownDown;
}
