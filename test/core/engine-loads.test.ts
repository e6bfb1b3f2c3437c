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
