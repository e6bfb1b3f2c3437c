/**
 * The simulation's "a request makes room for its load and no more" (dst/room-check.ts), read off
 * the replica's own adapter log and the unload calls the runtimes sent: on hand-made logs (the
 * 8196ff3 break of a second unload for one load beside a trim, rooms made by two requests at once,
 * a room left unused, the excuses), and on a seed with that break planted in the real code: the
 * store counting a trim's unloading entry against a room made, as before 8196ff3.
 */
import { InvariantBroken, LogChecks, type LoadCall, type WorldView } from '../../dst/invariants';
import type { UnloadCall } from '../../dst/trim-check';
import type { AdapterLogEntry } from '../../sim/http/replica';
import { dstLimits, QUIET } from '../helpers/dst-fixtures';

const URL = 'http://replica-0:8000';
const ROOM = 'a request makes room for its load and no more';

const load = (at: number, name: string, loaded: number): AdapterLogEntry => ({
  at,
  op: 'load',
  name,
  status: 200,
  ms: 100,
  loaded,
});
const unload = (at: number, name: string, loaded: number): AdapterLogEntry => ({
  at,
  op: 'unload',
  name,
  status: 200,
  ms: 5,
  inFlight: 0,
  running: 0,
  waiting: 0,
  loaded,
});
/** An unload call granted 5 ms before it was sent, answered 2 ms after the replica did. */
const call = (at: number, name: string, request?: number): UnloadCall => ({
  at,
  grantedAt: at - 5,
  endedAt: at + 2 + 2,
  url: URL,
  name,
  alone: false,
  ...(request === undefined ? {} : { request }),
});

interface Setup {
  log: AdapterLogEntry[];
  unloads: UnloadCall[];
  loads?: LoadCall[];
  decided?: Record<number, number>;
}

/** The invariant broken once the checks read the whole log, with its detail (none: undefined). */
function broken(s: Setup, max = 2, w: Partial<WorldView> = {}) {
  const checks = new LogChecks(
    [{ url: URL, log: s.log }],
    { ...dstLimits(max), staleLockMs: 11_000 },
    () => false,
    {
      loads: s.loads ?? [],
      failed: [],
      backoffMs: 1000,
      unloads: s.unloads,
      decidedAt: (r) => s.decided?.[r],
    },
  );
  try {
    checks.check({ ...QUIET, ...w });
    return undefined;
  } catch (err) {
    if (err instanceof InvariantBroken) return err.v;
    throw err;
  }
}

/**
 * 8196ff3's break: a, b, c at limit 2 (c landed late). Request 7, for x, unloaded b (2 of 2);
 * a trim unloading c; the store, counting c's unloading entry, granted a second unload for x (a).
 * `trimLast`: the trim answered after a's unload.
 */
function secondUnloadBesideTrim(trimLast = false): Setup {
  const [cAt, aAt] = trimLast ? [5030, 5020] : [5020, 5030];
  return {
    log: [
      load(100, 'a', 1),
      load(200, 'b', 2),
      load(3400, 'c', 3),
      unload(5010, 'b', 2),
      ...(trimLast ? [unload(aAt, 'a', 1), unload(cAt, 'c', 0)] : [unload(cAt, 'c', 1), unload(aAt, 'a', 0)]),
    ],
    unloads: [call(5008, 'b', 7), call(cAt - 2, 'c'), call(aAt - 2, 'a', 7)],
  };
}

describe('the simulation reads a room made for more than one load off the replica log', () => {
  it("8196ff3's break: a second unload for one request beside a trim leaves a slot empty: broken", () => {
    const v = broken(secondUnloadBesideTrim());
    expect(v?.invariant).toBe(ROOM);
    expect(v?.detail).toBe(
      `a unloaded from ${URL} for request 7 (granted at 5023 ms) left 0 loaded, 0 loading and 1 request(s) making room (limit 2)`,
    );
    // The trim answered last: the trim check counts one slot for the request, not two.
    expect(broken(secondUnloadBesideTrim(true))?.invariant).toBe(
      'a trim takes a replica down to its limit, not below',
    );
  });

  it('one unload for the request beside the trim (the fix): holds', () => {
    const s = secondUnloadBesideTrim();
    expect(broken({ ...s, log: s.log.slice(0, -1), unloads: s.unloads.slice(0, -1) })).toBeUndefined();
  });

  it('two requests making room at once, each for its own load: holds', () => {
    // a and b at 2: request 7 unloads a, request 8 (its unload granted while a's was under way) b.
    const s: Setup = {
      log: [load(100, 'a', 1), load(200, 'b', 2), unload(5010, 'a', 1), unload(5016, 'b', 0)],
      unloads: [call(5008, 'a', 7), call(5014, 'b', 8)],
    };
    expect(broken(s)).toBeUndefined();
    // Request 7's unload ended before 8's was granted, 7 still deciding (its recheck, its budget): holds.
    const later = {
      ...s,
      log: [...s.log.slice(0, 3), unload(5040, 'b', 0)],
      unloads: [s.unloads[0]!, call(5038, 'b', 8)],
    };
    expect(broken(later)).toBeUndefined();
    // 7 had sent its load there by then: that load is under way, holds as well.
    const loading: LoadCall = {
      at: 5020,
      url: URL,
      name: 'x',
      proc: 'n0g0',
      sender: 'n0g0r0',
      alone: false,
      request: 7,
    };
    expect(broken({ ...later, loads: [loading] })).toBeUndefined();
    // 7 had decided with no load there (placed elsewhere, refused by the budget): its room showed
    // free in the store's count, and 8's unload emptied a second slot.
    expect(broken({ ...later, decided: { 7: 5020 } })?.invariant).toBe(ROOM);
  });

  it("a request's after-load undo makes no room and is not judged here", () => {
    const s: Setup = {
      log: [load(100, 'a', 1), load(5000, 'x', 2), unload(5010, 'x', 1)],
      unloads: [call(5008, 'x', 7)],
      loads: [
        {
          at: 4900,
          url: URL,
          name: 'x',
          proc: 'n0g0',
          sender: 'n0g0r0',
          alone: false,
          request: 7,
          endedAt: 5002,
        },
      ],
    };
    expect(broken(s, 3)).toBeUndefined();
  });

  it('excused from a node deciding alone, while degraded, after a fault since its grant, near a reset', () => {
    const alone = secondUnloadBesideTrim();
    alone.unloads[2]!.alone = true;
    expect(broken(alone)).toBeUndefined();
    expect(broken(secondUnloadBesideTrim(), 2, { degraded: true })).toBeUndefined();
    expect(broken(secondUnloadBesideTrim(), 2, { lastFaultAt: 5023 })).toBeUndefined();
    expect(broken(secondUnloadBesideTrim(), 2, { resets: [5023 - 11_000] })).toBeUndefined();
    // A fault healed, or a reset, before its grant excuses nothing.
    expect(broken(secondUnloadBesideTrim(), 2, { lastFaultAt: 5022 })?.invariant).toBe(ROOM);
    expect(broken(secondUnloadBesideTrim(), 2, { resets: [5023 - 11_001] })?.invariant).toBe(ROOM);
  });
});
