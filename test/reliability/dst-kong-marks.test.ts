/**
 * Kong's own 502/504 in the simulation (dst/kong-mark-check.ts): the log phase the world runs is the
 * plugin's (`logPhase`, source 'error' for Kong's own answer), the schedules the check found kept
 * as written, a log phase that ignores the marking caught, and the check's rule case by case.
 */
import { runSchedule } from '../../dst/run';
import type { Schedule } from '../../dst/schedule';
import { HealthReads, type KongMark } from '../../dst/health-reads';
import { SERVED_TELL_INVARIANT, unwatched } from '../../dst/served-tell-check';
import { KONG_MARK_INVARIANT, kongMarkUnheeded, type MarkedRouting } from '../../dst/kong-mark-check';
import type { ReplicaApi, Scrape } from '../../src/backends/replica-api';
import * as logPhases from '../../src/router/log-phase';

/** Seed 2003175's world: three replicas of one slot each, node_ttl_ms 500. */
const WORLD_2003175: Schedule['world'] = {
  nodes: 3,
  replicas: 3,
  maxLoadedAdapters: 1,
  adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
  loadMs: 800,
  decodeMsPerStep: 50,
  coldLoadsPerMinute: 6,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 1000,
  spanMs: 3399,
  upstreamTimeoutMs: 5000,
  nodeTtlMs: 500,
  queueTimeoutMs: 2000,
  maxNumSeqs: 4,
};
const ACTIONS_2003175: Schedule['actions'] = [
  { at: 143, kind: 'request', node: 0, adapter: 9, tokens: 6, prompt: 1135 },
  { at: 281, kind: 'record-change', otherState: false, gapMs: 1 },
  { at: 415, kind: 'request', node: 2, adapter: 0, tokens: 21, prompt: 1317 },
  { at: 1335, kind: 'replica-restart', replica: 2, downMs: 84 },
  { at: 1530, kind: 'request', node: 2, adapter: 0, tokens: 58, prompt: 1341 },
];

describe("Kong's own 502/504 marks the replica down in the shared state over a poll begun just before it", () => {
  // Seed 2003175 (--keep 0,1,4,20,27; the check's, on the Redis store's dating before the fix): node
  // 2's request for `sql` runs on replica-2, which restarts at 1,335 ms: the connection is reset,
  // Kong answers 502 itself, and the log phase marks replica-2 down. A poll of it begun at 1,322 (13
  // ms before the reset) had answered up; the shared store dated the marking, which carries no
  // shared start, 50 ms before it arrived (1,287): older than that poll, dropped. Node 2 sent its
  // next `sql` request there at 1,530, no poll begun since having answered. The marking is now dated
  // when the store applies it (src/fleet/types.ts `startedOnArrival`; test/core/kong-marking.test.ts).
  it('seed 2003175: a 502 from a restart, a poll begun 13 ms before it', async () => {
    const r = await runSchedule({ seed: 2003175, world: WORLD_2003175, actions: ACTIONS_2003175 });
    expect(r.violation).toBeUndefined();
    expect(r.kongMarks.marked).toBeGreaterThan(0);
  }, 30_000);

  // Seed 2001857 (--keep 0,2,7,14,17,18,19,23,24,28; the same gap): node 2's first request (118
  // tokens at 100 ms a step) outlives the 5,000 ms upstream timeout on replica-0, a healthy one: Kong
  // answers 504 at 5,263 and the log phase marks it down. A poll begun at 5,230 had answered up; the
  // marking, dated 5,215, was dropped, and node 2's request at 5,637 went to replica-0.
  it('seed 2001857: a 504 past the upstream timeout, a poll begun 33 ms before it', async () => {
    const r = await runSchedule({
      seed: 2001857,
      world: {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        prefetch: { intervalMs: 500, halfLifeMs: 10000, loadsPerMinute: 1, hysteresis: 0, evictFactor: 1 },
      },
      actions: [
        { at: 32, kind: 'request', node: 2, adapter: 2, tokens: 118, prompt: 1041 },
        { at: 380, kind: 'request', node: 0, adapter: 8, tokens: 3, prompt: 1811 },
        { at: 668, kind: 'flushall' },
        { at: 1329, kind: 'request', node: 2, adapter: 9, tokens: 4, prompt: 659 },
        { at: 1552, kind: 'request', node: 1, adapter: 7, tokens: 4, prompt: 1747 },
        { at: 1552, kind: 'partition', node: 2, ms: 2549 },
        { at: 1648, kind: 'request', node: 1, adapter: 9, tokens: 2, prompt: 1386 },
        { at: 2670, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 698 },
        { at: 2901, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 1854 },
        { at: 5637, kind: 'request', node: 2, adapter: 2, tokens: 1, prompt: 1640 },
      ],
    });
    expect(r.violation).toBeUndefined();
    expect(r.kongMarks.marked).toBeGreaterThan(0);
  }, 30_000);
});

describe('a replica Kong could not reach gets no new request until a poll sees it up: the other replica marked by another node', () => {
  // Seed 2016001 (--keep 0,2,4,5,7,8,9,11,13,19,30; the check's): both replicas run generations longer
  // than the 5,000 ms upstream timeout. Another node's 504 from replica-1 marked it down in Redis at
  // 5,513 ms, node 0's 504 from replica-0 at 5,557; node 0's next request (5,585) read both down, and
  // the health filter failed open onto replica-0. The check took replica-1 for up (world: healthy,
  // polled), counting only node 0's own markings; sharing the state, it now counts any node's there.
  it("seed 2016001: every replica marked down in the shared state, by this node's 504 and another's", async () => {
    const r = await runSchedule({
      seed: 2016001,
      world: {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 1 },
        ],
        prefetch: { intervalMs: 1000, halfLifeMs: 10000, loadsPerMinute: 4, hysteresis: 0.5, evictFactor: 1 },
      },
      actions: [
        { at: 40, kind: 'request', node: 1, adapter: 2, tokens: 118, prompt: 128, cls: 'batch' },
        { at: 153, kind: 'replica-outage', replica: 0, ms: 1149, mode: 'hang' },
        { at: 358, kind: 'request', node: 0, adapter: 4, tokens: 6, prompt: 526 },
        { at: 441, kind: 'request', node: 0, adapter: 3, tokens: 1, prompt: 1162 },
        { at: 509, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 1092, cls: 'interactive' },
        { at: 555, kind: 'request', node: 0, adapter: -1, tokens: 4, prompt: 155, cls: 'interactive' },
        { at: 611, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 358, cls: 'batch' },
        { at: 991, kind: 'scrape', replica: 0, ms: 1494, mode: 'error' },
        { at: 1043, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 754, cls: 'batch' },
        { at: 2439, kind: 'request', node: 0, adapter: 0, tokens: 20, prompt: 122, cls: 'batch' },
        { at: 5585, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 55, cls: 'interactive' },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
});

describe("a planted violation: the log phase takes the source of every answer for the replica's own", () => {
  // The simulation runs the plugin's log phase through the module's exports (read at each call).
  const phases = logPhases as { logPhase: typeof logPhases.logPhase };
  const logPhase = phases.logPhase;
  // Its tells of an end unwatched: taking Kong's 502 for the replica's answer also tells it served,
  // which dst/served-tell-check.ts catches first (the last case).
  let watched = false;
  beforeAll(() => {
    phases.logPhase = (rt, record, status, _source) => {
      const planted = () => logPhase(rt, record, status, async () => 'service');
      return watched ? planted() : unwatched(planted);
    };
  });
  afterAll(() => {
    phases.logPhase = logPhase;
  });

  it('is caught on seed 2003175: Kong could not reach replica-2 and the node sends the next request there', async () => {
    const r = await runSchedule({ seed: 2003175, world: WORLD_2003175, actions: ACTIONS_2003175 });
    expect(r.violation?.invariant).toBe(KONG_MARK_INVARIANT);
  }, 30_000);

  it("its tells watched, the 502's log phase telling the request served is caught first", async () => {
    watched = true;
    try {
      const r = await runSchedule({ seed: 2003175, world: WORLD_2003175, actions: ACTIONS_2003175 });
      expect(r.violation?.invariant).toBe(SERVED_TELL_INVARIANT);
      expect(r.violation?.detail).toMatch(/told as ended at http:\/\/replica-2:8000 .* Kong's own answer/);
    } finally {
      watched = false;
    }
  }, 30_000);
});

describe('the kong-mark check, case by case', () => {
  const URL = 'http://replica-0:8000';
  const mark: KongMark = {
    status: 502,
    failedAt: 1000,
    markedAt: 1004,
    db: 0,
    by: 'n2g0r0',
    shared: true,
    request: 3,
  };
  const routed = (o: Partial<MarkedRouting> = {}): MarkedRouting => ({
    mark,
    began: 1200,
    alone: false,
    resets: [],
    otherUp: true,
    ...o,
  });

  it('a request that came after the marking, another replica up, breaks it', () => {
    expect(kongMarkUnheeded(routed())).toContain('Kong answered 502 for request 3 at 1000 ms');
  });

  it('not one that came before the marking ended, nor one with nowhere else to go (the health filter fails open)', () => {
    expect(kongMarkUnheeded(routed({ began: 1004 }))).toBeUndefined();
    expect(kongMarkUnheeded(routed({ otherUp: false }))).toBeUndefined();
  });

  it('an emptied or switched shared state since the 502 excuses a node sharing it, not one deciding alone', () => {
    expect(kongMarkUnheeded(routed({ resets: [1000] }))).toBeUndefined();
    expect(kongMarkUnheeded(routed({ resets: [999] }))).toBeDefined();
    expect(kongMarkUnheeded(routed({ resets: [1100], alone: true }))).toBeDefined();
  });

  /** Polls of URL by `sender` on state 0, each begun at `at` and answered at once. */
  const polled = async (reads: HealthReads, sender: string, at: number[]) => {
    let t = 0;
    const api = { scrape: () => Promise.resolve({ load: {} } as Scrape) } as unknown as ReplicaApi;
    reads.pollsSeen(api, sender, 0, () => t);
    for (const a of at) {
      t = a;
      await api.scrape({ url: URL, backend: 'vllm', priority: 0 }, 1000);
    }
  };

  it('the marking stands until a poll begun after the 502 answers; one begun before it does not undo it', async () => {
    const reads = new HealthReads();
    reads.kongMarked('n2g0r0', URL, mark);
    await polled(reads, 'n2g0r0', [990]);
    expect(reads.kongMarkStanding('n2g0r0', URL, false)).toEqual(mark);
    await polled(reads, 'n2g0r0', [1010]);
    expect(reads.kongMarkStanding('n2g0r0', URL, false)).toBeUndefined();
  });

  it("another node's poll undoes it for a node sharing the state, not for one deciding alone (its local store)", async () => {
    const reads = new HealthReads();
    reads.kongMarked('n2g0r0', URL, mark);
    await polled(reads, 'n0g0r0', [1010]);
    expect(reads.kongMarkStanding('n2g0r0', URL, false)).toBeUndefined();
    expect(reads.kongMarkStanding('n2g0r0', URL, true)).toEqual(mark);
  });

  it("on a shared state, any runtime's marking stands until a poll there begun after its 502 answers", async () => {
    const reads = new HealthReads();
    reads.kongMarked('n1g0r0', URL, mark);
    expect(reads.kongMarkStandingOn(0, URL)).toEqual(mark);
    expect(reads.kongMarkStandingOn(1, URL)).toBeUndefined();
    await polled(reads, 'n2g0r0', [990]);
    expect(reads.kongMarkStandingOn(0, URL)).toEqual(mark);
    await polled(reads, 'n2g0r0', [1010]);
    expect(reads.kongMarkStandingOn(0, URL)).toBeUndefined();
  });

  it('a marking made deciding alone (its local store only) binds no other node sharing the state, and may still excuse', () => {
    const reads = new HealthReads();
    reads.kongMarked('n1g0r0', URL, { ...mark, by: 'n1g0r0', shared: false });
    expect(reads.kongMarkStandingOn(0, URL)).toBeUndefined();
    expect(reads.kongMarkMayHoldOn(0, URL, 1200, 500)).toBe(true);
  });

  // Seed 2237878: the store dates a marking when it applies it, so a poll begun after the 502 but
  // before the marking reached the store leaves it standing there; as the excuse (the other
  // replica not up as the node sees it), it holds until a poll begun after its log phase ended answers.
  it('as an excuse, a marking holds until a poll begun after its log phase ended has answered, and the slack', async () => {
    const reads = new HealthReads();
    reads.kongMarked('n2g0r0', URL, mark);
    await polled(reads, 'n1g0r0', [1002]);
    expect(reads.kongMarkStandingOn(0, URL)).toBeUndefined();
    expect(reads.kongMarkMayHoldOn(0, URL, 1400, 500)).toBe(true);
    expect(reads.kongMarkMayHold('n2g0r0', URL, 1400, 500)).toBe(true);
    await polled(reads, 'n1g0r0', [1010]);
    expect(reads.kongMarkMayHoldOn(0, URL, 1510, 500)).toBe(true);
    expect(reads.kongMarkMayHoldOn(0, URL, 1511, 500)).toBe(false);
    expect(reads.kongMarkMayHoldOn(1, URL, 1511, 500)).toBe(false);
    // Another node's poll undoes it on the state, not for the runtime's own reading (its polls).
    expect(reads.kongMarkMayHold('n2g0r0', URL, 1511, 500)).toBe(true);
    await polled(reads, 'n2g0r0', [1020]);
    expect(reads.kongMarkMayHold('n2g0r0', URL, 1521, 500)).toBe(false);
  });

  it('as an excuse, the marking that ended last holds, whatever its 502', async () => {
    const reads = new HealthReads();
    reads.kongMarked('n2g0r0', URL, { ...mark, failedAt: 1005, markedAt: 1008 });
    await polled(reads, 'n1g0r0', [1009]);
    // An older 502 whose log phase ended later: the store applied it last.
    reads.kongMarked('n0g0r0', URL, { ...mark, by: 'n0g0r0', markedAt: 1012 });
    expect(reads.kongMarkMayHoldOn(0, URL, 2000, 500)).toBe(true);
    await polled(reads, 'n1g0r0', [1013]);
    expect(reads.kongMarkMayHoldOn(0, URL, 2000, 500)).toBe(false);
  });

  it('a newer 502 stands over an older one a poll has undone', async () => {
    const reads = new HealthReads();
    reads.kongMarked('n2g0r0', URL, mark);
    await polled(reads, 'n2g0r0', [1010]);
    const later = { ...mark, failedAt: 1500, markedAt: 1503 };
    reads.kongMarked('n2g0r0', URL, later);
    reads.kongMarked('n2g0r0', URL, mark);
    expect(reads.kongMarkStanding('n2g0r0', URL, false)).toEqual(later);
  });
});
