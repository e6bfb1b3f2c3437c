import { arrival, desSetup, routeOk } from '../helpers/des-router';
import * as B from '../../bench/des/baselines-2026';

describe('2026 baselines (bench/des/baselines-2026.ts)', () => {
  it('least outstanding tokens: one long prompt weighs more than many short ones, until it ends', async () => {
    const { fleet, router } = desSetup(B.leastOutstandingTokens, 2);
    const long = await routeOk(router, 'a', arrival(50_000));
    const short: string[] = [];
    for (let i = 0; i < 10; i++) short.push((await routeOk(router, 'a', arrival(1000))).url);
    // Ten 1,010-token requests stay off the replica holding the 50,010-token one.
    expect(short.every((u) => u !== long.url)).toBe(true);
    await router.done(long.url, long.token, { status: 200, ttftMs: 1 });
    expect((await routeOk(router, 'a', arrival(1000))).url).toBe(long.url);
    expect(fleet.urls).toContain(long.url);
    router.stop();
  });

  it('Dynamo: a cold adapter is pinned to one replica; a hot one gets a set sized by its share of the load', async () => {
    const { clock, router } = desSetup(B.dynamoDemandSized, 4, 2);
    const cold = new Set<string>();
    for (let i = 0; i < 60; i++) {
      const x = await routeOk(router, 'hot', arrival(100));
      await router.done(x.url, x.token, { status: 200 });
      if (i % 10 === 0) cold.add((await routeOk(router, `cold-${i % 3}`)).url);
    }
    // Before the first 3 s tick the hot adapter has no set yet: its HRW top-1 takes it.
    const before = new Set<string>();
    for (let i = 0; i < 8; i++) before.add((await routeOk(router, 'hot', arrival(5000))).url);
    expect(before.size).toBe(1);
    await clock.run(3001);
    const after = new Set<string>();
    for (let i = 0; i < 8; i++) after.add((await routeOk(router, 'hot', arrival(5000))).url);
    // 60 of 66 arrivals: ceil(0.9 x 8 slots) capped at 4 workers, minus full ones: more than one.
    expect(after.size).toBeGreaterThan(1);
    const pins = new Set<string>();
    for (let i = 0; i < 5; i++) pins.add((await routeOk(router, 'cold-1')).url);
    expect(pins.size).toBe(1);
    router.stop();
  });

  it('llm-d lora-load-state + queue: prefers the replica holding the adapter at equal queues', async () => {
    const { clock, fleet, router } = desSetup(B.llmdLoraLoadState, 4, 2);
    fleet.engines[2]!.preload('ad#1', 16);
    await clock.run(60); // a metrics scrape (every 50 ms)
    for (let i = 0; i < 5; i++) expect((await routeOk(router, 'ad')).url).toBe(fleet.urls[2]);
    router.stop();
  });

  it('llm-d latency observation: routes to the endpoint whose observed TTFT is lower at its load', async () => {
    const { clock, fleet, router } = desSetup(B.llmdLatencyObservation, 2, 2);
    // Calibrate both endpoints: replica 0 answers in 2 s, replica 1 in 200 ms.
    const seen = [0, 0];
    for (let i = 0; seen[0]! < 15 || seen[1]! < 15; i++) {
      if (i > 500) throw new Error('an endpoint never got traffic');
      const x = await routeOk(router, 'a');
      const k = fleet.urls.indexOf(x.url);
      seen[k]!++;
      await router.done(x.url, x.token, { status: 200, ttftMs: k === 0 ? 2000 : 200 });
    }
    await clock.run(1001); // the observer's recompute
    const picks = [0, 0];
    for (let i = 0; i < 40; i++) {
      const x = await routeOk(router, 'a');
      picks[fleet.urls.indexOf(x.url)]!++;
      await router.done(x.url, x.token, { status: 200, ttftMs: 200 });
    }
    expect(picks[1]!).toBeGreaterThanOrEqual(36);
    router.stop();
  });
});
