/**
 * Unit test of LoadBackoff (src/adapters/backoff.ts, one module), written against the survivors
 * of its mutation run (docs/reliability/mutation-testing.md): each failed load doubles the wait
 * before the next attempt on that replica, from the base to the bound; the wait ends exactly at
 * its end; a success starts again from the base; entries are bounded. The clock is a counter.
 */
import type { Clock } from '../../src/clock';
import { refusal } from '../helpers/refusal';
import { BACKOFF_ENTRIES, LoadBackoff } from '../../src/adapters/backoff';

const policy = { backoffBaseMs: 1_000, backoffMaxMs: 5_000 };
const A = 'http://a:8000';
const B = 'http://b:8000';
const C = 'http://c:8000';

function setup() {
  const t = { now: 1_000_000 };
  const clock: Clock = { now: () => t.now, after: () => () => undefined };
  return { t, b: new LoadBackoff(clock) };
}

/** How long `key` waits from now, read as the first moment check lets it through. */
function waitOf(t: { now: number }, b: LoadBackoff, key: string): number {
  const start = t.now;
  for (let ms = 0; ms <= 10_000; ms += 250) {
    t.now = start + ms;
    if (!refusal(() => b.check(A, key))) {
      t.now = start;
      return ms;
    }
  }
  t.now = start;
  return Infinity;
}

describe('LoadBackoff', () => {
  it('doubles the wait per failure from the base up to the bound', () => {
    const { t, b } = setup();
    expect(waitOf(t, b, 'k')).toBe(0);
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      b.fail(A, 'k', policy, 'the replica answered 500');
      waits.push(waitOf(t, b, 'k'));
    }
    expect(waits).toEqual([1_000, 2_000, 4_000, 5_000, 5_000]);
  });

  it('refuses with a 503, its Retry-After rounded up, and the failure named; free at the end exactly', () => {
    const { t, b } = setup();
    b.fail(A, 'k', { backoffBaseMs: 2_500, backoffMaxMs: 60_000 }, 'why-text');
    const e = refusal(() => b.check(A, 'k'));
    expect(e?.code).toBe('adapter_load_backoff');
    expect(e?.status).toBe(503);
    expect(e?.retryAfterS).toBe(3);
    expect(e?.message).toContain('why-text');
    t.now += 2_499;
    expect(refusal(() => b.check(A, 'k'))?.retryAfterS).toBe(1);
    t.now += 1;
    expect(refusal(() => b.check(A, 'k'))).toBeUndefined();
    // Another key is not held.
    t.now -= 2_500;
    expect(refusal(() => b.check(A, 'other'))).toBeUndefined();
  });

  it('a success starts the next failure from the base again', () => {
    const { t, b } = setup();
    b.fail(A, 'k', policy, 'w');
    b.fail(A, 'k', policy, 'w');
    b.clear(A, 'k');
    expect(waitOf(t, b, 'k')).toBe(0);
    expect(b.size).toBe(0);
    b.fail(A, 'k', policy, 'w');
    expect(waitOf(t, b, 'k')).toBe(1_000);
  });

  it('keeps at most BACKOFF_ENTRIES, the least recently used out first', () => {
    const { t, b } = setup();
    for (let i = 0; i <= BACKOFF_ENTRIES; i++) b.fail(A, `k${i}`, policy, 'w');
    expect(b.size).toBe(BACKOFF_ENTRIES);
    expect(waitOf(t, b, 'k0')).toBe(0);
    expect(waitOf(t, b, 'k1')).toBe(1_000);
  });

  it('holds off per replica: the same adapter on another replica is free', () => {
    const { b } = setup();
    b.fail(A, 'k', policy, 'w');
    expect(refusal(() => b.check(A, 'k'))?.code).toBe('adapter_load_backoff');
    expect(refusal(() => b.check(B, 'k'))).toBeUndefined();
  });

  it("tells the scheduler what it holds off: the adapter's latest end, each replica's own", () => {
    const { t, b } = setup();
    expect(b.anyHeld('k', t.now)).toBe(false);
    b.fail(A, 'k', policy, 'w');
    t.now += 500;
    b.fail(B, 'k', policy, 'w');
    b.fail(B, 'k', policy, 'w');
    expect([b.heldUntil('k', A), b.heldUntil('k', B), b.heldUntil('k', C)]).toEqual([
      t.now + 500,
      t.now + 2_000,
      0,
    ]);
    expect(b.anyHeld('other', t.now)).toBe(false);
    // Held while any replica's wait lasts; not from the end of the last one on.
    t.now += 1_999;
    expect(b.anyHeld('k', t.now)).toBe(true);
    t.now += 1;
    expect(b.anyHeld('k', t.now)).toBe(false);
    // A success there: nothing of it is told.
    b.clear(A, 'k');
    expect(b.heldUntil('k', A)).toBe(0);
  });

  it('a failure not routed around (an unknown name not found) still refuses there, but is not told', () => {
    const { t, b } = setup();
    b.fail(A, 'k', policy, 'not found', false);
    expect(refusal(() => b.check(A, 'k'))?.code).toBe('adapter_load_backoff');
    expect(b.anyHeld('k', t.now)).toBe(false);
    expect(b.heldUntil('k', A)).toBe(0);
  });

  it('once the name loads on another replica, a failure not routed around is told (it exists)', () => {
    const { t, b } = setup();
    b.fail(A, 'k', policy, 'not found', false);
    b.clear(B, 'k');
    expect(b.heldUntil('k', A)).toBe(t.now + 1_000);
    expect(b.anyHeld('k', t.now)).toBe(true);
    expect(refusal(() => b.check(A, 'k'))?.code).toBe('adapter_load_backoff');
  });
  it('keeps the latest end told: a shorter wait failed later elsewhere does not end it early', () => {
    const { t, b } = setup();
    b.fail(A, 'k', policy, 'w');
    b.fail(A, 'k', policy, 'w');
    // B's first failure ends 1 s from now, A's second 2 s from now.
    b.fail(B, 'k', policy, 'w');
    t.now += 1_000;
    expect(b.heldUntil('k', A)).toBe(t.now + 1_000);
    expect(b.anyHeld('k', t.now)).toBe(true);
  });

  it("a success on one replica keeps the others' backoff", () => {
    const { t, b } = setup();
    b.fail(A, 'k', policy, 'w');
    b.fail(B, 'k', policy, 'w');
    b.clear(A, 'k');
    expect(refusal(() => b.check(B, 'k'))?.code).toBe('adapter_load_backoff');
    expect(b.heldUntil('k', B)).toBe(t.now + 1_000);
    expect(b.anyHeld('k', t.now)).toBe(true);
    expect(b.size).toBe(1);
  });

  it('tells nothing of an adapter that never failed', () => {
    const { t, b } = setup();
    b.fail(A, 'k', policy, 'w');
    expect(b.heldUntil('other', A)).toBe(0);
    expect(b.holdsOff(A, 'other')).toBe(false);
    expect(b.anyHeld('other', t.now)).toBe(false);
  });

  it('tells the prefetch where a load would be refused, until the end exactly, routed around or not', () => {
    const { t, b } = setup();
    b.fail(A, 'k', policy, 'w');
    b.fail(B, 'k', policy, 'not found', false);
    expect([b.holdsOff(A, 'k'), b.holdsOff(B, 'k'), b.holdsOff(C, 'k')]).toEqual([true, true, false]);
    t.now += 999;
    expect(b.holdsOff(A, 'k')).toBe(true);
    t.now += 1;
    expect([b.holdsOff(A, 'k'), b.holdsOff(B, 'k')]).toEqual([false, false]);
  });
  it('a failure told once the name loaded elsewhere ends the told wait no sooner than the longest', () => {
    const { t, b } = setup();
    b.fail(A, 'k', policy, 'w');
    b.fail(A, 'k', policy, 'w');
    b.fail(B, 'k', policy, 'not found', false);
    b.clear(C, 'k');
    // B's wait (1 s) is told now; A's (2 s) still holds the adapter past it.
    t.now += 1_000;
    expect(b.anyHeld('k', t.now)).toBe(true);
    expect(b.heldUntil('k', A)).toBe(t.now + 1_000);
  });
});
