/**
 * "A replica seen down gets no request" judges a request when it is proxied, but the router can
 * only know what its decision last read of health: the `views` a store call returned. A slow link
 * to Redis (replies late within the timeout) stretches the time from that read to the proxy by the
 * replies the request waits for; that time is not the router's to see anything in (seed 516051:
 * views read 734 ms into a fault no poll had seen yet, two replies 419 ms late each, proxied 1,574
 * ms into it). A wait of any other kind after the read (a load, room) still counts.
 */

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
