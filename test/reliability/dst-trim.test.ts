/**
 * The simulation's "a trim takes a replica down to its limit, not below" (dst/trim-check.ts),
 * read off the replica's own adapter log and the unload calls the runtimes sent: on hand-made logs
 * (the trim break of two trims after one excess, a room made for a request, the excuses), and on
 * seeds with the break planted in the real code: the store granting a trim on the caller's reading
 * as before the fix (08313b6), alone (seed 14646) and beside a trim on a stale reading (seed 228).
 */
import { InvariantBroken, LogChecks, type LoadCall, type WorldView } from '../../dst/invariants';
import { AS_FOUND, runSchedule, runSeed } from '../../dst/run';
import { generate, type Schedule } from '../../dst/schedule';
import type { UnloadCall } from '../../dst/trim-check';
import { occupyingSlots } from '../../src/adapters/eviction';
import type { IdleUnload } from '../../src/adapters/idle-unload';
import type { AdapterPolicy } from '../../src/adapters/policy';
import { Room } from '../../src/adapters/room';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { WaitingLease } from '../../src/router/waiting-lease';
import type { FleetStore } from '../../src/fleet/store';
import {
  setAsidePollOrder,
  setAsideScheduleMoves,
  dstLimits,
  loadEntry,
  QUIET,
  unloadEntry,
} from '../helpers/dst-fixtures';

const URL = 'http://replica-0:8000';
const LIMITS = dstLimits(2);
const TRIM = 'a trim takes a replica down to its limit, not below';

const load = loadEntry;
const unload = unloadEntry;

/**
 * A replica limited to 2 that held 3 (c landed late), then unloads of a and b, `bFor` saying
 * which request's decision sent b's (undefined: a trim after a poll, like a's).
 */
function excessThenTwoUnloads(bFor: number | undefined, extra: Partial<Record<'loads', LoadCall[]>> = {}) {
  const log = [
    load(100, 'a', 1),
    load(200, 'b', 2),
    load(3400, 'c', 3),
    unload(5010, 'a', 2),
    unload(5030, 'b', 1),
  ];
  const unloads: UnloadCall[] = [
    { at: 5005, url: URL, name: 'a', alone: false },
    { at: 5025, url: URL, name: 'b', alone: false, ...(bFor === undefined ? {} : { request: bFor }) },
  ];
  return { log, calls: { loads: extra.loads ?? [], failed: [], backoffMs: 1000, unloads } };
}

/** The invariant the checks find broken once they read the whole log (none: undefined). */
function broken(
  setup: Pick<ReturnType<typeof excessThenTwoUnloads>, 'log' | 'calls'>,
  w: Partial<WorldView> = {},
  alone = false,
  maxLoadedAdapters = 2,
) {
  const checks = new LogChecks(
    [{ url: URL, log: setup.log }],
    { ...LIMITS, maxLoadedAdapters, staleLockMs: 11_000 },
    () => alone,
    setup.calls,
  );
  try {
    checks.check({ ...QUIET, ...w });
    return undefined;
  } catch (err) {
    if (err instanceof InvariantBroken) return err.v;
    throw err;
  }
}

describe('the simulation reads a trim below the limit off the replica log', () => {
  it('two trims after one excess (the trim break) leave a slot empty: broken', () => {
    const v = broken(excessThenTwoUnloads(undefined));
    expect(v?.invariant).toBe(TRIM);
    expect(v?.detail).toBe(
      `b trimmed from ${URL} (sent at 5025 ms, for no request) left 1 loaded and 0 loading (limit 2)`,
    );
  });

  it('the second unload sent by a request making room for its load: not a trim, holds', () => {
    expect(broken(excessThenTwoUnloads(7))).toBeUndefined();
  });

  it('a load under way there when the trim was sent fills the slot back: holds', () => {
    const loading: LoadCall = { at: 4000, url: URL, name: 'd', proc: 'n0g0', sender: 'n0g0r0', alone: false };
    expect(broken(excessThenTwoUnloads(undefined, { loads: [loading] }))).toBeUndefined();
    // Answered before the trim was sent: the registry's count already holds it.
    const landed = { ...loading, endedAt: 4100 };
    expect(broken(excessThenTwoUnloads(undefined, { loads: [landed] }))?.invariant).toBe(TRIM);
  });

  it('excused while the world is degraded, after a fault since it was sent, or from a node deciding alone', () => {
    expect(broken(excessThenTwoUnloads(undefined), { degraded: true })).toBeUndefined();
    expect(broken(excessThenTwoUnloads(undefined), { lastFaultAt: 5026 })).toBeUndefined();
    const alone = excessThenTwoUnloads(undefined);
    alone.calls.unloads[1]!.alone = true;
    expect(broken(alone)).toBeUndefined();
    // A fault healed before the trim was sent excuses nothing.
    expect(broken(excessThenTwoUnloads(undefined), { lastFaultAt: 5000 })?.invariant).toBe(TRIM);
  });

  it('excused within a load lock of a reset of the shared state (a lock brought back), not after', () => {
    expect(broken(excessThenTwoUnloads(undefined), { resets: [5025 - 11_000] })).toBeUndefined();
    expect(broken(excessThenTwoUnloads(undefined), { resets: [{ from: 0, to: 1000 }] })).toBeUndefined();
    expect(broken(excessThenTwoUnloads(undefined), { resets: [5025 - 11_001] })?.invariant).toBe(TRIM);
  });
});

/**
 * Seed 187013's shape (limit 1): chat, loaded by a node deciding alone while a was loading, left
 * the replica 2 of 1. A request for math, waiting for room, was granted the unload of a while a
 * trim was granted chat: both right by the store's count, both answered, the registry empty until
 * math's load (sent after) landed. `undo`: the request's unload of a is the after-load undo of its
 * own load of a instead (seed 125407's kind), which makes no room for a load to come.
 */
function roomBesideTrim(o: { undo?: boolean; roomEndedAt?: number } = {}) {
  const log = [load(100, 'a', 1), load(3400, 'chat', 2), unload(5852, 'a', 1), unload(5853, 'chat', 0)];
  const unloads: UnloadCall[] = [
    {
      at: 5850,
      url: URL,
      name: 'a',
      alone: false,
      request: 15,
      ...(o.roomEndedAt ? { endedAt: o.roomEndedAt } : {}),
    },
    { at: 5851, url: URL, name: 'chat', alone: false },
  ];
  const aLoad: LoadCall = {
    at: 0,
    url: URL,
    name: 'a',
    proc: 'n0g0',
    sender: 'n0g0r0',
    alone: false,
    endedAt: 100,
  };
  const loads = o.undo ? [{ ...aLoad, request: 15 }] : [aLoad];
  // Request 15 decided (placed elsewhere, say) just after its unload ended: its room was left unused.
  const decidedAt = (r: number) => (o.roomEndedAt && r === 15 ? o.roomEndedAt + 0.1 : undefined);
  return { log, calls: { loads, failed: [], backoffMs: 1000, unloads, decidedAt } };
}

describe('a trim beside a request making room there (seed 187013)', () => {
  it("a request's make-room unload under way while the trim was: one slot for its load, holds", () => {
    expect(broken(roomBesideTrim(), {}, false, 1)).toBeUndefined();
  });

  it('an after-load undo under way beside it makes no room: broken', () => {
    expect(broken(roomBesideTrim({ undo: true }), {}, false, 1)?.detail).toBe(
      `chat trimmed from ${URL} (sent at 5851 ms, for no request) left 0 loaded and 0 loading (limit 1)`,
    );
  });

  it('a room made before the trim was sent, then left unused: in the count the trim was granted on, broken', () => {
    expect(broken(roomBesideTrim({ roomEndedAt: 5850.5 }), {}, false, 1)?.invariant).toBe(TRIM);
    // Its request still deciding then (its recheck, its budget): its load is to come, holds.
    const deciding = roomBesideTrim({ roomEndedAt: 5850.5 });
    deciding.calls.decidedAt = () => undefined;
    expect(broken(deciding, {}, false, 1)).toBeUndefined();
  });
});

describe('the trim break planted in the real code', () => {
  const trim = Room.prototype.trim;
  const beginUnload = MemoryFleetStore.prototype.beginUnload;
  const EXCESS = '\u0000excess';

  /**
   * Room.trim reading the replica once (a stale reading) for every unload of its loop: it goes on
   * trimming until the store refuses, or no idle adapter is left.
   */
  const staleTrim = async function (this: Room, url: string, policy: AdapterPolicy): Promise<void> {
    const room = this as unknown as { store: FleetStore; idleUnload: IdleUnload };
    const residents = await room.store.residents(url);
    const occupying = occupyingSlots(residents, policy.isStatic);
    if (occupying.length <= policy.maxLoadedAdapters) return;
    const configuredStatic = residents.filter((r) => r.state !== 'static' && policy.isStatic(r.name));
    const limit = policy.maxLoadedAdapters + configuredStatic.length;
    while (await room.idleUnload.evictOne(url, occupying, policy, (v) => v.lastUsed, EXCESS, limit));
  };

  // Only 14646's and 125407's near schedules set aside the schedule moves (no replacement found yet),
  // 14646's the poll order too; 228
  // breaks and holds on the code as it is.
  let undo: (() => void) | undefined;
  afterEach(() => {
    undo?.();
    undo = undefined;
    Room.prototype.trim = trim;
    MemoryFleetStore.prototype.beginUnload = beginUnload;
  });

  /** The store grants a trim on the caller's reading, as before 08313b6: limit Infinity skips its count. */
  const grantOnReading = () => {
    MemoryFleetStore.prototype.beginUnload = function (url, adapter, at, ttlMs, forAdapter, limit) {
      const trimming = forAdapter?.startsWith('\u0000') === true;
      return beginUnload.call(this, url, adapter, at, ttlMs, forAdapter, trimming ? Infinity : limit);
    };
  };

  /**
   * Seed 14646's schedule with lease_max_age_ms 5,000 for the 4,000 every seed draws. Seed 1395 broke
   * so until a load queued behind a room lock stopped waiting once its adapter was read resident
   * (src/adapters/room-queue.ts), which changed its schedule; 14646, found by sweeping seeds 1-20000
   * with the plant, is the only one there that breaks it and holds without. Since a load keeps its
   * requests' leases young just before it turns `loaded` (src/router/waiting-lease.ts, branch
   * lease-renewal) it runs otherwise: it was replayed with `WaitingLease.keep` switched off. Swept
   * with the plant and the renewal on (a script outside the repository, seeds 1-300 and
   * 20,001-21,000): no seed. Its max age moved, 5,000 ms breaks it with a fresh lease taken
   * (4,500, 6,000 and 8,000 ms hold); the renewal stays on. Since a poll round scrapes the replicas
   * it knows beside the list's read, and a poll reads Redis's clock beside its scrape (branch
   * poll-specs), no max age breaks it (swept 2,000-10,000 by 10): it replays with the poller's order
   * before that set aside too (`setAsidePollOrder`), `math` off replica-0 at 5,014 ms as before.
   */
  const nearly14646 = (): Schedule => {
    const s = generate(14646, AS_FOUND);
    return { ...s, world: { ...s.world, leaseMaxAgeMs: 5000 } };
  };

  it('the fix reverted alone: seed 14646, its lease max age 5,000 ms, breaks it (a second trim on the count the first left at the limit)', async () => {
    const keep = jest.spyOn(WaitingLease.prototype, 'keep');
    const renewed = () => keep.mock.results.filter((r) => r.value !== undefined).length;
    try {
      const moves = setAsideScheduleMoves();
      const pollOrder = setAsidePollOrder();
      undo = () => {
        pollOrder();
        moves();
      };
      grantOnReading();
      const r = await runSchedule(nearly14646());
      expect(r.violation?.invariant).toBe(TRIM);
      expect(r.violation?.detail).toMatch(
        /^math trimmed from http:\/\/replica-0:8000 .* left 0 loaded and 0 loading \(limit 1\)$/,
      );
      // The renewal ran: a waiting request took a fresh lease on the way.
      expect(renewed()).toBeGreaterThan(0);
      MemoryFleetStore.prototype.beginUnload = beginUnload;
      expect((await runSchedule(nearly14646())).violation).toBeUndefined();
    } finally {
      keep.mockRestore();
    }
  }, 30_000);

  // Seed 923 broke so until a load's landing kept its requests' leases young (src/adapters/load-call.ts,
  // branch lease-renewal), which changed its schedule; 228, found by sweeping seeds 1-228 with the plant
  // (it broke so on an older code too), has the same shape: `math` trimmed off replica-1, 3 loaded of 4.
  it('with the store granting a trim on the caller reading (before the fix): seed 228 breaks it', async () => {
    // It holds with the plant since a node's first poll round scrapes its local copy's replicas at
    // once (branch poll-specs): it replays with the poller's order before it.
    undo = setAsidePollOrder();
    Room.prototype.trim = staleTrim;
    grantOnReading();
    const r = await runSeed(228, AS_FOUND);
    expect(r.violation?.invariant).toBe(TRIM);
    expect(r.violation?.detail).toMatch(
      /^math trimmed from http:\/\/replica-1:8000 .* left 3 loaded and 0 loading \(limit 4\)$/,
    );
  }, 30_000);

  it("with the store's count (the fix): the same stale trim is refused, seed 228 holds", async () => {
    Room.prototype.trim = staleTrim;
    const r = await runSeed(228, AS_FOUND);
    expect(r.violation).toBeUndefined();
  }, 30_000);

  /**
   * The store counting loads under way toward a trim's excess, as before the seed 125407 fix: the
   * limit it is given lowered by them, read off its entries with no await (the schedule unchanged).
   */
  const countLoadsUnderWay = () => {
    type Entries = { replicas: Map<string, { residency: { values(): Iterable<{ state: string }> } }> };
    MemoryFleetStore.prototype.beginUnload = function (url, adapter, at, ttlMs, forAdapter, limit) {
      const entries = (this as unknown as Entries).replicas.get(url)?.residency.values() ?? [];
      const loading = [...entries].filter((e) => e.state === 'loading').length;
      const trimming = forAdapter?.startsWith('\u0000') === true && limit !== undefined;
      return beginUnload.call(this, url, adapter, at, ttlMs, forAdapter, trimming ? limit - loading : limit);
    };
  };

  /**
   * Seed 125407's schedule with its slow load landing 66 ms sooner (slowMs 2,812 for 2,878; 2,827 until
   * a load call that failed read the replica's registry, a round trip more; 2,820 until a load kept its
   * lease young on a timer during its call, branch call-keep, which renews it during this slow load:
   * 11 values from 2,808 to 2,819 break it now, swept 2,700-2,950). The
   * seed broke so until each Redis link kept its order, which changed its schedule (the slow load
   * is team,a's now, trimmed at 3,925 ms before sql landed at 3,984 ms: no undo beside the trim);
   * about 14,000 seeds from 1 swept with the plant (stopped there) found no other.
   */
  const nearly125407 = (): Schedule => {
    const s = generate(125407, AS_FOUND);
    return { ...s, actions: s.actions.map((a) => (a.kind === 'slow-load' ? { ...a, slowMs: 2812 } : a)) };
  };

  it('a trim counting a load under way beside its after-load undo: seed 125407, its slow load 66 ms sooner, breaks it; holds with the fix', async () => {
    // team,a, given up by its loader (a slow load), landed; a poll adopted it while sql was loading
    // there (limit 1). sql landed, its after-load check undid it; the trim, counting sql, took team,a.
    undo = setAsideScheduleMoves();
    countLoadsUnderWay();
    const r = await runSchedule(nearly125407());
    expect(r.violation?.invariant).toBe(TRIM);
    expect(r.violation?.detail).toMatch(
      /^team,a trimmed from http:\/\/replica-0:8000 .* left 0 loaded and 0 loading \(limit 1\)$/,
    );
    MemoryFleetStore.prototype.beginUnload = beginUnload;
    expect((await runSchedule(nearly125407())).violation).toBeUndefined();
  }, 30_000);
});
