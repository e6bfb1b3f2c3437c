/**
 * The simulation's checks (dst/invariants.ts) against what docs/reliability.md promises, on "a replica
 * seen down gets no request", judged from what the decision last read and from the routing node's own
 * polls.
 */
import { HealthReads, pastOwnSight, pastSeenDown, seenUp, type StoreCall } from '../../../dst/health-reads';
import { BackendError } from '../../../src/backends/errors';
import type { ReplicaApi, Scrape } from '../../../src/backends/replica-api';

describe("the simulation judges a replica seen down from the decision's last read of health (seed 516051)", () => {
  // Replica-1 answers 500 from 1,233 ms; a poll sees that within 1,000 ms, and 500 ms more is slack.
  const down = { since: 1233, seenWithinMs: 1000 };
  const SLACK_MS = 500;
  const judged = (calls: Omit<StoreCall, 'request'>[], now: number) => {
    const reads = new HealthReads();
    for (const c of calls) reads.note({ request: 7, ...c });
    return pastSeenDown(now, down, reads.lateMs(7, now), SLACK_MS);
  };

  it('a warm decision whose views (read before any poll saw the fault) and lease came 419 ms late each holds', () => {
    const calls = [
      { name: 'views', at: 1967, lateMs: 419 },
      { name: 'acquire', at: 2386, lateMs: 419 },
    ];
    expect(judged(calls, 2807)).toBe(false);
  });

  it('the same time spent otherwise after the read (a load, not read again: seed 101429) breaks it', () => {
    const calls = [
      { name: 'views', at: 1967, lateMs: 0 },
      { name: 'acquire', at: 1968, lateMs: 0 },
      { name: 'beginLoad', at: 1970, lateMs: 0 },
    ];
    expect(judged(calls, 2807)).toBe(true);
  });

  it('late replies before the last read do not count, and replies of calls sent together count once', () => {
    const before = [
      { name: 'views', at: 1300, lateMs: 419 },
      { name: 'acquire', at: 1719, lateMs: 419 },
      { name: 'views', at: 2300, lateMs: 0 },
    ];
    expect(judged(before, 2807)).toBe(true);
    const together = [
      { name: 'views', at: 2000, lateMs: 0 },
      { name: 'spendBudget', at: 2001, lateMs: 400 },
      { name: 'beginLoad', at: 2001, lateMs: 400 },
    ];
    const reads = new HealthReads();
    for (const c of together) reads.note({ request: 7, ...c });
    expect(reads.lateMs(7, 3200)).toBe(400);
    // 3,200 - 400 is 1,567 ms into the fault (counted twice, 1,167: within a poll and the slack).
    expect(judged(together, 3200)).toBe(true);
  });
});

describe("the simulation takes another replica for seen up only if the routing node's own polls could see it so (seed 100813)", () => {
  // Replica-0 is up throughout (scraped, no fault of its own); node 1's path to it is slow (2,107 ms
  // each way from 1,171 ms), so its polls there time out. Replica-1 answers 500 from 839 ms.
  const UP = { since: 0, seenWithinMs: 1000 };
  const URL = 'http://replica-0:8000';
  const SLACK_MS = 500;
  const UNHEALTHY_TIMEOUTS = 2;
  /** Node 1's polls of replica-0 ending as `ends` says, in that order; then whether it counts as seen up at 3,354 ms. */
  const judged = async (ends: ('answered' | 'timeout' | '500')[], alone = true): Promise<boolean> => {
    const reads = new HealthReads();
    let next = 0;
    const api = {
      scrape: () => {
        const end = ends[next++];
        if (end === 'answered') return Promise.resolve({ load: {} } as Scrape);
        const err =
          end === 'timeout'
            ? new BackendError('timeout', `GET ${URL}/metrics: no answer within 1000 ms`)
            : new BackendError('http', `GET ${URL}/metrics: 500 Internal Server Error`);
        return Promise.reject(err);
      },
    } as unknown as ReplicaApi;
    reads.pollsSeen(api, 'n1g0r0', 0, () => 0);
    for (let i = 0; i < ends.length; i++)
      await api.scrape({ url: URL, backend: 'vllm', priority: 0 }, 1000).catch(() => undefined);
    const own = { alone, timeoutsInRow: reads.timeoutsInRow('n1g0r0', URL) };
    return seenUp(3354, UP, own, UNHEALTHY_TIMEOUTS, SLACK_MS);
  };

  it('two of its polls in a row timed out (its poller marked it down): not seen up, failing open holds', async () => {
    expect(await judged(['answered', 'timeout', 'timeout'])).toBe(false);
  });

  it("sharing decisions, the same timeouts are no excuse: Redis's health is the latest poll of any node", async () => {
    expect(await judged(['answered', 'timeout', 'timeout'], false)).toBe(true);
  });

  it('one timeout only (it stays up until the next poll), or an answer after two: seen up, as before', async () => {
    expect(await judged(['answered', 'timeout'])).toBe(true);
    expect(await judged(['timeout', 'timeout', 'answered'])).toBe(true);
    // A failure other than a timeout starts the count again, as the poller's does.
    expect(await judged(['timeout', '500', 'timeout'])).toBe(true);
  });

  it("another node's timeouts, or the replica not up long enough for a poll, change nothing", async () => {
    const reads = new HealthReads();
    const node0 = { alone: true, timeoutsInRow: reads.timeoutsInRow('n0g0r0', URL) };
    expect(seenUp(3354, UP, node0, UNHEALTHY_TIMEOUTS, SLACK_MS)).toBe(true);
    expect(seenUp(3354, { since: 2000, seenWithinMs: 1000 }, node0, UNHEALTHY_TIMEOUTS, SLACK_MS)).toBe(
      false,
    );
    expect(seenUp(3354, null, node0, UNHEALTHY_TIMEOUTS, SLACK_MS)).toBe(false);
  });
});

describe("the simulation judges a node deciding alone from its own polls' verdicts (seeds 1646547, 1729199)", () => {
  // Seed 1729199: replica-0 refuses from 179 ms; a poll sees a refusal at once, the next poll within
  // 1,000 ms, and 500 ms more is slack. Node 2 decides alone; its request comes at 1,844 ms.
  const DOWN = { since: 179, seenWithinMs: 1000 };
  const URL = 'http://replica-0:8000';
  const SLACK_MS = 500;
  type Poll = { at: number; ended?: { at: number; how: 'answered' | 'refused' | 'timeout' } };
  /** An answer node 2's runtime got from replica-0 for a request it proxied there (its log phase's status). */
  type Upstream = { at: number; status: number };
  /**
   * Node 2's polls of replica-0 (begun at `at`; no `ended`: under way), and its requests' answers
   * from there; whether routing there at `now` breaks the check.
   */
  const judged = async (polls: Poll[], now = 1844, upstream: Upstream[] = []): Promise<boolean> => {
    const reads = new HealthReads();
    let t = 0;
    const replies: { resolve: (s: Scrape) => void; reject: (e: Error) => void }[] = [];
    const api = {
      scrape: () => new Promise<Scrape>((resolve, reject) => replies.push({ resolve, reject })),
    } as unknown as ReplicaApi;
    reads.pollsSeen(api, 'n2g0r0', 0, () => t);
    const events: {
      at: number;
      poll: number;
      end: 'answered' | 'refused' | 'timeout' | undefined;
      status?: number;
    }[] = polls.flatMap((p, i) => [
      { at: p.at, poll: i, end: undefined },
      ...(p.ended ? [{ at: p.ended.at, poll: i, end: p.ended.how }] : []),
    ]);
    for (const u of upstream) events.push({ at: u.at, poll: -1, end: undefined, status: u.status });
    const sent: Promise<unknown>[] = [];
    for (const e of events.sort((a, b) => a.at - b.at)) {
      t = e.at;
      if (e.status !== undefined) {
        reads.upstreamAnswered('n2g0r0', URL, e.status, t);
        continue;
      }
      if (e.end === undefined) {
        sent[e.poll] = api.scrape({ url: URL, backend: 'vllm', priority: 0 }, 1000).catch(() => undefined);
        continue;
      }
      const reply = replies[e.poll]!;
      if (e.end === 'answered') reply.resolve({ load: {} } as Scrape);
      else if (e.end === 'timeout')
        reply.reject(new BackendError('timeout', `GET ${URL}/metrics: no answer`));
      else reply.reject(new BackendError('connect', `GET ${URL}/metrics: connection refused`));
      await sent[e.poll];
    }
    const since = reads.ownSightFrom('n2g0r0', URL, DOWN.since);
    const passive = reads.passiveDownFrom('n2g0r0', URL, DOWN.since);
    return pastOwnSight(now, { ...DOWN, since }, passive, 0, SLACK_MS);
  };
  const UP_AT_20: Poll = { at: 20, ended: { at: 24, how: 'answered' } };

  it('its only poll since the refusal still under way on a slow path (begun 1,514 ms): holds', async () => {
    expect(await judged([UP_AT_20, { at: 1514 }])).toBe(false);
  });

  it('a poll begun after the refusal that ended with a verdict before the decision: breaks it, a poll under way or not', async () => {
    expect(await judged([UP_AT_20, { at: 1000, ended: { at: 1001, how: 'refused' } }, { at: 1514 }])).toBe(
      true,
    );
    expect(await judged([UP_AT_20, { at: 1000, ended: { at: 1300, how: 'answered' } }, { at: 1514 }])).toBe(
      true,
    );
    // Its verdict counts past a later timeout too (the poller keeps the last word over one).
    const timedOutLater = { at: 1514, ended: { at: 2514, how: 'timeout' as const } };
    expect(await judged([{ at: 1000, ended: { at: 1001, how: 'refused' } }, timedOutLater], 2600)).toBe(true);
    expect(await judged([UP_AT_20, timedOutLater], 2600)).toBe(false);
  });

  it('its own requests refused there PASSIVE_FAILURE_LIMIT times in a row (passive health marks it down): breaks it, a poll under way or not', async () => {
    const refused = [400, 450, 500].map((at) => ({ at, status: 502 }));
    expect(await judged([UP_AT_20, { at: 1514 }], 1844, refused)).toBe(true);
    // Two failures, or three broken by an answer: not down there yet, judged by its polls.
    expect(await judged([UP_AT_20, { at: 1514 }], 1844, refused.slice(1))).toBe(false);
    expect(await judged([UP_AT_20, { at: 1514 }], 1844, [...refused, { at: 460, status: 200 }])).toBe(false);
    // Marked down before the refusal, up again by a poll answered since: its requests' failures then don't count.
    const before = [100, 110, 120].map((at) => ({ at, status: 500 }));
    expect(await judged([{ at: 130, ended: { at: 140, how: 'answered' } }, { at: 1514 }], 1844, before)).toBe(
      false,
    );
  });

  it('a verdict after a poll that timed out: counted from that timeout, unless a verdict came before it (seed 2676738)', async () => {
    // Begun before the refusal, timed out after it (rounds skipped the replica meanwhile); the next
    // poll read the refusal, its write waiting out Redis's timeout on the clock read beside it.
    const timedOut = { at: 100, ended: { at: 854, how: 'timeout' as const } };
    const refusedAfter = { at: 1303, ended: { at: 1304, how: 'refused' as const } };
    expect(await judged([UP_AT_20, timedOut, refusedAfter], 1800)).toBe(false);
    // Past the slack from that timeout's next poll: breaks it.
    expect(await judged([UP_AT_20, timedOut, refusedAfter], 854 + 1501)).toBe(true);
    // A verdict begun after the refusal, before the timeout: seen from the refusal, as before.
    const refusedFirst = { at: 300, ended: { at: 301, how: 'refused' as const } };
    const timedOutLater = { at: 400, ended: { at: 1400, how: 'timeout' as const } };
    const refusedAgain = { at: 1500, ended: { at: 1501, how: 'refused' as const } };
    expect(await judged([refusedFirst, timedOutLater, refusedAgain], 1800)).toBe(true);
  });

  it('a poll under way begun before the refusal, or none under way: counted from the refusal', async () => {
    expect(await judged([{ at: 100 }])).toBe(true);
    expect(await judged([UP_AT_20])).toBe(true);
  });
});
