/**
 * The simulation's cold-load budget check (dst/invariants.ts) against what docs/reliability.md
 * promises: the fleet starts at most `cold_loads_per_minute` loads per window (plus one), and a
 * request is charged once however often it loads (an undone or failed load escalated elsewhere).
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
  const checks = new LogChecks([], LIMITS, () => false, { loads, failed: [], backoffMs: 1000 });
  try {
    checks.check({ now: 10_000, step: 1, degraded: false, lastFaultAt: -Infinity, resets: [] });
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
