import { parseRouterConfig } from '../../src/config/parse';
import { RoomWait } from '../../src/router/room-wait';
import { HeldClasses, SloClasses } from '../../src/router/slo-class';

/**
 * A class behind a higher one waits while a request of that class is held, for up to half its own
 * objective (room-wait.ts `holdsNow`). An objective longer than twice `queue_timeout_ms` (a batch
 * class's 2 min, or a client's own `x-slo-ttft-ms`, up to 600 s) must not hold it past
 * `queue_timeout_ms`, the bound of the whole wait (Kong gives up on the plugin server at 60 s).
 */
describe('the hold behind a higher class ends by queue_timeout_ms', () => {
  const cfg = parseRouterConfig({
    replicas: [{ url: 'http://r:8000' }],
    queue_timeout_ms: 29_000,
    slo_classes: [
      { name: 'interactive', ttft_ms: 2000, priority: 0 },
      { name: 'batch', ttft_ms: 120_000, priority: -1 },
    ],
    default_slo_class: 'interactive',
  });
  const c = new SloClasses(cfg);
  /** A short queue: the batch request is held only because an interactive one is. */
  const quick = { ttftMs: 500, ownMs: 100, fixedMs: 0 };

  it.each([
    ['its class objective', {}],
    ['a client objective of 600 s', { ttftMs: '600000' }],
  ])('with %s', (_, hints) => {
    const held = new HeldClasses();
    const interactive = new RoomWait(cfg, 0, c.resolve({}), held);
    const batch = new RoomWait(cfg, 0, c.resolve({ objective: 'batch', ...hints }), held);
    // Interactive requests stay held (a sustained overload).
    expect(interactive.holds(0, { ttftMs: 5000, ownMs: 100, fixedMs: 0 })).toBe(true);
    expect(batch.holds(1000, quick)).toBe(true);
    expect(batch.deadline).toBe(29_000);
    // Past queue_timeout_ms it goes (or is refused): it is not held on.
    expect(batch.holds(29_000, quick)).toBe(false);
    expect(batch.holds(58_000, quick)).toBe(false);
  });
});

/**
 * The run of late hold-ends a refusal at the end of a hold reads (HeldClasses `lateHoldEnds`) is
 * the gateway's: a client's `x-slo-ttft-ms` near `queue_timeout_ms` gives its own request a hold of
 * a few milliseconds, and must not end that run for every request of its class.
 */
describe('a refusal at the end of a hold, and a client objective', () => {
  const cfg = parseRouterConfig({
    replicas: [{ url: 'http://r:8000' }],
    queue_timeout_ms: 29_000,
    slo_classes: [{ name: 'interactive', ttft_ms: 5000, priority: 0 }],
    default_slo_class: 'interactive',
  });
  const c = new SloClasses(cfg);
  /** Every replica predicted a minute out. */
  const late = { ttftMs: 60_000, ownMs: 500, fixedMs: 0 };

  it('still refuses once late hold-ends have come for a whole hold, after a request with a short hold of its own', () => {
    const held = new HeldClasses(2);
    // A hold (24 s) ended late at 1 s and was sent: the run begins.
    const earlier = new RoomWait(cfg, -23_000, c.resolve({}), held);
    expect(earlier.holds(-23_000, late)).toBe(true);
    expect(earlier.holds(1000, late)).toBe(false);
    // The backlog: another request held.
    expect(new RoomWait(cfg, 0, c.resolve({}), held).holds(0, late)).toBe(true);
    const w = new RoomWait(cfg, 1000, c.resolve({}), held);
    expect(w.holds(1000, late)).toBe(true);
    // A client's 28.9 s objective: held 100 ms, late at its end too (the queues are a minute).
    const short = new RoomWait(cfg, 24_800, c.resolve({ ttftMs: '28900' }), held);
    expect(short.holdUntil).toBe(24_900);
    expect(short.holds(24_800, late)).toBe(true);
    expect(short.holds(24_900, late)).toBe(false);
    // Late hold-ends have still come for a whole hold (24 s) with no gap of one: refused.
    expect(() => w.holds(25_000, late)).toThrow(/overloaded/);
  });
});

/**
 * A lower class waits while a request of a higher class is held (room-wait.ts `holdsNow`). The
 * client's `x-slo-ttft-ms` sets its objective, never its priority: at or below the gate (the higher
 * class's objective) it must not take the request out of that wait.
 */
describe('a lower class behind a held higher one, and a client objective', () => {
  const cfg = parseRouterConfig({
    replicas: [{ url: 'http://r:8000' }],
    slo_classes: [
      { name: 'interactive', ttft_ms: 2000, priority: 0 },
      { name: 'batch', ttft_ms: 30_000, priority: -1 },
    ],
    default_slo_class: 'interactive',
  });
  const c = new SloClasses(cfg);

  it.each(['2000', '1500'])('x-slo-ttft-ms %s still waits behind a held interactive request', (ttftMs) => {
    const held = new HeldClasses();
    const interactive = new RoomWait(cfg, 0, c.resolve({}), held);
    expect(interactive.holds(0, { ttftMs: 3000, ownMs: 100, fixedMs: 0 })).toBe(true);
    // A short queue where the batch request would go: without the header it waits.
    const quick = { ttftMs: 300, ownMs: 100, fixedMs: 0 };
    expect(new RoomWait(cfg, 0, c.resolve({ objective: 'batch' }), held).holds(100, quick)).toBe(true);
    expect(new RoomWait(cfg, 0, c.resolve({ objective: 'batch', ttftMs }), held).holds(100, quick)).toBe(
      true,
    );
    interactive.leave();
  });
});
