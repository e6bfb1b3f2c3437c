import { RouterError } from '../../src/errors';
import { RoomWait } from '../../src/router/room-wait';
import { HeldClasses } from '../../src/router/slo-class';

/**
 * The end of a hold under a sustained overload (src/router/room-wait.ts `holds`): a request held in
 * the gateway because every replica was predicted past `ttft_slo_ms`, still so when its hold ends,
 * while the gateway holds a backlog (twice as many requests as replicas: here 2) and such late
 * hold-ends have come for a whole hold (the overload outlasted the holds), is refused (503
 * `ttft_overload`, Retry-After) rather than queued behind replicas it cannot be in time on, where
 * it would push every request after it past the objective too (issue 34, long workload, 3 s
 * loads, 90% load: 1.8% within 5 s when such requests were sent; bench/des/peer-gap.ts).
 */
const cfg = {
  room_wait: 'escalate' as const,
  replica_wait_ms: 0,
  queue_timeout_ms: 29000,
  saturation_mode: 'predicted' as const,
  ttft_slo_ms: 5000,
};
const at = (ttftMs: number, ownMs = 500, fixedMs = 0) => ({ ttftMs, ownMs, fixedMs });

function refusal(f: () => unknown): RouterError {
  try {
    f();
  } catch (err) {
    if (err instanceof RouterError) return err;
    throw err;
  }
  throw new Error('expected a ttft_overload refusal');
}

/**
 * A gateway whose backlog is two held requests, one of them already held; with `lateAt`, an earlier
 * request's hold (24 s: 29 s less the 5 s objective) ended late then, still predicted past the
 * objective everywhere, and was sent: the start of a run of late hold-ends.
 */
function backlogged(lateAt?: number): HeldClasses {
  const held = new HeldClasses(2);
  if (lateAt !== undefined) {
    const earlier = new RoomWait(cfg, lateAt - 24000, undefined, held);
    expect(earlier.holds(lateAt - 24000, at(60000))).toBe(true);
    expect(earlier.holds(lateAt, at(60000))).toBe(false);
  }
  expect(new RoomWait(cfg, 0, undefined, held).holds(0, at(60000))).toBe(true);
  return held;
}

/** Late hold-ends have come for a whole hold by 25 s: the overload outlasted the holds. */
const sustained = () => backlogged(1000);

describe('the end of a hold under a sustained overload', () => {
  it('refuses a request still predicted past its objective everywhere when its hold ends, under a sustained backlog', () => {
    const held = sustained();
    const w = new RoomWait(cfg, 1000, undefined, held);
    expect(w.holdUntil).toBe(25000);
    expect(w.holds(1000, at(60000))).toBe(true);
    expect(w.holds(24999, at(60000))).toBe(true);
    const err = refusal(() => w.holds(25000, at(60000)));
    expect(err.status).toBe(503);
    expect(err.code).toBe('ttft_overload');
    // About how long the queues ahead take to drain (the wait that shrinks), within [1, 60] s.
    expect(err.headers()['Retry-After']).toBe('60');
    // Refused, it is no longer counted as held: the backlog is the other request alone.
    expect(held.backlogged(0)).toBe(false);
    const second = new RoomWait(cfg, 1000, undefined, sustained());
    expect(second.holds(1000, at(60000))).toBe(true);
    expect(refusal(() => second.holds(25000, at(8000))).headers()['Retry-After']).toBe('8');
  });

  it('sends the first late hold-ends of a run under a backlog: a cold start or a burst, not yet sustained', () => {
    // The first request whose hold ends late: nothing before it ended late.
    const first = new RoomWait(cfg, 1000, undefined, backlogged());
    expect(first.holds(1000, at(60000))).toBe(true);
    expect(first.holds(25000, at(60000))).toBe(false);
    // Late hold-ends since 2 s, not yet a whole hold (24 s) of them by 25 s.
    const soon = new RoomWait(cfg, 1000, undefined, backlogged(2000));
    expect(soon.holds(1000, at(60000))).toBe(true);
    expect(soon.holds(25000, at(60000))).toBe(false);
    // The last late hold-end more than a hold ago: that overload ended, this is a new one.
    const anew = new RoomWait(cfg, 26000, undefined, backlogged(1000));
    expect(anew.holds(26000, at(60000))).toBe(true);
    expect(anew.holds(50000, at(60000))).toBe(false);
  });

  it('refuses once late hold-ends have come for a whole hold, each within a hold of the last', () => {
    const held = backlogged(1000);
    // 1 s, then every 12 s: a run of late hold-ends from 1 s, a whole hold long by 25 s.
    const mid = new RoomWait(cfg, -11000, undefined, held);
    expect(mid.holds(-11000, at(60000))).toBe(true);
    expect(mid.holds(13000, at(60000))).toBe(false);
    const w = new RoomWait(cfg, 1000, undefined, held);
    expect(w.holds(1000, at(60000))).toBe(true);
    expect(refusal(() => w.holds(25000, at(60000))).code).toBe('ttft_overload');
  });

  it('sends it to the fastest when the gateway holds no backlog: a burst the queues absorb', () => {
    const w = new RoomWait(cfg, 1000, undefined, new HeldClasses(2));
    expect(w.holds(1000, at(60000))).toBe(true);
    expect(w.holds(25000, at(60000))).toBe(false);
  });

  it('sends it when a replica is predicted within the objective by then', () => {
    const w = new RoomWait(cfg, 1000, undefined, sustained());
    expect(w.holds(1000, at(60000))).toBe(true);
    expect(w.holds(25000, at(5000))).toBe(false);
  });

  it('never refuses for what waiting cannot shorten: its own load and prefill past the objective', () => {
    const w = new RoomWait(cfg, 1000, undefined, sustained());
    // 3 s of load and 4 s of prefill, 2 s of queue: the queues are not past the objective.
    expect(w.holds(25000, at(9000, 4000, 3000))).toBe(false);
  });

  it('refuses nothing without a hold: objective off, count saturation, per-replica waits', () => {
    const others = [
      { ...cfg, ttft_slo_ms: 0 },
      { ...cfg, saturation_mode: 'count' as const },
      { ...cfg, room_wait: 'replica' as const },
      { ...cfg, room_wait: 'anywhere' as const },
      // An objective as long as the whole wait leaves no hold, and nothing to end.
      { ...cfg, ttft_slo_ms: 29000 },
    ];
    for (const c of others)
      expect(new RoomWait(c, 0, undefined, sustained()).holds(29000, at(60000))).toBe(false);
  });
});
