import { nearBestTtft } from '../../src/scheduler/filters/near-best-ttft';
import { predictedAffinity } from '../../src/scheduler/filters/predicted-affinity';
import type { Candidate, SchedulingContext } from '../../src/scheduler/types';
import { seededRandom } from '../../src/random';

const ctx: SchedulingContext = {
  now: 0,
  random: seededRandom(1),
  policy: {
    saturation: { targetWaitingPerReplica: 2, kvCeiling: 0.8 },
    maxLoadedAdapters: 2,
    staleAfterMs: 2000,
    saturationMode: 'predicted',
    saturationMarginMs: 250,
    ttftToleranceMs: 100,
  },
};

function cand(url: string, holder: boolean, ttftMs: number, loadMs = holder ? 0 : 100, busy = 0): Candidate {
  return {
    url,
    backend: 'vllm',
    priority: 0,
    health: 'up',
    snapshotAt: 0,
    checkedAt: 0,
    waiting: busy,
    running: 0,
    inFlight: busy,
    residentCount: holder ? 1 : 0,
    adapter: holder ? { state: 'loaded', lastUsed: 0, inFlight: 0 } : undefined,
    saturation: 0,
    stale: false,
    holder,
    ttftMs,
    loadMs,
    fixedMs: loadMs,
    ownMs: 0,
  };
}

const req = { kind: 'on-demand' as const, adapter: { name: 'hot' } };

describe('predicted-affinity', () => {
  it('keeps the holder while its predicted TTFT is within the margin of loading elsewhere', () => {
    const r = predictedAffinity.filter(req, [cand('a', true, 1300), cand('b', false, 1100)], ctx);
    expect(r).toEqual({ kept: [expect.objectContaining({ url: 'a' })], stage: 'holder' });
  });

  it('spreads to an idle non-holder when the holder is slower by more than the margin', () => {
    const r = predictedAffinity.filter(req, [cand('a', true, 3000), cand('b', false, 1100)], ctx);
    expect(r).toEqual({ kept: [expect.objectContaining({ url: 'b' })], stage: 'free' });
  });

  it("counts a busy non-holder's load once more per request there (the load stalls them)", () => {
    // 1.1 s TTFT, but a 1 s load in front of 4 requests: 5.1 s, more than the holder's 3 s.
    const busy = cand('b', false, 1100, 1000, 4);
    const r = predictedAffinity.filter(req, [cand('a', true, 3000), busy], ctx);
    expect(r.stage).toBe('holder');
  });

  it('among non-holders about as fast, keeps those with a free slot: a load there evicts nothing', () => {
    // c is full (an idle adapter to unload, 20 ms more), b has a free slot: within the tolerance,
    // yet loading on c would evict an adapter someone may want next.
    const full = { ...cand('c', false, 1120), residentCount: 2 };
    const r = predictedAffinity.filter(req, [cand('a', true, 3000), cand('b', false, 1100), full], ctx);
    expect(r).toEqual({ kept: [expect.objectContaining({ url: 'b' })], stage: 'free' });
    // A full replica much faster than any free one still wins.
    const fast = { ...cand('c', false, 500), residentCount: 2 };
    const r2 = predictedAffinity.filter(req, [cand('a', true, 3000), cand('b', false, 1100), fast], ctx);
    expect(r2.kept.map((c) => c.url)).toEqual(['b', 'c']);
  });

  it('leaves base-model requests alone', () => {
    const all = [cand('a', false, 10), cand('b', false, 5000)];
    expect(predictedAffinity.filter({ kind: 'base' }, all, ctx)).toEqual({ kept: all, stage: 'base' });
  });
});

describe('near-best-ttft', () => {
  it('keeps the candidates within the tolerance of the best prediction', () => {
    const r = nearBestTtft.filter(
      req,
      [cand('a', true, 500), cand('b', true, 590), cand('c', true, 700)],
      ctx,
    );
    expect(r.kept.map((c) => c.url)).toEqual(['a', 'b']);
  });
});
