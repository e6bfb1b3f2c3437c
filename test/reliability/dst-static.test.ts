/**
 * The simulation's "static adapters stay" (dst/static-check.ts), read off the replica's own
 * adapter log: on hand-made logs (an unload of a start-up entry, of a runtime-loaded one, one
 * refused), and on seeds 2462 and 408 (after a FLUSHALL, a load on the replica before the first poll
 * re-adopted its registry; 2462 stands for 362, found so, whose schedule no longer reaches it since a
 * reclaim takes its leases again in one call) with the stores' old classification planted: any load on the record
 * made every entry of that first read a router's, the start-up `sql,chat` with them; and on seed
 * 6268 (18826 as found) with the manager's old reading of "already loaded" planted (a load by the
 * name pattern of the start-up `sql,chat`, taken as the router's).
 */
import { InvariantBroken, LogChecks } from '../../dst/invariants';
import { AS_FOUND, runSeed } from '../../dst/run';
import { DRAWN_FAULT_KINDS } from '../../dst/schedule';
import type { AdapterLogEntry } from '../../sim/http/replica';
import { ReplicaWord } from '../../src/adapters/replica-word';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { ReplicaRecord } from '../../src/fleet/replica-record';
import { dstLimits, QUIET, unloadEntry } from '../helpers/dst-fixtures';

const URL = 'http://replica-1:8000';
const LIMITS = dstLimits(1);
const STATIC = 'static adapters stay';

const unload = (name: string, extra: Partial<AdapterLogEntry> = {}) => unloadEntry(5000, name, 1, extra);

function broken(log: AdapterLogEntry[]): string | undefined {
  const checks = new LogChecks([{ url: URL, log }], LIMITS);
  try {
    checks.check(QUIET);
  } catch (err) {
    if (err instanceof InvariantBroken) return err.v.invariant;
    throw err;
  }
  return undefined;
}

describe('static adapters stay, from the replica log', () => {
  it('breaks on an unload answered 200 of an entry registered at start', () => {
    expect(broken([unload('sql,chat', { static: true })])).toBe(STATIC);
  });

  it('holds for a runtime-loaded entry, and for a static one the replica refused to unload', () => {
    expect(broken([unload('chat')])).toBeUndefined();
    expect(broken([unload('sql,chat', { static: true, status: 404 })])).toBeUndefined();
  });
});

describe('the old classification planted in the real code', () => {
  const beginLoad = MemoryFleetStore.prototype.beginLoad;
  type Reconcile = (
    r: ReplicaRecord,
    registry: unknown,
    at: number,
    scrapedAt: number,
    managed?: Managed,
    recheck?: boolean,
  ) => void;
  type Managed = (name: string, path: string) => boolean;
  const proto = MemoryFleetStore.prototype as unknown as { reconcile: Reconcile };
  const reconcile = proto.reconcile;
  afterEach(() => {
    MemoryFleetStore.prototype.beginLoad = beginLoad;
    proto.reconcile = reconcile;
  });

  /**
   * Before the fix: any load begun on the record marked every later new registry entry a router's,
   * and having loaded there outweighed a path no configuration loads (a "not managed" read as "not
   * known": seed 310213 made that the stores' own defence since).
   */
  const anyLoadMarksAll = () => {
    MemoryFleetStore.prototype.beginLoad = async function (url, adapter, at, limit) {
      const fence = await beginLoad.call(this, url, adapter, at, limit);
      const r = (this as unknown as { replicas: Map<string, ReplicaRecord> }).replicas.get(url);
      if (fence !== null && r) r.everLoaded = true;
      return fence;
    };
    proto.reconcile = function (r, registry, at, scrapedAt, managed, recheck) {
      const unknownIfNot = managed && (((n: string, p: string) => managed(n, p) || undefined) as Managed);
      reconcile.call(this, r, registry, at, scrapedAt, unknownIfNot, recheck);
    };
  };

  /** The seeds' schedules as drawn before slow paths were (408 draws one now). */
  const asFound = { ...AS_FOUND, faults: DRAWN_FAULT_KINDS };

  // 2462 broke it on replica-0 until the shared-loads and failover changes (2026-12-06) moved its
  // schedule: sql,chat went off replica-1 (at 2,916 ms), the same break. Since a poll round scrapes
  // the replicas it knows beside the list's read (branch poll-specs) it goes off replica-0 again
  // (at 2,913 ms).
  it.each([
    [2462, 'http://replica-0:8000'],
    [408, 'http://replica-2:8000'],
  ])(
    'seed %i breaks it (sql,chat off %s), and holds with the fix',
    async (seed, url) => {
      anyLoadMarksAll();
      const r = await runSeed(seed, asFound);
      expect(r.violation?.invariant).toBe(STATIC);
      expect(r.violation?.detail).toContain(`sql,chat (registered at ${url}'s start) unloaded`);
      MemoryFleetStore.prototype.beginLoad = beginLoad;
      proto.reconcile = reconcile;
      expect((await runSeed(seed, asFound)).violation).toBeUndefined();
    },
    30_000,
  );
});

describe('the old reading of "already loaded" planted in the real code', () => {
  const registeredAtStart = ReplicaWord.prototype.registeredAtStart;
  afterEach(() => {
    ReplicaWord.prototype.registeredAtStart = registeredAtStart;
  });

  it('seed 6268 breaks it (sql,chat off replica-1), and holds with the fix', async () => {
    // Found as 18826 (sql,chat off replica-0), whose schedule breaks nothing since the shared-loads
    // and failover changes (2026-12-06) moved it; 6268, the first of seeds 2501-7500 swept with the
    // plant, unloads sql,chat from replica-1 at 5,049 ms.
    ReplicaWord.prototype.registeredAtStart = async () => false;
    const r = await runSeed(6268, AS_FOUND);
    expect(r.violation?.invariant).toBe(STATIC);
    expect(r.violation?.detail).toContain(`sql,chat (registered at http://replica-1:8000's start) unloaded`);
    ReplicaWord.prototype.registeredAtStart = registeredAtStart;
    expect((await runSeed(6268, AS_FOUND)).violation).toBeUndefined();
  }, 30_000);
});
