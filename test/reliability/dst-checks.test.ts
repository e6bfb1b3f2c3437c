/**
 * The simulation's checks (dst/invariants.ts) against what docs/reliability.md promises: the fleet
 * starts at most `cold_loads_per_minute` loads per window (plus one), a request charged once however
 * often it loads (an undone or failed load escalated elsewhere); a replica past the limit by at most
 * one per node, unless loads decided degraded (unseen by each other) land together.
 */
import { InvariantBroken, LogChecks, type LoadCall } from '../../dst/invariants';

const LIMITS = {
  maxLoadedAdapters: 1,
  nodes: 3,
  coldLoadsPerMinute: 3,
  excessGraceMs: 5000,
  quietAfterMs: 4000,
};

function checked(calls: Omit<LoadCall, 'proc' | 'sender' | 'alone'>[]): string | undefined {
  const loads = calls.map((c) => ({ ...c, proc: 'n0g0', sender: 'n0g0r0', alone: false }));
  return broken(new LogChecks([], LIMITS, () => false, { loads, failed: [], backoffMs: 1000 }), 10_000);
}

/** The invariant the checks find broken at `now` (none: undefined). */
function broken(checks: LogChecks, now: number): string | undefined {
  try {
    checks.check({ now, step: 1, degraded: false, lastFaultAt: -Infinity, resets: [] });
    return undefined;
  } catch (err) {
    if (err instanceof InvariantBroken) return err.v.invariant;
    throw err;
  }
}

describe('the simulation counts cold loads as the budget charges them', () => {
  const url = 'http://replica-0:8000';

  it('seven requests each starting a load within two windows break the budget of 3', () => {
    const calls = Array.from({ length: 7 }, (_, i) => ({ at: i * 100, url, name: `a${i}`, request: i }));
    expect(checked(calls)).toBe('cold loads within the budget per window');
  });

  it("five requests, one of them loading three times, stay within it (seed 1076's shape)", () => {
    const requests = [0, 1, 2, 3, 3, 4, 3];
    const calls = requests.map((request, i) => ({ at: i * 100, url, name: `a${request}`, request }));
    expect(checked(calls)).toBeUndefined();
  });

  it('load calls sent for no request are each counted', () => {
    const calls = Array.from({ length: 7 }, (_, i) => ({ at: i * 100, url, name: `a${i}` }));
    expect(checked(calls)).toBe('cold loads within the budget per window');
  });
});

describe('the simulation bounds a replica past the limit as docs/reliability.md does', () => {
  const url = 'http://replica-0:8000';
  /** Six loads landing on one replica (limit 1, three nodes), each sent degraded or not. */
  const landed = (degraded: boolean): string | undefined => {
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    const log = names.map((name, i) => ({
      at: 100 + i,
      op: 'load' as const,
      name,
      status: 200,
      ms: 1,
      loaded: i + 1,
    }));
    const loads = names.map((name, i) => ({
      at: i,
      url,
      name,
      proc: `n${i % 3}g0`,
      sender: `n${i % 3}g0r0`,
      alone: false,
      degraded,
    }));
    return broken(
      new LogChecks([{ url, log }], LIMITS, () => false, { loads, failed: [], backoffMs: 1000 }),
      200,
    );
  };

  it('more than one load per node past the limit, decided while Redis answered everyone, breaks it', () => {
    expect(landed(false)).toBe('loaded adapters within max_loaded_adapters');
  });

  it('loads decided while nodes decided alone may land together past it (not covered by the docs)', () => {
    expect(landed(true)).toBeUndefined();
  });
});
