import { arrival, desSetup, routeOk } from '../helpers/des-router';
import { VirtualClock } from '../../src/clock';
import { seededRandom } from '../../src/random';
import * as P from '../../bench/des/policies';
import { DesFleet } from '../../bench/des/fleet';
import { freeLoadPolicies, freeLoadsBound, pooledBound, POOLED } from '../../bench/des/bounds';
import { adapterSequence, fleetCapacity, runPolicy, type Scenario } from '../../bench/des/run';
import { dynamoMcf, mcfPlace } from '../../bench/des/peers/dynamo-mcf';
import { latencySloAdmitterSheds, llmdPredictedLatency, llmdResidency } from '../../bench/des/peers/llm-d';
import { engineTtft } from '../../bench/des/peers/predictor';
import { loraResidencyFilter, type Endpoint } from '../../bench/des/peers/profile';
import { MinCostFlow } from '../../bench/des/peers/min-cost-flow';
import { BASELINE_POLICIES } from '../../bench/goals';
import { defaultEngineOptions } from '../../sim/engine/engine';
import { atRate } from '../../sim/workload/workload';
import { burstyWorkload } from '../../sim/workload/bursty';

const endpoint = (i: number, o: Partial<Endpoint> = {}): Endpoint => ({
  i,
  waiting: 0,
  running: 0,
  kv: 0,
  gpu: new Set(),
  cpu: new Set(),
  active: new Set(),
  slots: 2,
  ...o,
});
const req = { adapter: 'a', arrival: arrival(100) };

describe('llm-d lora-residency-filter', () => {
  const filter = loraResidencyFilter({ maxReplicas: 2, queueThreshold: 8, kvCacheThreshold: 0.8 });
  const r = seededRandom(1);

  it('keeps only the holders while one is unsaturated: no new copy', () => {
    const eps = [
      endpoint(0, { gpu: new Set(['a']), waiting: 20 }),
      endpoint(1, { gpu: new Set(['a']), waiting: 8, kv: 0.8 }),
      endpoint(2),
    ];
    expect(filter(req, eps, r).map((e) => e.i)).toEqual([0, 1]);
  });

  it('with every holder saturated opens one copy, host-cache holders first, unless the cap is reached', () => {
    const busy = { waiting: 9 };
    const eps = [
      endpoint(0, { gpu: new Set(['a']), ...busy }),
      endpoint(1, { cpu: new Set(['a']) }),
      endpoint(2),
    ];
    expect(filter(req, eps, r).map((e) => e.i)).toEqual([1]);
    const capped = [
      endpoint(0, { gpu: new Set(['a']), ...busy }),
      endpoint(1, { gpu: new Set(['a']), kv: 0.9 }),
      endpoint(2),
    ];
    expect(filter(req, capped, r).map((e) => e.i)).toEqual([0, 1]);
  });

  it('in the DES, requests stay on the replica holding the adapter until its queue passes 8', async () => {
    const { clock, fleet, router } = desSetup(llmdResidency, 4, 2);
    fleet.engines[2]!.preload('ad#1', 16);
    await clock.run(60); // a metrics scrape
    // Long prompts keep them waiting: a queue builds on the holder.
    for (let i = 0; i < 30; i++) {
      const x = await routeOk(router, 'ad', arrival(4000, 50));
      expect(x.url).toBe(fleet.urls[2]);
      void fleet.submit(x.url, 'ad', 4000, 50);
    }
    await clock.run(clock.now() + 1000); // the resolver's load, admission, a scrape
    expect(fleet.engines[2]!.stats().waiting).toBeGreaterThan(8);
    // Saturated now: the next one may make a copy elsewhere.
    expect((await routeOk(router, 'ad', arrival(4000, 50))).url).not.toBe(fleet.urls[2]);
    router.stop();
  });
});

describe('llm-d predicted latency', () => {
  it('sheds only when no endpoint meets the SLO and none is idle or cold', () => {
    const over = { running: 3, kv: 0.5, ttftHeadroom: -1 };
    expect(latencySloAdmitterSheds([endpoint(0, over), endpoint(1, over)])).toBe(true);
    expect(latencySloAdmitterSheds([endpoint(0, over), endpoint(1, { ...over, ttftHeadroom: 0 })])).toBe(
      false,
    );
    expect(latencySloAdmitterSheds([endpoint(0, over), endpoint(1, { ...over, running: 0 })])).toBe(false);
    expect(latencySloAdmitterSheds([endpoint(0, over), endpoint(1, { ...over, kv: 0.01 })])).toBe(false);
  });

  it("the predictor reads the engine's own TTFT: within 5% of what a queued request gets", async () => {
    const clock = new VirtualClock();
    const fleet = new DesFleet(clock, { replicas: 1, slots: 2, mode: 'oracle' });
    const e = fleet.engines[0]!;
    for (let i = 0; i < 40; i++) void fleet.submit(fleet.urls[0]!, null, 2000, 200);
    await clock.run(500);
    const predicted = engineTtft(e, clock.now(), 2000, 200);
    const t0 = clock.now();
    const rec = fleet.submit(fleet.urls[0]!, null, 2000, 200);
    await clock.run(t0 + 600_000);
    const actual = ((await rec) as { firstToken: number }).firstToken - t0;
    expect(actual).toBeGreaterThan(5000);
    expect(Math.abs(predicted - actual) / actual).toBeLessThan(0.05);
  });

  it('refuses under overload, where a scheduler without the admitter queues everything', async () => {
    const { clock, fleet, router } = desSetup(llmdPredictedLatency, 2, 2);
    let shed = 0;
    // 8,000-token prompts every 100 ms on two replicas: 800 ms of prefill each, four times capacity.
    for (let i = 0; i < 200; i++) {
      const x = await router.route({ adapter: 'a', arrival: arrival(8000, 100) });
      if ('error' in x) shed++;
      else void fleet.submit(x.url, 'a', 8000, 100);
      await clock.run(clock.now() + 100);
    }
    expect(shed).toBeGreaterThan(50);
    expect(shed).toBeLessThan(200);
    router.stop();
  });
});

describe("Dynamo's min-cost-flow placement", () => {
  it('the solver finds the least-cost flow, negative edge costs included', () => {
    const g = new MinCostFlow(4);
    const a = g.edge(0, 1, 1, 5);
    const b = g.edge(0, 2, 1, -3);
    g.edge(1, 3, 1, 0);
    g.edge(2, 3, 1, 0);
    expect(g.solve(0, 3, 1)).toEqual({ flow: 1, cost: -3 });
    expect([g.flow(a), g.flow(b)]).toEqual([0, 1]);
  });

  it('keeps a copy on its prior worker (keep reward) over its HRW favourite, and respects capacity', () => {
    const ranked = [3, 0, 1, 2];
    const fresh = mcfPlace([1, 1, 1, 1], [{ name: 'a', replicas: 1, ranked }], new Map());
    expect([...fresh.assignment.get('a')!]).toEqual([3]);
    const kept = mcfPlace([1, 1, 1, 1], [{ name: 'a', replicas: 1, ranked }], new Map([['a', new Set([2])]]));
    expect([...kept.assignment.get('a')!]).toEqual([2]);
    const full = mcfPlace(
      [1, 1],
      [
        { name: 'a', replicas: 2, ranked: [0, 1] },
        { name: 'b', replicas: 1, ranked: [0, 1] },
      ],
      new Map(),
    );
    expect(full.overflow).toBe(1);
    expect([...full.assignment.values()].reduce((n, s) => n + s.size, 0)).toBe(2);
  });

  it('drives loads at its tick, ahead of the requests, sized to demand', async () => {
    const { clock, fleet, router } = desSetup(dynamoMcf, 4, 2, 100);
    for (let i = 0; i < 60; i++) {
      const x = await routeOk(router, 'hot');
      await router.done(x.url, x.token, { status: 200 });
    }
    const before = fleet.loads;
    await clock.run(3001); // the controller's tick, no request since
    await clock.run(3500);
    expect(fleet.loads).toBeGreaterThan(before);
    const holders = fleet.urls.filter((_, i) => fleet.registeredOn(i).includes('hot'));
    expect(holders.length).toBeGreaterThan(1);
    router.stop();
  });
});

describe('the bounds', () => {
  const scenario: Scenario = {
    replicas: 4,
    slots: 2,
    loadMs: 300,
    adapters: 40,
    alpha: 1,
    seed: 1,
    engine: {},
  };
  const base = burstyWorkload(150, 1);
  const arrivals = atRate(base, fleetCapacity(scenario, base, defaultEngineOptions) * 0.7);

  it('no policy beats the pooled bound or the free-loads bound on a seed (bursty, 70% load, 300 ms loads)', async () => {
    const adapters = adapterSequence(arrivals.length, scenario);
    const policies = [
      P.loraRouter(),
      ...BASELINE_POLICIES,
      llmdResidency,
      llmdPredictedLatency,
      dynamoMcf,
      P.oracle,
    ];
    const results = [];
    for (const p of [...policies, pooledBound, ...freeLoadPolicies('lora-router', {})])
      results.push(await runPolicy(p, scenario, arrivals, adapters));
    const pooled = results.find((r) => r.policy === POOLED)!.sloAttainment;
    const free = freeLoadsBound(results);
    for (const r of results.slice(0, policies.length - 1)) {
      expect([r.policy, r.sloAttainment <= pooled]).toEqual([r.policy, true]);
      expect([r.policy, r.sloAttainment <= free]).toEqual([r.policy, true]);
    }
    // The pooled engine makes no loads; churn is counted per 3 s interval.
    expect(results.find((r) => r.policy === POOLED)!.loads).toBe(0);
    const router = results[0]!;
    expect(router.churn!.ticks).toBeGreaterThan(0);
    expect(router.churn!.quiet).toBeLessThanOrEqual(router.churn!.ticks);
  }, 120_000);
});
