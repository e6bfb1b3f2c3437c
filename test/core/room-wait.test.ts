import { VirtualClock } from '../../src/clock';
import { loadWaitRanOut } from '../../src/adapters/policy';
import { errors } from '../../src/errors';
import { RoomWait } from '../../src/router/room-wait';
import { LoadTimes } from '../../src/work/load-times';
import { predictTtft } from '../../src/work/predict';
import { WorkModel } from '../../src/work/work-model';

const cfg = (room_wait: 'escalate' | 'replica' | 'anywhere', replica_wait_ms = 0) => ({
  room_wait,
  replica_wait_ms,
  queue_timeout_ms: 29000,
});
const busy = errors.noRoom('a', 'http://r:1', 1);

describe('room wait', () => {
  it("escalate: a wait for the adapter's own load under way is no lack of room (dst seed 1001999)", () => {
    const w = new RoomWait(cfg('escalate', 2000), 0);
    // Escalated, it would load the adapter on a second replica beside the load under way.
    expect(w.escalate(loadWaitRanOut('a', 'http://r:1'), 2000)).toBe(false);
    expect(w.anywhere).toBe(false);
    expect(w.escalate(busy, 2000)).toBe(true);
  });

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

  it('holds a request predicted past ttft_slo_ms everywhere, until that long before the bound (escalate, predicted)', () => {
    const w = new RoomWait({ ...cfg('escalate'), saturation_mode: 'predicted', ttft_slo_ms: 5000 }, 1000);
    // The bound is 30 s from arrival; the last 5 s are left for a slot.
    expect(w.holdUntil).toBe(25000);
    const at = (ttftMs: number, ownMs = 500) => ({ ttftMs, ownMs, fixedMs: 0 });
    expect(w.holds(1000, at(5001))).toBe(true);
    expect(w.holds(24999, at(60000))).toBe(true);
    // A replica predicted within the objective takes it; past the hold it goes to the fastest
    // (refused only under a backlog of held requests: test/core/hold-end-refusal.test.ts).
    expect(w.holds(1000, at(5000))).toBe(false);
    expect(w.holds(25000, at(60000))).toBe(false);
    // Its own prefill alone takes the objective: held only while the wait before it does too.
    expect(w.holds(1000, at(9000, 6000))).toBe(false);
    expect(w.holds(1000, at(12000, 6000))).toBe(true);
  });

  it('never holds with the objective off, under count saturation, or where the wait is per replica', () => {
    const off = [
      new RoomWait({ ...cfg('escalate'), saturation_mode: 'predicted', ttft_slo_ms: 0 }, 0),
      new RoomWait({ ...cfg('escalate'), saturation_mode: 'count', ttft_slo_ms: 5000 }, 0),
      new RoomWait({ ...cfg('replica'), saturation_mode: 'predicted', ttft_slo_ms: 5000 }, 0),
      new RoomWait({ ...cfg('anywhere'), saturation_mode: 'predicted', ttft_slo_ms: 5000 }, 0),
    ];
    for (const w of off) expect(w.holds(0, { ttftMs: 60000, ownMs: 0, fixedMs: 0 })).toBe(false);
    // An objective longer than the whole wait leaves nothing to hold for.
    const long = new RoomWait({ ...cfg('escalate'), saturation_mode: 'predicted', ttft_slo_ms: 40000 }, 0);
    expect(long.holds(0, { ttftMs: 60000, ownMs: 0, fixedMs: 0 })).toBe(false);
  });

  it('holds only for what waiting shortens: never for the adapter load itself (injected clock)', async () => {
    const clock = new VirtualClock();
    const url = 'http://b:8000';
    const slo = { ...cfg('escalate'), saturation_mode: 'predicted' as const, ttft_slo_ms: 5000 };
    // This adapter's learned load (8 s) alone is past the objective.
    const loads = new LoadTimes(1000, 100);
    loads.observe({ op: 'load', adapter: 'big', ok: true, ms: 8000 });
    const work = new WorkModel({ prefillTokensPerS: 10_000 });
    const req = {
      promptTokens: 1000,
      maxTokens: 10,
      adapter: 'big',
      maxLoadedAdapters: 2,
      queueTimeoutMs: 29000,
    };
    const decided = (roomNow?: boolean) => {
      const p = predictTtft({ url, residentCount: 2, holder: false }, req, clock.now(), work, loads, roomNow);
      return { ttftMs: p.totalMs, ownMs: p.ownMs, fixedMs: p.fixedMs };
    };
    // An idle fleet: nothing to wait for, at any moment of the hold window.
    const idle = new RoomWait(slo, clock.now());
    for (let i = 0; i < 30 && clock.now() < idle.holdUntil; i++) {
      expect(idle.holds(clock.now(), decided())).toBe(false);
      await clock.run(clock.now() + 1000);
    }
    // 100k tokens queued ahead (10 s of prefill): held while they drain, then goes.
    work.admit({ id: 'ahead', url, promptTokens: 100_000, maxTokens: 10, at: clock.now() });
    const behind = new RoomWait(slo, clock.now());
    expect(behind.holds(clock.now(), decided())).toBe(true);
    await clock.run(clock.now() + 6000);
    expect(behind.holds(clock.now(), decided())).toBe(false);
    work.release('ahead', clock.now(), true);
    // No idle adapter to unload: held until one is (roomNow), never for the load after it.
    const full = new RoomWait(slo, clock.now());
    expect(full.holds(clock.now(), decided(false))).toBe(true);
    expect(full.holds(clock.now(), decided(true))).toBe(false);
  });
});
