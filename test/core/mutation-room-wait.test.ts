/**
 * Unit test of RoomWait's hold (src/router/room-wait.ts, one module), written against the survivors
 * of `npm run mutation:safety -- room-wait` (docs/reliability/mutation-testing.md): the hold's
 * boundaries (a hold waits only for what holding shortens: issue 31 item 1c), the count of held
 * requests per class (a request counted once, uncounted once), a sheddable request's refusal and its
 * Retry-After, and the access deadline. The request starts at a non-zero time so that a wait measured
 * from the wrong origin shows.
 */
import { ACCESS_WAIT_BUDGET_MS } from '../../src/config/parse';
import { RouterError } from '../../src/errors';
import { RoomWait } from '../../src/router/room-wait';
import { HeldClasses, type RequestSlo } from '../../src/router/slo-class';

const S = 10_000;
const OBJECTIVE = 2_000;
const predicted = (room_wait: 'escalate' | 'replica' | 'anywhere' = 'escalate') => ({
  room_wait,
  replica_wait_ms: 1_000,
  queue_timeout_ms: 30_000,
  saturation_mode: 'predicted' as const,
  ttft_slo_ms: OBJECTIVE,
});
const slo = (over: Partial<RequestSlo>): RequestSlo => ({
  name: 'c',
  objectiveMs: OBJECTIVE,
  priority: 0,
  sheddable: false,
  gateMs: OBJECTIVE,
  ...over,
});
/** A decision whose queue alone (what holding shortens) is `queueMs`, plus its own load and prefill. */
const decided = (queueMs: number, fixedMs = 0, ownMs = 0, loadMs?: number) => ({
  ttftMs: queueMs + fixedMs + ownMs,
  fixedMs,
  ownMs,
  loadMs,
});

function shed(f: () => unknown): RouterError {
  try {
    f();
  } catch (e) {
    if (e instanceof RouterError) return e;
    throw e;
  }
  throw new Error('expected a shed_low_priority refusal');
}

describe('RoomWait: bounds from arrival', () => {
  it('ends the whole access phase ACCESS_WAIT_BUDGET_MS after arrival, the room wait queue_timeout_ms after', () => {
    const w = new RoomWait(predicted(), S);
    expect(w.accessDeadline).toBe(S + ACCESS_WAIT_BUDGET_MS);
    expect(w.deadline).toBe(S + 30_000);
  });

  it('holds nothing outside `escalate`, however late every replica is predicted', () => {
    for (const mode of ['replica', 'anywhere'] as const) {
      const w = new RoomWait(predicted(mode), S);
      expect(w.holdUntil).toBe(S);
      expect(w.holds(S, decided(60_000))).toBe(false);
    }
  });
});

describe('RoomWait: a hold waits only for what holding shortens', () => {
  it('own load and prefill exactly the objective: held only while the queue alone is past it', () => {
    const w = new RoomWait(predicted(), S);
    // own = fixed + own prefill = the objective; the queue 1 s: holding cannot help it make 2 s.
    expect(w.holds(S, decided(1_000, 1_500, 500))).toBe(false);
    // The queue exactly the objective: not past it.
    expect(w.holds(S, decided(OBJECTIVE, 1_500, 500))).toBe(false);
    expect(w.holds(S, decided(OBJECTIVE + 1, 1_500, 500))).toBe(true);
  });

  it('a top class is not held behind a higher class that is held (only a class whose gate is below its objective is)', () => {
    const held = new HeldClasses();
    held.enter(5);
    const w = new RoomWait(predicted(), S, slo({ gateMs: OBJECTIVE, objectiveMs: OBJECTIVE }), held);
    expect(w.holds(S, decided(100))).toBe(false);
  });

  it('a class behind a held higher one waits for the first half of its objective, counted from arrival', () => {
    const held = new HeldClasses();
    held.enter(5);
    const objectiveMs = 10_000;
    const w = new RoomWait(predicted(), S, slo({ gateMs: 1_000, objectiveMs }), held);
    // waited + predicted start < objective / 2 = 5 s
    expect(w.holds(S + 4_499, decided(500))).toBe(true);
    expect(w.holds(S + 4_500, decided(500))).toBe(false);
  });
});

describe('RoomWait: held requests are counted once per class', () => {
  const late = decided(60_000);
  const topClass = (held: HeldClasses) => new RoomWait(predicted(), S, slo({ priority: 5 }), held);

  it('a request held twice is counted once, and uncounted once it leaves', () => {
    const held = new HeldClasses();
    const top = topClass(held);
    expect(top.holds(S, late)).toBe(true);
    expect(top.holds(S + 250, late)).toBe(true);
    top.leave();
    expect(held.above(0)).toBe(false);
  });

  it('leaving twice, or without having been held, uncounts no other request', () => {
    const held = new HeldClasses();
    const a = topClass(held);
    const b = topClass(held);
    const never = topClass(held);
    expect(a.holds(S, late)).toBe(true);
    expect(b.holds(S, late)).toBe(true);
    never.leave();
    a.leave();
    a.leave();
    // b is still held: a class below it still sees it.
    expect(held.above(0)).toBe(true);
    b.leave();
    expect(held.above(0)).toBe(false);
  });

  it('a request no longer held is uncounted at once, and a refused one leaves for good', () => {
    const held = new HeldClasses();
    const other = topClass(held);
    const a = topClass(held);
    expect(other.holds(S, late)).toBe(true);
    expect(a.holds(S, late)).toBe(true);
    expect(a.holds(S, decided(0))).toBe(false);
    expect(a.holds(S, decided(0))).toBe(false);
    expect(held.above(0)).toBe(true);
    other.leave();
    expect(held.above(0)).toBe(false);
  });
});

describe('RoomWait: a sheddable request that cannot meet its objective is refused', () => {
  const batch = (over: Partial<RequestSlo> = {}) =>
    slo({ name: 'batch', objectiveMs: 5_000, gateMs: 5_000, priority: -1, sheddable: true, ...over });

  it('counts its wait so far and the predicted start, not the wait for an idle adapter', () => {
    // queue 6 s, load 1 s, of which the wait for an idle adapter (loadMs - fixedMs) 2 s.
    const d = decided(6_000, 1_000, 0, 3_000);
    // expected = waited + ttft (7 s) - the wait for an idle adapter (2 s) = 5 s: not past 5 s.
    expect(new RoomWait(predicted(), S, batch()).holds(S, d)).toBe(true);
    const err = shed(() => new RoomWait(predicted(), S, batch()).holds(S + 1, d));
    expect(err.code).toBe('shed_low_priority');
    expect(err.message).toContain("'batch'");
  });

  it("gives as Retry-After the queue's wait, rounded up, without the wait for an idle adapter", () => {
    // queue 8 s (what shrinks), of which 2 s the wait for an idle adapter: 6 s.
    const err = shed(() => new RoomWait(predicted(), S, batch()).holds(S, decided(8_000, 1_000, 0, 3_000)));
    expect(err.retryAfterS).toBe(6);
  });

  it('is counted as held no more once refused', () => {
    const held = new HeldClasses();
    const w = new RoomWait(predicted(), S, batch(), held);
    // expected 4.5 s: held; a second later 5.5 s: refused.
    const d = decided(5_500, 1_000, 0, 3_000);
    expect(w.holds(S, d)).toBe(true);
    expect(held.above(-2)).toBe(true);
    shed(() => w.holds(S + 1_000, d));
    w.leave();
    expect(held.above(-2)).toBe(false);
  });
});
