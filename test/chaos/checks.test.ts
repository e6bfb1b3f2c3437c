/**
 * The fault run's invariant checks and schedule, on recorded logs: each check must catch what
 * breaks it (a unit test of pure functions; the run itself is fault-run.test.ts).
 */
import { AloneSpans } from '../../chaos/alone';
import {
  coldLoadsWithinBudget,
  leasesReleased,
  loadedWithinLimit,
  noBusyUnload,
  type ReplicaLogEntry,
} from '../../chaos/invariants';
import { makeSchedule } from '../../chaos/schedule';
import type { ProxiedRequest, Witness } from '../../chaos/senders';

const R = 'http://127.0.0.1:1';
const load = (wallMs: number, name: string, loaded: number, ms = 100): ReplicaLogEntry => ({
  replica: R,
  at: wallMs,
  op: 'load',
  name,
  status: 200,
  ms,
  loaded,
  wallMs,
});
const unload = (wallMs: number, name: string, loaded: number, running = 0, waiting = 0): ReplicaLogEntry => ({
  replica: R,
  at: wallMs,
  op: 'unload',
  name,
  status: 200,
  ms: 0,
  inFlight: running + waiting,
  running,
  waiting,
  loaded,
  wallMs,
});

describe('fault-run invariants', () => {
  it('(i) flags an unload that found requests running or waiting, and only those', () => {
    const r = noBusyUnload([
      unload(1, 'a', 1),
      unload(2, 'b', 0, 0, 1),
      unload(3, 'c', 0, 2, 0),
      { ...unload(4, 'd', 0), status: 404, running: undefined, waiting: undefined },
    ]);
    expect(r.checks).toBe(3);
    expect(r.violations.map((v) => [v.adapter, v.detail])).toEqual([
      ['b', 'unloaded with 0 running and 1 waiting'],
      ['c', 'unloaded with 2 running and 0 waiting'],
    ]);
  });

  describe("(i) excuses exactly an unseen router's first request of the adapter", () => {
    // The 30-minute run at 3be912e (seed 11): node 0 unloaded chaos-1 at +1110.901 s with 0 running
    // and 1 waiting; node 1, cut off from Redis, decided alone from +1110.048 s. Times in ms from
    // the run's start; node 0's last /metrics ask of the replica 50 ms before its unload call.
    const busy = unload(1_110_901, 'chaos-1', 1, 0, 1);
    const req = (node: number, alone: boolean, at: number, ended = Infinity): ProxiedRequest => ({
      replica: R,
      adapter: 'chaos-1',
      node,
      alone,
      at,
      ended,
    });
    const witness = (...requests: ProxiedRequest[]): Witness => ({
      requests,
      asks: [
        { replica: R, node: 0, at: 1_110_851 },
        // Another node's poll after it: not the unloading node's word.
        { replica: R, node: 2, at: 1_110_890 },
      ],
      unloads: [{ replica: R, node: 0, at: 1_110_900 }],
    });

    it("excuses the alone node's first request of it there, reaching it after the unloading node's ask", () => {
      const r = noBusyUnload([busy], witness(req(1, true, 1_110_880)));
      expect(r.violations).toEqual([]);
      expect(r.excusedUnloads!.map((v) => v.detail)).toEqual([
        'unloaded with 0 running and 1 waiting: node 0 unloaded (its last /metrics ask 50 ms before); under way: node 1 alone, reached it 29 ms after the ask, its first',
      ]);
      // Its first after UNSEEN_HOLD_MS (2 s) of quiet counts as a first.
      expect(
        noBusyUnload([busy], witness(req(1, true, 1_108_000, 1_108_800), req(1, true, 1_110_880))).violations,
      ).toEqual([]);
    });

    it('flags a repeated request of the alone node (one within 2 s before, or one still under way)', () => {
      // What node 2's withheld unload at +1110.3 s read: node 1's earlier request of chaos-1 there.
      const r = noBusyUnload([busy], witness(req(1, true, 1_110_100, 1_110_700), req(1, true, 1_110_880)));
      expect(r.violations.map((v) => v.detail)).toEqual([
        'unloaded with 0 running and 1 waiting: node 0 unloaded (its last /metrics ask 50 ms before); under way: node 1 alone, reached it 29 ms after the ask, not its first in 2000 ms',
      ]);
      expect(r.excusedUnloads).toEqual([]);
      expect(
        noBusyUnload([busy], witness(req(1, true, 1_110_850, 1_111_000), req(1, true, 1_110_880))).violations,
      ).toHaveLength(1);
    });

    it('flags a request from a node on Redis, one before the ask, one unseen, or an unknown sender', () => {
      const flagged = (w: Witness, log = [busy]) => noBusyUnload(log, w).violations.length;
      expect(flagged(witness(req(2, false, 1_110_880)))).toBe(1);
      expect(flagged(witness(req(1, true, 1_110_840)))).toBe(1);
      // The engine counted one waiting; the witness saw none (or one of two).
      expect(flagged(witness())).toBe(1);
      expect(flagged(witness(req(1, true, 1_110_880)), [unload(1_110_901, 'chaos-1', 1, 1, 1)])).toBe(1);
      // Two nodes' unload calls on the replica at once: which one landed is not known.
      const two = witness(req(1, true, 1_110_880));
      expect(flagged({ ...two, unloads: [...two.unloads, { replica: R, node: 2, at: 1_110_895 }] })).toBe(1);
      // An ask of the replica from no known node after the unloading node's last: maybe its own.
      expect(flagged({ ...two, asks: [...two.asks, { replica: R, node: -1, at: 1_110_870 }] })).toBe(1);
      // No witness at all: every busy unload is a violation, as before.
      expect(noBusyUnload([busy]).violations).toHaveLength(1);
    });
  });

  it('(ii) allows an excess for one poll interval, flags a longer one and one still open at the end', () => {
    const log = [
      load(0, 'a', 1),
      load(10, 'b', 2),
      load(20, 'c', 3), // over for 200 ms: allowed
      unload(220, 'a', 2),
      load(1000, 'd', 3), // over for 400 ms
      unload(1400, 'b', 2),
      load(2000, 'e', 3), // still over at the end (3000)
    ];
    const r = loadedWithinLimit(log, 2, 250, 3000);
    expect(r.checks).toBe(7);
    expect(r.violations.map((v) => [v.at, v.detail])).toEqual([
      [1000, '3 adapters loaded (limit 2) for 400 ms'],
      [2000, '3 adapters loaded (limit 2) for 1000 ms'],
    ]);
    expect(loadedWithinLimit(log, 3, 250, 3000).violations).toEqual([]);
  });

  it('(ii) excuses an excess while a node decides alone or a fault is under way, and for the hold-off after it', () => {
    const log = [
      load(0, 'a', 1),
      load(10, 'b', 2),
      load(1000, 'c', 3), // over from 1000 while node 1 decides alone (900-5000)...
      unload(7000, 'a', 2), // ...ends 2000 ms after: within the 3000 ms allowed after
      load(10_000, 'd', 3), // over from 10000 during a fault (9900-10100)...
      unload(14_000, 'b', 2), // ...ends 3900 ms after it: 900 ms beyond, past the 250 ms grace
    ];
    const excuses = {
      spans: [
        { from: 900, to: 5000 },
        { from: 9900, to: 10_100 },
      ],
      afterMs: 3000,
    };
    const r = loadedWithinLimit(log, 2, 250, 20_000, excuses);
    expect(r.violations.map((v) => [v.at, v.detail])).toEqual([
      [
        10_000,
        '3 adapters loaded (limit 2) for 4000 ms (900 ms of it with no node alone and no fault for 3000 ms)',
      ],
    ]);
    expect(r.excused).toEqual({ stretches: 1, longestMs: 6000 });
  });

  it('(ii) reads when each node decided alone from its own log lines', () => {
    const lines = [
      { at: 100, line: 'warn: poll of http://x timed out' },
      {
        at: 200,
        line: 'error: shared fleet state unavailable (no connection): this node decides from its own state',
      },
      { at: 300, line: 'error: shared fleet state unavailable (again)' },
      { at: 900, line: 'info: shared fleet state is back after 1 s: decisions are shared again' },
      { at: 1500, line: 'error: shared fleet state unavailable (x)' },
    ];
    const spans = new AloneSpans();
    for (const l of lines) spans.push(l.at, l.line);
    expect(spans.until(2000)).toEqual([
      { from: 200, to: 900 },
      { from: 1500, to: 2000 },
    ]);
  });

  it('(iii) flags every place a lease is still open, or could not be read', () => {
    const r = leasesReleased([
      { where: 'Redis', open: 0 },
      { where: 'node 0 local store', open: 2 },
      { where: 'node 1 local store', open: -1 },
    ]);
    expect(r.checks).toBe(3);
    expect(r.violations.map((v) => v.detail)).toEqual([
      '2 lease(s) open in node 0 local store',
      'node 1 local store: could not be read',
    ]);
  });

  it('(iv) allows the budget in each of the windows a span may overlap, and flags more', () => {
    const W = 60_000;
    // 4 loads within 1 s, budget 2: two windows may meet there, so 4 pass and 5 do not.
    const four = [0, 200, 400, 600].map((t, i) => load(t + 100, `a${i}`, 1));
    expect(coldLoadsWithinBudget(four, 2, W).violations).toEqual([]);
    const five = [...four, load(900, 'a4', 1)];
    const r = coldLoadsWithinBudget(five, 2, W);
    expect(r.checks).toBe(5);
    expect(r.violations[0]!.detail).toBe('5 loads within 800 ms (allowed 4)');
    // Spread over three minutes, 2 per minute is within budget.
    const spread = Array.from({ length: 6 }, (_, i) => load(i * 30_000 + 100, `s${i}`, 1));
    expect(coldLoadsWithinBudget(spread, 2, W).violations).toEqual([]);
    expect(coldLoadsWithinBudget(five, 0, W).checks).toBe(0); // no budget configured
    // A store emptied within the span (FLUSHALL at 500 ms) allows one budget more there.
    expect(coldLoadsWithinBudget(five, 2, W, [500]).violations).toEqual([]);
    expect(coldLoadsWithinBudget(five, 2, W, [5000]).violations).toHaveLength(1);
    // A change to another database reaching the nodes in turn (from its first push to its last)
    // allows one budget more to a span it overlaps, though it began before the span's first load.
    expect(coldLoadsWithinBudget(five, 2, W, [{ from: -500, to: 150 }]).violations).toEqual([]);
    expect(coldLoadsWithinBudget(five, 2, W, [{ from: 2000, to: 3000 }]).violations).toHaveLength(1);
  });
});

describe('fault-run schedule', () => {
  const o = { seed: 7, startMs: 2000, endMs: 60_000, nodes: 3, skewMs: 200, maxPartitionMs: 6000 };

  it('is the same for the same seed, another for another seed', () => {
    expect(makeSchedule(o)).toEqual(makeSchedule(o));
    expect(makeSchedule({ ...o, seed: 8 })).not.toEqual(makeSchedule(o));
  });

  it('meets every kind of fault in its first five, one at a time, within the window', () => {
    const s = makeSchedule(o);
    expect(new Set(s.slice(0, 5).map((f) => f.fault.kind))).toEqual(
      new Set(['partition', 'flushall', 'redis-restart', 'redis-record', 'clock-skew']),
    );
    for (const f of s) expect(f.at >= o.startMs && f.at < o.endMs).toBe(true);
    for (const [i, f] of s.entries()) if (i > 0) expect(f.at).toBeGreaterThan(s[i - 1]!.at);
  });
});
