import { RouterError } from '../../src/errors';
import { RoomWait } from '../../src/router/room-wait';
import { HeldClasses } from '../../src/router/slo-class';

/**
 * The end of a hold under a sustained overload (src/router/room-wait.ts `holds`): a request held in
 * the gateway because every replica was predicted past `ttft_slo_ms`, still so when its hold ends,
 * while the gateway holds a backlog (twice as many requests as replicas: here 2), is refused (503
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

/** A gateway whose backlog is two held requests, one of them already held. */
function backlogged(): HeldClasses {
  const held = new HeldClasses(2);
  expect(new RoomWait(cfg, 0, undefined, held).holds(0, at(60000))).toBe(true);
  return held;
}

describe('the end of a hold under a sustained overload', () => {
  it('refuses a request still predicted past its objective everywhere when its hold ends, under a backlog', () => {
    const held = backlogged();
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
    expect(held.crowded(-1)).toBe(false);
    const second = new RoomWait(cfg, 1000, undefined, backlogged());
    expect(second.holds(1000, at(60000))).toBe(true);
    expect(refusal(() => second.holds(25000, at(8000))).headers()['Retry-After']).toBe('8');
  });

  it('sends it to the fastest when the gateway holds no backlog: a burst the queues absorb', () => {
    const w = new RoomWait(cfg, 1000, undefined, new HeldClasses(2));
    expect(w.holds(1000, at(60000))).toBe(true);
    expect(w.holds(25000, at(60000))).toBe(false);
  });

  it('sends it when a replica is predicted within the objective by then', () => {
    const w = new RoomWait(cfg, 1000, undefined, backlogged());
    expect(w.holds(1000, at(60000))).toBe(true);
    expect(w.holds(25000, at(5000))).toBe(false);
  });

  it('never refuses for what waiting cannot shorten: its own load and prefill past the objective', () => {
    const w = new RoomWait(cfg, 1000, undefined, backlogged());
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
      expect(new RoomWait(c, 0, undefined, backlogged()).holds(29000, at(60000))).toBe(false);
  });
});
