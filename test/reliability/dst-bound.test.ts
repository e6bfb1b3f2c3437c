/**
 * The `max_in_flight` check (dst/bound-check.ts) on hand-made decisions: a bounded request decided
 * within half its objective onto a replica holding its bound of the router's requests breaks it;
 * what its decision could not count does not (another node's lease its views could not show yet,
 * a dead process's, one on the other state, one across a fault, a node deciding alone, a request
 * the replica answered already). Seeds reach it through dst/overload.ts's bounded batch class.
 */
import {
  joinedPastBound,
  leaseAgedOut,
  owedInFlight,
  type BoundDecision,
  type Flight,
} from '../../dst/bound-check';
import { BEFORE_CLIENTS, runSeed } from '../../dst/run';
import { generate } from '../../dst/schedule';
import { BOUND_INVARIANT } from '../../dst/world';
import * as inFlight from '../../src/router/in-flight-here';
import { RoomWait } from '../../src/router/room-wait';
import type { FleetRuntime } from '../../src/runtime';

const URL = 'http://replica-0:8000';
// Runtimes by identity only: the check compares deciders, it never reads them.
const mine = { rt: 'node 0' } as unknown as FleetRuntime;
const theirs = { rt: 'node 1' } as unknown as FleetRuntime;

/** Request 9, bound 1, decided at 1000 ms (hold end number 50) 100 ms after it came, views read from 900 ms. */
function decision(o: Partial<BoundDecision> = {}): BoundDecision {
  return {
    request: 9,
    seq: 50,
    at: 1000,
    viewsFrom: 900,
    waitedMs: 100,
    bound: 1,
    objectiveMs: 2500,
    url: URL,
    decider: mine,
    db: 0,
    live: new Set(['n0g0', 'n1g0']),
    degraded: false,
    lastFaultAt: -Infinity,
    alone: false,
    ...o,
  };
}

/** Request 1 of node 1, came at 500 ms, decided (hold end 10) and sent at 600 ms, still running. */
function flight(o: Partial<Flight> = {}): Flight {
  return {
    request: 1,
    url: URL,
    decider: theirs,
    proc: 'n1g0',
    db: 0,
    arrivedAt: 500,
    decidedSeq: 10,
    sentAt: 600,
    alone: false,
    ...o,
  };
}

const own = (o: Partial<Flight> = {}) => flight({ decider: mine, proc: 'n0g0', ...o });

describe('a bounded class joins a replica at its bound only after its wait', () => {
  it("breaks on its own runtime's request decided before it, sent or not yet", () => {
    expect(joinedPastBound(decision(), [own()])).toMatch(/^request 9 \(max_in_flight 1\) decided onto/);
    // Decided at the same moment, one hold end before it, sent after it was decided (b19fa25's race).
    expect(joinedPastBound(decision(), [own({ decidedSeq: 49, sentAt: 1200 })])).toBeDefined();
  });

  it("counts another node's request its views must show", () => {
    expect(joinedPastBound(decision(), [flight()])).toBeDefined();
    expect(joinedPastBound(decision({ bound: 2 }), [flight(), own({ request: 2 })])).toBeDefined();
  });

  it('holds below the bound, past half its objective, or on another replica', () => {
    expect(joinedPastBound(decision({ bound: 2 }), [own()])).toBeUndefined();
    expect(joinedPastBound(decision({ waitedMs: 1250 }), [own()])).toBeUndefined();
    expect(joinedPastBound(decision(), [own({ url: 'http://replica-1:8000' })])).toBeUndefined();
    // A class that ages (behind a higher one): its wait and the start its decision predicted
    // reach half its objective (100 + 1150 ms of 1250), not before (100 + 1149).
    expect(joinedPastBound(decision({ agingStartMs: 1150 }), [own()])).toBeUndefined();
    expect(joinedPastBound(decision({ agingStartMs: 1149 }), [own()])).toMatch(
      /predicted to start 1149 ms on/,
    );
  });

  it('does not count a request the replica answered before the decision, nor one decided after it', () => {
    expect(joinedPastBound(decision(), [own({ doneAt: 1000 })])).toBeUndefined();
    expect(joinedPastBound(decision(), [own({ doneAt: 1001 })])).toBeDefined();
    expect(joinedPastBound(decision(), [own({ decidedSeq: 51, sentAt: 1000 })])).toBeUndefined();
    // No hold end seen: sent before the decision stands for it.
    expect(joinedPastBound(decision(), [own({ decidedSeq: undefined, sentAt: 999 })])).toBeDefined();
    expect(joinedPastBound(decision(), [own({ decidedSeq: undefined, sentAt: 1000 })])).toBeUndefined();
  });

  // Each excuse: the other node's request (which alone breaks it above) not owed.
  it.each([
    ['sent after its views could be read', decision(), flight({ sentAt: 900 })],
    ['on the other state (a record change)', decision(), flight({ db: 1 })],
    [
      'its process dead at the decision (its leases go with it)',
      decision({ live: new Set(['n0g0']) }),
      flight(),
    ],
    ['a fault begun or healed since it came', decision({ lastFaultAt: 500 }), flight()],
    ['a fault under way or a node alone at the decision', decision({ degraded: true }), flight()],
    ['the deciding router alone since its views', decision({ alone: true }), flight()],
    ['its router alone since it came', decision(), flight({ alone: true })],
  ])("excuses another node's request %s", (_why, d, f) => {
    expect(owedInFlight(d, [f])).toEqual([]);
    expect(joinedPastBound(d, [f])).toBeUndefined();
  });

  it('never excuses its own runtime its requests for a fault, a node alone or its views', () => {
    const d = decision({ lastFaultAt: 999, degraded: true, alone: true, viewsFrom: 0, live: new Set() });
    expect(joinedPastBound(d, [own({ sentAt: 990 })])).toBeDefined();
  });

  // Seed 3169793: another node's request sent into a hung replica, its lease reclaimed by age at
  // 950 ms (no word of the replica renews it), is no longer in the view the decision read. Its own
  // runtime's is: its process still holds the lease open and counts it on top of the view's
  // (src/router/in-flight-here.ts, ReplicaView.ownInFlight), never excused.
  it("excuses another node's request whose lease was reclaimed by age on the wire, and only that", () => {
    const hung = { lease: 'n1g0-1', reachedAt: 600, reachedHung: true };
    const reclaimedAt =
      (at: number | undefined, open = false) =>
      (f: Flight, by: number) =>
        leaseAgedOut(f, at, open, by);
    expect(joinedPastBound(decision(), [flight(hung)], reclaimedAt(950))).toBeUndefined();
    expect(joinedPastBound(decision(), [own({ ...hung, lease: 'n0g0-1' })], reclaimedAt(950))).toBeDefined();
    // Still on its way (a slow path), or reaching the replica after its lease went.
    expect(joinedPastBound(decision(), [flight({ lease: 'n1g0-1' })], reclaimedAt(950))).toBeUndefined();
    expect(
      joinedPastBound(decision(), [flight({ lease: 'n1g0-1', reachedAt: 960 })], reclaimedAt(950)),
    ).toBeUndefined();
    expect(joinedPastBound(decision(), [own({ lease: 'n0g0-1' })], reclaimedAt(950))).toBeDefined();
    // Not: in the engine before it went (a poll finding it renews it: seed 834440's base-model
    // lease), reclaimed after the decision or before it was sent, taken again, or no lease.
    expect(
      joinedPastBound(decision(), [flight({ lease: 'n1g0-1', reachedAt: 600 })], reclaimedAt(950)),
    ).toBeDefined();
    expect(joinedPastBound(decision(), [flight(hung)], reclaimedAt(1001))).toBeDefined();
    expect(joinedPastBound(decision(), [flight(hung)], reclaimedAt(600))).toBeDefined();
    expect(joinedPastBound(decision(), [flight(hung)], reclaimedAt(950, true))).toBeDefined();
    expect(joinedPastBound(decision(), [flight(hung)], reclaimedAt(undefined))).toBeDefined();
    expect(
      joinedPastBound(decision(), [flight({ reachedAt: 600, reachedHung: true })], reclaimedAt(950)),
    ).toBeDefined();
  });
});

describe('seeds with the bound', () => {
  // Seed 176 (a bounded batch class, max_in_flight 2): node 1's request in flight on replica-0 in
  // the view, node 2's two batch requests woken by the same finish, the first joining: the higher
  // of the view's count (1) and node 2's own (1) let the second go (3 in flight). Held now.
  it('seed 176 draws a bounded batch class, waits at its bound, and holds', async () => {
    expect(
      generate(176, { actions: 16 }).world.sloClasses?.find((c) => c.name === 'batch')?.max_in_flight,
    ).toBe(2);
    const r = await runSeed(176, BEFORE_CLIENTS);
    expect(r.violation?.invariant).not.toBe(BOUND_INVARIANT);
    expect(r.violation).toBeUndefined();
    expect(r.boundWaits).toBeGreaterThan(0);
  }, 30_000);
});

describe('the bound, planted away in the real code', () => {
  type HoldsNow = (this: RoomWait, now: number, decided: { inFlight?: number }) => boolean;
  const proto = RoomWait.prototype as unknown as { holdsNow: HoldsNow };
  const holdsNow = proto.holdsNow;
  afterEach(() => {
    proto.holdsNow = holdsNow;
    jest.restoreAllMocks();
  });

  // b19fa25's race back: the view's count alone (its snapshot misses the requests decided meanwhile).
  it('seed 37 breaks it with the view alone counted, and holds without the plant', async () => {
    jest.spyOn(inFlight, 'inFlightHere').mockImplementation((_rt, _url, viewed) => viewed);
    const planted = await runSeed(37, BEFORE_CLIENTS);
    expect(planted.violation?.invariant).toBe(BOUND_INVARIANT);
    expect(planted.violation?.detail).toMatch(/with 2 in flight there \(2 its runtime's\)/);
    jest.restoreAllMocks();
    expect((await runSeed(37, BEFORE_CLIENTS)).violation).toBeUndefined();
  }, 30_000);

  // The bound's `>=` turned `>`: a request joins a replica holding exactly its bound. Seed 12 until a
  // load kept its leases young on a timer during its call (branch call-keep), which renews one there and
  // moved its schedule; swept with the plant, seeds 19, 30, 37 and 54 of 1-54 break.
  it('seed 19 breaks it with one more let in, and holds without the plant', async () => {
    proto.holdsNow = function (now, decided) {
      return holdsNow.call(this, now, { ...decided, inFlight: (decided.inFlight ?? 0) - 1 });
    };
    const planted = await runSeed(19);
    expect(planted.violation?.invariant).toBe(BOUND_INVARIANT);
    proto.holdsNow = holdsNow;
    expect((await runSeed(19)).violation).toBeUndefined();
  }, 30_000);
});
