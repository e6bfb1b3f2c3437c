import { errors } from '../../src/errors';
import { RoomWait } from '../../src/router/room-wait';

const cfg = (room_wait: 'escalate' | 'replica' | 'anywhere', replica_wait_ms = 0) => ({
  room_wait,
  replica_wait_ms,
  queue_timeout_ms: 29000,
});
const busy = errors.noRoom('a', 'http://r:1', 1);

describe('room wait', () => {
  it('escalate: the chosen replica only if it can load now, then room anywhere, within one bound from arrival', () => {
    const w = new RoomWait(cfg('escalate'), 1000);
    expect(w.anywhere).toBe(false);
    expect(w.loadQueueMs(1000)).toBe(0);
    expect(w.escalateNow(1000)).toBe(true);
    expect(w.anywhere).toBe(true);
    expect(w.escalateNow(1000)).toBe(false);
    // Waiting anywhere: the rest of the bound, never more.
    expect(w.loadQueueMs(11000)).toBe(19000);
    expect(w.loadQueueMs(40000)).toBe(0);
    expect(w.deadline).toBe(30000);
  });

  it('escalate with replica_wait_ms: waits that long on the chosen replica first', () => {
    const w = new RoomWait(cfg('escalate', 2000), 0);
    expect(w.loadQueueMs(500)).toBe(1500);
    expect(w.escalateNow(1999)).toBe(false);
    expect(w.escalate(busy, 2000)).toBe(true);
    expect(w.anywhere).toBe(true);
  });

  it('a 503 for no room shared from another request keeps this one waiting until its own deadline', () => {
    const w = new RoomWait(cfg('escalate'), 0);
    w.escalateNow(0);
    expect(w.escalate(busy, 10000)).toBe(true);
    expect(w.escalate(busy, 29000)).toBe(false);
    // Any other error is answered as it is.
    expect(w.escalate(errors.modelNotFound('a'), 10000)).toBe(false);
    expect(w.escalate(new Error('x'), 10000)).toBe(false);
  });

  it('replica and anywhere keep their fixed per-wait bound and never escalate', () => {
    for (const mode of ['replica', 'anywhere'] as const) {
      const w = new RoomWait(cfg(mode), 0);
      expect(w.anywhere).toBe(mode === 'anywhere');
      expect(w.loadQueueMs(20000)).toBe(29000);
      expect(w.escalateNow(5000)).toBe(false);
      expect(w.escalate(busy, 1000)).toBe(false);
    }
  });
});
