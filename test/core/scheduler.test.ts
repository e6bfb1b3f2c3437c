import { adapterAffinity } from '../../src/scheduler/filters/adapter-affinity';
import { eligibility } from '../../src/scheduler/filters/eligibility';
import { health } from '../../src/scheduler/filters/health';
import { poolPriority } from '../../src/scheduler/filters/pool-priority';
import { maxScore } from '../../src/scheduler/pickers/max-score';
import { powerOfTwo } from '../../src/scheduler/pickers/p2c';
import { SchedulingPipeline } from '../../src/scheduler/pipeline';
import { inFlight } from '../../src/scheduler/scorers/in-flight';
import { kvCache } from '../../src/scheduler/scorers/kv-cache';
import { prefixScorer } from '../../src/scheduler/scorers/prefix';
import { queue } from '../../src/scheduler/scorers/queue';
import type { SchedulingRequest } from '../../src/scheduler/types';
import { saturation } from '../../src/fleet/saturation';
import { cands, ctx, urls, view } from './helpers';

const onDemand: SchedulingRequest = { kind: 'on-demand', adapter: { name: 'a', path: '/adapters/a' } };
const loaded = { state: 'loaded' as const, lastUsed: 0, inFlight: 0 };

describe('saturation', () => {
  const p = { targetWaitingPerReplica: 4, kvCeiling: 0.8 };
  it('is max(waiting / target, kv / ceiling)', () => {
    expect(saturation({ waiting: 2, kvUsage: 0.4 }, p)).toBe(0.5);
    expect(saturation({ waiting: 1, kvUsage: 0.72 }, p)).toBeCloseTo(0.9);
    expect(saturation({ waiting: 4, kvUsage: 0 }, p)).toBe(1);
    expect(saturation({ waiting: 0, kvUsage: undefined }, p)).toBe(0);
  });
});

describe('eligibility filter', () => {
  const c = ctx();
  const fleet = cands(
    [
      view('v1'),
      view('v2', { adapter: loaded }),
      view('l1', { backend: 'llamacpp' }),
      view('l2', { backend: 'llamacpp', adapter: { state: 'static', lastUsed: 0, inFlight: 0, llamaId: 1 } }),
    ],
    c,
  );
  it('keeps every replica for the base model', () => {
    expect(urls(eligibility.filter({ kind: 'base' }, fleet, c).kept)).toEqual(['v1', 'v2', 'l1', 'l2']);
  });
  it('keeps holders and loadable vLLM replicas for an on-demand adapter; llama.cpp only where it holds it', () => {
    expect(urls(eligibility.filter(onDemand, fleet, c).kept)).toEqual(['v1', 'v2', 'l2']);
  });
  it('keeps only holders when the router may not load (max_loaded_adapters 0) or the adapter is static', () => {
    const c0 = ctx({ maxLoadedAdapters: 0 });
    expect(
      urls(eligibility.filter(onDemand, cands([view('v1'), view('v2', { adapter: loaded })], c0), c0).kept),
    ).toEqual(['v2']);
    expect(urls(eligibility.filter({ ...onDemand, kind: 'static' }, fleet, c).kept)).toEqual(['v2', 'l2']);
  });
});

describe('health filter', () => {
  const c = ctx();
  it('drops down replicas and prefers fresh ones to stale ones', () => {
    const fleet = cands(
      [view('down', { health: 'down' }), view('stale', { snapshotAt: -1000 }), view('fresh')],
      c,
    );
    expect(urls(health.filter(onDemand, fleet, c).kept)).toEqual(['fresh']);
  });
  it('keeps stale and unknown replicas when no fresh one exists', () => {
    const fleet = cands(
      [
        view('down', { health: 'down' }),
        view('stale', { snapshotAt: -1000 }),
        view('never', { snapshotAt: null, health: 'unknown' }),
      ],
      c,
    );
    expect(urls(health.filter(onDemand, fleet, c).kept)).toEqual(['stale', 'never']);
  });
  it('fails open: all down returns the input rather than nothing', () => {
    const fleet = cands([view('a', { health: 'down' }), view('b', { health: 'down' })], c);
    expect(urls(health.filter(onDemand, fleet, c).kept)).toEqual(['a', 'b']);
  });
});

describe('adapter-affinity filter (the routing rule)', () => {
  const c = ctx({ maxLoadedAdapters: 2 });
  it('keeps unsaturated holders (loaded or loading)', () => {
    const fleet = cands(
      [
        view('h1', { adapter: loaded }),
        view('h2', { adapter: { ...loaded, state: 'loading' } }),
        view('free'),
      ],
      c,
    );
    const r = adapterAffinity.filter(onDemand, fleet, c);
    expect([urls(r.kept), r.stage]).toEqual([['h1', 'h2'], 'holder']);
  });
  it('drops a saturated holder and keeps the one that is not', () => {
    const fleet = cands(
      [view('hot', { adapter: loaded, waiting: 4 }), view('cool', { adapter: loaded, waiting: 3 })],
      c,
    );
    expect(urls(adapterAffinity.filter(onDemand, fleet, c).kept)).toEqual(['cool']);
  });
  it('spills to unsaturated replicas with a free slot when every holder is saturated', () => {
    const fleet = cands(
      [
        view('hot', { adapter: loaded, kvUsage: 0.85 }),
        view('full', { residentCount: 2 }),
        view('free', { residentCount: 1 }),
        view('busy-free', { residentCount: 0, waiting: 9 }),
      ],
      c,
    );
    const r = adapterAffinity.filter(onDemand, fleet, c);
    expect([urls(r.kept), r.stage]).toEqual([['free'], 'free']);
  });
  it('falls back to every replica when no holder is cool and no free slot is cool', () => {
    const fleet = cands(
      [view('hot', { adapter: loaded, waiting: 5 }), view('full', { residentCount: 2 })],
      c,
    );
    const r = adapterAffinity.filter(onDemand, fleet, c);
    expect([urls(r.kept), r.stage]).toEqual([['hot', 'full'], 'any']);
  });
  it('does not count an unloading adapter as held', () => {
    const fleet = cands(
      [view('leaving', { adapter: { ...loaded, state: 'unloading' }, residentCount: 2 }), view('free')],
      c,
    );
    expect(urls(adapterAffinity.filter(onDemand, fleet, c).kept)).toEqual(['free']);
  });
  it('is skipped for the base model and static adapters', () => {
    const fleet = cands([view('a', { waiting: 10 }), view('b')], c);
    expect(adapterAffinity.filter({ kind: 'base' }, fleet, c)).toEqual({ kept: fleet, stage: 'base' });
    expect(adapterAffinity.filter({ ...onDemand, kind: 'static' }, fleet, c).stage).toBe('static');
  });
});

describe('pool-priority filter', () => {
  const c = ctx();
  it('sends requests to the highest pool while any of its members is unsaturated', () => {
    const fleet = cands(
      [
        view('spot', { priority: 0 }),
        view('reserved-1', { priority: 1, waiting: 9 }),
        view('reserved-2', { priority: 1 }),
      ],
      c,
    );
    expect(urls(poolPriority.filter(onDemand, fleet, c).kept)).toEqual(['reserved-1', 'reserved-2']);
  });
  it('moves to the next pool when the higher one is saturated as a whole, and to all when every pool is', () => {
    const fleet = cands([view('spot', { priority: 0 }), view('reserved', { priority: 1, waiting: 9 })], c);
    expect(urls(poolPriority.filter(onDemand, fleet, c).kept)).toEqual(['spot']);
    const hot = cands(
      [view('spot', { priority: 0, waiting: 9 }), view('reserved', { priority: 1, waiting: 9 })],
      c,
    );
    expect(urls(poolPriority.filter(onDemand, hot, c).kept)).toEqual(['spot', 'reserved']);
  });
});

describe('scorers', () => {
  const c = ctx();
  it('queue: min-max over waiting, lowest scores 1; all equal score 1', () => {
    expect(
      queue.score(
        onDemand,
        cands([view('a', { waiting: 0 }), view('b', { waiting: 5 }), view('c', { waiting: 10 })]),
        c,
      ),
    ).toEqual([1, 0.5, 0]);
    expect(queue.score(onDemand, cands([view('a', { waiting: 3 }), view('b', { waiting: 3 })]), c)).toEqual([
      1, 1,
    ]);
  });
  it('kv-cache: free KV; llama.cpp (no KV metric) is neutral', () => {
    expect(
      kvCache.score(onDemand, cands([view('a', { kvUsage: 0.25 }), view('b', { kvUsage: undefined })]), c),
    ).toEqual([0.75, 0.5]);
  });
  it("in-flight: this router's own in-flight count, fewer is better", () => {
    expect(
      inFlight.score(onDemand, cands([view('a', { inFlight: 4 }), view('b', { inFlight: 0 })]), c),
    ).toEqual([0, 1]);
  });
  it('prefix: the share of leading blocks a replica served last; per adapter; bounded', () => {
    const s = prefixScorer({ blockChars: 4, maxBlocks: 4, capacity: 6 });
    const fleet = cands([view('a'), view('b')]);
    const req = (prompt: string, name = 'x'): SchedulingRequest => ({
      kind: 'on-demand',
      adapter: { name },
      prompt,
    });
    expect(s.score(req('aaaabbbbcccc'), fleet, c)).toEqual([0, 0]);
    s.observe!(req('aaaabbbbcccc'), fleet[0]!, c);
    expect(s.score(req('aaaabbbbcccc'), fleet, c)).toEqual([1, 0]);
    expect(s.score(req('aaaabbbbdddd'), fleet, c)).toEqual([2 / 3, 0]);
    expect(s.score(req('zzzzbbbbcccc'), fleet, c)).toEqual([0, 0]); // a later block alone is no hit
    expect(s.score(req('aaaabbbbcccc', 'other-adapter'), fleet, c)).toEqual([0, 0]);
    s.observe!(req('eeeeffffgggghhhh'), fleet[1]!, c); // 4 more blocks: capacity 6 forgets the oldest
    expect(s.score(req('aaaabbbbcccc'), fleet, c)[0]).toBe(0);
    expect(s.score(req('eeeeffffgggghhhh'), fleet, c)).toEqual([0, 1]);
  });
});

describe('pickers', () => {
  const scored = (xs: number[]) =>
    cands(xs.map((_, i) => view(`r${i}`))).map((candidate, i) => ({ candidate, score: xs[i]! }));
  it('max-score picks the best and spreads ties', () => {
    expect(maxScore.pick(scored([0.1, 0.9, 0.5]), ctx()).candidate.url).toBe('r1');
    const picks = new Set(
      Array.from({ length: 50 }, (_, i) => maxScore.pick(scored([0.7, 0.7, 0.1]), ctx({}, i)).candidate.url),
    );
    expect([...picks].sort()).toEqual(['r0', 'r1']);
  });
  it('p2c never picks the single worst of three and picks the best more often than the middle', () => {
    const counts: Record<string, number> = {};
    const c = ctx({}, 42);
    for (let i = 0; i < 3000; i++) {
      const u = powerOfTwo.pick(scored([0.9, 0.5, 0.1]), c).candidate.url;
      counts[u] = (counts[u] ?? 0) + 1;
    }
    expect(counts.r2).toBeUndefined();
    // Each pair is equally likely: r0 wins 2 of 3 pairs, r1 one.
    expect(counts.r0! / 3000).toBeCloseTo(2 / 3, 1);
  });
  it('p2c with one candidate returns it', () => {
    expect(powerOfTwo.pick(scored([0.3]), ctx()).candidate.url).toBe('r0');
  });
});

describe('SchedulingPipeline', () => {
  it('runs filters then weighted scorers then the picker, and records the trail', () => {
    const p = new SchedulingPipeline({
      filters: ['eligibility', 'health', 'adapter-affinity', 'pool-priority'],
      scorers: [{ name: 'queue', weight: 1 }],
      picker: 'max-score',
    });
    const d = p.schedule(
      onDemand,
      [
        view('h1', { adapter: loaded, waiting: 2 }),
        view('h2', { adapter: loaded, waiting: 1 }),
        view('free'),
      ],
      ctx(),
    )!;
    expect(d.replica.url).toBe('h2');
    expect(d.stage).toBe('holder');
    expect(d.scores).toEqual({ h1: 0, h2: 1 });
    expect(d.filters).toEqual([
      { name: 'eligibility', kept: 3 },
      { name: 'health', kept: 3 },
      { name: 'adapter-affinity', kept: 2 },
      { name: 'pool-priority', kept: 2 },
    ]);
  });
  it('returns null when no replica can serve the request', () => {
    const p = new SchedulingPipeline();
    expect(p.schedule({ ...onDemand, kind: 'static' }, [view('a'), view('b')], ctx())).toBeNull();
  });
  it('refuses unknown unit names with the known ones listed', () => {
    expect(() => new SchedulingPipeline({ filters: ['nope'], scorers: [], picker: 'p2c' })).toThrow(
      /unknown filter "nope" \(known: eligibility/,
    );
  });
  it('is deterministic for a seed', () => {
    const run = () => {
      const p = new SchedulingPipeline();
      const c = ctx({}, 7);
      return Array.from(
        { length: 20 },
        () => p.schedule({ kind: 'base' }, [view('a'), view('b'), view('c')], c)!.replica.url,
      );
    };
    expect(run()).toEqual(run());
  });
});
