import type { EngineStats } from '../../sim/engine/engine';
import type { ReplicaContext, VllmMetrics } from '../../sim/http/context';
import { VllmMetricsState } from '../../sim/http/vllm-metrics';

/**
 * The simulated vLLM keeps its last /metrics text while its input has not changed: the text it
 * serves must be the one a fresh render of the same engine state gives, scrape after scrape.
 */
describe('simulated vLLM /metrics text kept between scrapes', () => {
  function world(mode: VllmMetrics, apiServers: number, seed: number) {
    let x = seed;
    const random = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32;
    const names = ['a', 'b', 'team,a', 'c'];
    const some = () => names.filter(() => random() < 0.3);
    let stats: EngineStats = {
      running: 0,
      waiting: 0,
      waitingForLora: 0,
      kvUsage: 0,
      runningAdapters: [],
      waitingAdapters: [],
      cachedAdapters: [],
      promptTokensTotal: 0,
      firstTokensTotal: 0,
      generationTokensTotal: 0,
      stepsTotal: 0,
      busySlotsTotal: 0,
      cacheMissLoads: 0,
      cacheEvictions: 0,
      finishedPromptTokens: 0,
      prefillSeconds: 0,
      finishedRequests: 0,
      generationTokens: 0,
      decodeSeconds: 0,
      computedPromptTokensTotal: 0,
      cachedPromptTokensTotal: 0,
      prefixCacheQueries: 0,
      prefixCacheHits: 0,
      finishedComputedTokens: 0,
    };
    let now = 1_780_000_000;
    const context = {
      o: { vllmMetrics: mode, baseModel: 'm', deprecatedKvMetric: true, apiServers },
      engine: { stats: () => ({ ...stats }), options: { maxLoras: 2, kvCapacityTokens: 4096 } },
      nowUnix: () => now,
    } as unknown as ReplicaContext;
    /** One field changes, or none (an idle scrape). */
    const change = () => {
      const r = random();
      now += random() < 0.5 ? 1 : 0;
      const fields = Object.keys(stats) as (keyof EngineStats)[];
      const field = fields[Math.floor(random() * fields.length)]!;
      if (r < 0.4) return;
      if (r < 0.6) stats = { ...stats, runningAdapters: some(), waitingAdapters: some() };
      else if (r < 0.7) stats = { ...stats, cachedAdapters: some() };
      else if (typeof stats[field] === 'number') stats = { ...stats, [field]: Math.floor(random() * 9) / 4 };
    };
    return { context, change };
  }

  it.each([
    ['released', 1],
    ['by-reason', 1],
    ['residency', 1],
    ['residency', 3],
  ] as const)('mode %s, %i API server process(es)', (mode, apiServers) => {
    const w = world(mode, apiServers, 7);
    const kept = new VllmMetricsState(w.context, 1_779_999_000);
    const fresh = new VllmMetricsState(w.context, 1_779_999_000);
    let repeats = 0;
    let last = '';
    for (let i = 0; i < 120; i++) {
      w.change();
      if (i % 3 === 0) kept.firstToken({ arrival: 0, firstToken: i, aborted: false } as never);
      if (i % 3 === 0) fresh.firstToken({ arrival: 0, firstToken: i, aborted: false } as never);
      const text = kept.text();
      (fresh as unknown as { rendered: unknown }).rendered = null;
      expect(text).toBe(fresh.text());
      if (text === last) repeats++;
      last = text;
    }
    expect(repeats).toBeGreaterThan(10);
  });
});
