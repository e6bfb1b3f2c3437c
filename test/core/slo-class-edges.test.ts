import { parseRouterConfig } from '../../src/config/parse';
import { RouterError } from '../../src/errors';
import { RoomWait } from '../../src/router/room-wait';
import { HeldClasses, SloClasses } from '../../src/router/slo-class';

/**
 * Edges of the SLO classes found in review (issue 34): header values a client controls, consumer
 * names, and `max_in_flight` on a class with a hold of its own.
 */
const base = { replicas: [{ url: 'http://r:8000' }] };
const classes = parseRouterConfig({
  ...base,
  slo_classes: [
    { name: 'interactive', ttft_ms: 2000, priority: 0 },
    { name: 'batch', ttft_ms: 30000, priority: -1 },
    { name: 'premium', ttft_ms: 1000, priority: 10 },
  ],
  default_slo_class: 'interactive',
  consumer_slo_class: { 'id-vip': 'premium', nightly: 'batch' },
});
const c = new SloClasses(classes);
const at = (ttftMs: number, ownMs = 100, fixedMs = 0) => ({ ttftMs, ownMs, fixedMs });

describe('SLO classes: what a client’s x-slo-ttft-ms may do', () => {
  it('a positive objective under a millisecond is one millisecond, never none: a batch request cannot escape its gate or shedding by it', () => {
    for (const v of ['0.4', '1e-9', '0.0001'])
      expect(c.resolve({ objective: 'batch', ttftMs: v })).toMatchObject({ objectiveMs: 1, gateMs: 1 });
    // Held past a 1 ms objective it cannot meet: shed at once, as with '1'.
    const w = new RoomWait(classes, 0, c.resolve({ objective: 'batch', ttftMs: '0.4' }));
    expect(() => w.holds(0, at(5000))).toThrow(RouterError);
  });

  it('values that are no positive number are no objective; huge ones are capped', () => {
    for (const v of ['', ' ', '-5', '0', 'NaN', 'abc', '-Infinity', '-0'])
      expect(c.resolve({ ttftMs: v })).toMatchObject({ name: 'interactive', objectiveMs: 2000 });
    for (const v of ['1e999', 'Infinity', '99999999999'])
      expect(c.resolve({ ttftMs: v }).objectiveMs).toBe(600_000);
  });
});

describe('SLO classes: consumer names', () => {
  it('a consumer whose username is an Object.prototype member still gets the class its id maps to', () => {
    for (const username of ['constructor', 'toString', '__proto__', 'hasOwnProperty'])
      expect(c.resolve({ consumer: { id: 'id-vip', username } }).name).toBe('premium');
    expect(c.resolve({ consumer: { id: 'valueOf' } }).name).toBe('interactive');
  });
});

describe('max_in_flight on a class with a hold of its own (the top class)', () => {
  // Its hold ends at 29 s - 20 s = 9 s, before half its objective (10 s).
  const cfg = parseRouterConfig({
    ...base,
    queue_timeout_ms: 29000,
    slo_classes: [{ name: 'interactive', ttft_ms: 20000, priority: 0, max_in_flight: 1 }],
    default_slo_class: 'interactive',
  });
  const top = new SloClasses(cfg);
  const full = (ttftMs: number) => ({ ...at(ttftMs), inFlight: 5 });

  it('never refuses ttft_overload a request predicted within its objective, whose replica is only past max_in_flight', () => {
    // A sustained overload by the gateway's count: late hold-ends for a whole hold, a backlog.
    const held = new HeldClasses(1);
    const earlier = new RoomWait(cfg, -9000, top.resolve({}), held);
    expect(earlier.holds(-9000, at(60000))).toBe(true);
    expect(earlier.holds(0, at(60000))).toBe(false);
    expect(new RoomWait(cfg, 0, top.resolve({}), held).holds(0, at(60000))).toBe(true);
    const w = new RoomWait(cfg, 0, top.resolve({}), held);
    expect(w.holdUntil).toBe(9000);
    expect(w.holds(0, full(500))).toBe(true);
    // Its hold is over; the replica is predicted at 0.5 s: sent, however full.
    expect(w.holds(9000, full(500))).toBe(false);
  });
});
