import { EngineLoads } from '../../src/work/engine-loads';
import { LoadTimes } from '../../src/work/load-times';
import { predictTtft } from '../../src/work/predict';
import { WorkModel } from '../../src/work/work-model';

const A = 'http://a:8000';
const B = 'http://b:8000';

describe('EngineLoads: loads under way stop the engine, one after another', () => {
  it('adds loads begun on one replica end to end, and follows each as it ends', () => {
    const e = new EngineLoads();
    const first = e.begun(A, 0, 1000);
    const second = e.begun(A, 100, 1000);
    expect(e.stallMs(A, 100)).toBe(1900);
    expect(e.stallMs(B, 100)).toBe(0);
    // The first ended early: the second runs from then.
    first(800);
    expect(e.stallMs(A, 800)).toBe(1000);
    first(900); // told twice: once counts
    expect(e.stallMs(A, 900)).toBe(900);
    second(1800);
    expect(e.stallMs(A, 1800)).toBe(0);
  });

  it('a load begun on an idle engine starts now, not where an ended one was expected to', () => {
    const e = new EngineLoads();
    e.begun(A, 0, 500)(500);
    e.begun(A, 2000, 500);
    expect(e.stallMs(A, 2000)).toBe(500);
    expect(e.stallMs(A, 2600)).toBe(0);
  });
});

describe('predicted TTFT with loads under way', () => {
  const req = { promptTokens: 10_000, maxTokens: 100, maxLoadedAdapters: 2, queueTimeoutMs: 30_000 };
  const loads = new LoadTimes(1000, 100);

  it("a cold request's own load starts after them, and only it counts them", () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    w.engineLoads.begun(A, 0, 1000);
    const cold = predictTtft(
      { url: A, residentCount: 1, holder: false },
      { ...req, adapter: 'x' },
      200,
      w,
      loads,
    );
    // 800 ms of the other load, its own 1 s, its 1 s prefill; the stall is no part of the load.
    expect(cold).toMatchObject({ totalMs: 2800, loadMs: 1000, fixedMs: 1000, startMs: 1800 });
    const idle = predictTtft(
      { url: B, residentCount: 1, holder: false },
      { ...req, adapter: 'x' },
      200,
      w,
      loads,
    );
    expect(idle.totalMs).toBe(2000);
    // A holder, warm or joining the load: as before (a short stall must not spread a hot adapter).
    for (const state of ['loaded', 'loading'] as const) {
      const held = predictTtft(
        { url: A, residentCount: 1, holder: true, adapter: { state } },
        { ...req, adapter: 'y' },
        200,
        w,
        loads,
      );
      expect(held.totalMs).toBe(state === 'loaded' ? 1000 : 2000);
    }
  });
});

describe('predicted TTFT with loads under way that other routers began', () => {
  const req = { promptTokens: 10_000, maxTokens: 100, maxLoadedAdapters: 2, queueTimeoutMs: 30_000 };
  const loads = new LoadTimes(1000, 100);

  it('counts the shared loading entries one after another from the oldest, when this router began fewer', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    // Two loads under way on A by the shared residency, the oldest since 0; this router began none.
    const shared = { url: A, residentCount: 1, holder: false, loadsUnderWay: 2, loadsSince: 0 };
    const cold = predictTtft(shared, { ...req, adapter: 'x' }, 500, w, loads);
    // 1.5 s left of the two (2 x 1 s from 0), its own 1 s load, its 1 s prefill.
    expect(cold).toMatchObject({ startMs: 2500, fixedMs: 1000, totalMs: 3500 });
    // Long past when they should have ended: no stall, not a negative one.
    expect(predictTtft(shared, { ...req, adapter: 'x' }, 5000, w, loads).totalMs).toBe(2000);
    // A holder: as before, the stall is not counted.
    const held = { ...shared, holder: true, adapter: { state: 'loaded' as const } };
    expect(predictTtft(held, { ...req, adapter: 'x' }, 500, w, loads).totalMs).toBe(1000);
  });

  it("a lone router's loads (as many under way as it began) count as its own estimate says", () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    // Its own load of a fast adapter (100 ms, learned), begun at 0: the shared entry says nothing more.
    w.engineLoads.begun(A, 0, 100);
    const own = { url: A, residentCount: 1, holder: false, loadsUnderWay: 1, loadsSince: 0 };
    expect(predictTtft(own, { ...req, adapter: 'x' }, 50, w, loads).startMs).toBe(1050);
    // One more under way than it began: another router's, counted from the oldest at the fleet's 1 s each.
    const more = { ...own, loadsUnderWay: 2 };
    expect(predictTtft(more, { ...req, adapter: 'x' }, 50, w, loads).startMs).toBe(2950);
  });
});
