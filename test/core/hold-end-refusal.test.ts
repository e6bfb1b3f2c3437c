import { RouterError } from '../../src/errors';
import { RoomWait } from '../../src/router/room-wait';

/**
 * The end of a hold under overload (src/router/room-wait.ts `holds`): a request held in the gateway
 * because every replica was predicted past `ttft_slo_ms`, and still so when its hold ends, is
 * refused (503 `ttft_overload`, Retry-After) rather than queued behind a backlog it cannot beat,
 * where it would push every request after it past the objective too (issue 34, long workload,
 * 3 s loads, 90% load: 2.5% within 5 s when such requests were sent, bench/des/peer-gap.ts).
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

describe('the end of a hold under overload', () => {
  it('refuses a request still predicted past its objective everywhere when its hold ends', () => {
    const w = new RoomWait(cfg, 1000);
    expect(w.holdUntil).toBe(25000);
    expect(w.holds(1000, at(60000))).toBe(true);
    expect(w.holds(24999, at(60000))).toBe(true);
    const err = refusal(() => w.holds(25000, at(60000)));
    expect(err.status).toBe(503);
    expect(err.code).toBe('ttft_overload');
    // About how long the queues ahead take to drain (the wait that shrinks), within [1, 60] s.
    expect(err.headers()['Retry-After']).toBe('60');
    expect(refusal(() => new RoomWait(cfg, 1000).holds(25000, at(8000, 500))).headers()['Retry-After']).toBe(
      '8',
    );
  });

  it('sends it when a replica is predicted within the objective by then', () => {
    const w = new RoomWait(cfg, 1000);
    expect(w.holds(1000, at(60000))).toBe(true);
    expect(w.holds(25000, at(5000))).toBe(false);
  });

  it('never refuses for what waiting cannot shorten: its own load and prefill past the objective', () => {
    const w = new RoomWait(cfg, 1000);
    // 3 s of load and 4 s of prefill, 2 s of queue: the queues are not past the objective.
    expect(w.holds(25000, at(9000, 4000, 3000))).toBe(false);
  });

  it('refuses nothing without a hold: objective off, count saturation, per-replica waits', () => {
    const others = [
      new RoomWait({ ...cfg, ttft_slo_ms: 0 }, 0),
      new RoomWait({ ...cfg, saturation_mode: 'count' }, 0),
      new RoomWait({ ...cfg, room_wait: 'replica' }, 0),
      new RoomWait({ ...cfg, room_wait: 'anywhere' }, 0),
      // An objective as long as the whole wait leaves no hold, and nothing to end.
      new RoomWait({ ...cfg, ttft_slo_ms: 29000 }, 0),
    ];
    for (const w of others) expect(w.holds(29000, at(60000))).toBe(false);
  });
});
