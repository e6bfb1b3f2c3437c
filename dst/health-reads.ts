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

  /**
   * Notes each poll `sender`'s runtime makes (its scrape, made by polls only) as the replicas'
   * HTTP ended it: timed out, or not (answered, or failed otherwise: the count starts again),
   * as the poller's `unhealthy_timeouts` counts them (src/fleet/poller.ts `givesBenefitOfDoubt`).
   */
  pollsSeen(api: ReplicaApi, sender: string, now: () => number): void {
    const scrape = api.scrape.bind(api);
    api.scrape = (spec, timeoutMs) => {
      const key = `${sender}\u0000${spec.url}`;
      const reply = scrape(spec, timeoutMs);
      // Beside the poller's handlers: noted no later than it reads it.
      reply.then(
        () => this.timedOut.delete(key),
        (err: unknown) => {
          if (err instanceof BackendError && err.code === 'timeout') {
            this.timedOut.set(key, (this.timedOut.get(key) ?? 0) + 1);
            this.lastTimedOut.set(key, now());
          } else this.timedOut.delete(key);
        },
      );
      return reply;
    };
  }

  /**
   * When `sender`'s runtime's last poll of `url` that timed out did (-Infinity: none). Such a poll
   * read no verdict of the replica, and the round after it skips the replica while that poll is
   * under way (src/fleet/poller.ts `pollAll`): a node deciding alone, whose health is its own polls,
   * sees a replica down from its next poll after it at the earliest (seed 1646547).
   */
  lastTimeout(sender: string, url: string): number {
    return this.lastTimedOut.get(`${sender}\u0000${url}`) ?? -Infinity;
  }

  /** `sender`'s runtime's last polls of `url` that timed out in a row (0: its last one did not). */
  timeoutsInRow(sender: string, url: string): number {
    return this.timedOut.get(`${sender}\u0000${url}`) ?? 0;
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
