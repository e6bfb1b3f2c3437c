import { burstyWorkload } from '../../sim/workload/bursty';
import { chartFile, goals25, sloCharts, tally25 } from '../../bench/des/slo-goals-25';
import { ROUTING_VARIANTS, sloPoint } from '../../bench/des/slo-sweep';
import type { PolicyResult } from '../../bench/des/run';
import { policyResult } from '../helpers/policy-result';
import type { SloPoint } from '../../bench/des/slo-sweep';
import { e2eLongGoal } from '../../bench/parts/e2e-long';

const result = (policy: string, r: Partial<PolicyResult>): PolicyResult => policyResult(policy, { ...r });

const point = (loadMs: number, load: number, router: Partial<PolicyResult>, seed = 1, workload = 'long') =>
  ({
    workload,
    loadMs,
    load,
    seed,
    pinned: 10,
    blocked: 0.1,
    results: [
      result('lora-router', router),
      result('round robin', { sloAttainment: 0.8, loads: 30 }),
      result('least outstanding tokens', { sloAttainment: 0.9, loads: 20 }),
      result('oracle (unlimited slots)', { sloAttainment: 0.95, loads: 0 }),
    ],
  }) as SloPoint;

describe("issue 25's goals (bench/des/slo-goals-25.ts)", () => {
  it('compares SLO with the best baseline by SLO, 0.9x of it at 3 s loads', () => {
    expect(goals25([point(1000, 0.7, { sloAttainment: 0.89 })], 'lora-router').slo).toMatchObject({
      value: 0.89,
      bound: 0.9,
      met: false,
    });
    expect(goals25([point(3000, 0.7, { sloAttainment: 0.82 })], 'lora-router').slo).toMatchObject({
      bound: 0.9 * 0.9,
      met: true,
    });
    const g = goals25([point(1000, 0.7, { sloAttainment: 0.5, errors: 20, refused: 20 })], 'lora-router');
    expect(g.best).toBe('least outstanding tokens');
    expect(g.slo.why).toMatch(
      /best: least outstanding tokens 90\.0%; lora-router refused 20\.0% of requests/,
    );
  });

  it('counts only the router refusals, and only at or below 50% load with loads up to 1 s', () => {
    const overContext = { errors: 3, refused: 3, overContext: 3 };
    expect(goals25([point(300, 0.5, overContext)], 'lora-router').noRefusal?.met).toBe(true);
    const one = goals25(
      [point(300, 0.5, {}, 1), point(300, 0.5, { errors: 1, refused: 1 }, 2)],
      'lora-router',
    );
    expect(one.noRefusal).toMatchObject({ value: 1, met: false });
    expect(goals25([point(3000, 0.5, {})], 'lora-router').noRefusal).toBeUndefined();
    expect(goals25([point(300, 0.7, {})], 'lora-router').noRefusal).toBeUndefined();
  });

  it('compares with the oracle at or below 50% load with loads up to 0.3 s', () => {
    const g = goals25([point(300, 0.3, { sloAttainment: 0.85 })], 'lora-router');
    expect(g.vsOracle).toMatchObject({ value: 0.85 / 0.95, met: false });
    expect(goals25([point(1000, 0.3, {})], 'lora-router').vsOracle).toBeUndefined();
  });

  it("says what the oracle gap is made of: the router's SLO with loads that take no time, same slots", () => {
    // Issue 26 (bursty, 300 ms loads, 50%): 0.67x the oracle, 0.96x with free loads, loads 1.12x
    // pinned Belady: the time the loads stop the engines stands in the way, not the placement.
    const router = { sloAttainment: 0.6, loads: 33, pinnedBelady: 30 };
    const loadTime = goals25([{ ...point(300, 0.5, router), freeLoads: 0.93 }], 'lora-router').vsOracle;
    expect(loadTime?.met).toBe(false);
    expect(loadTime?.why).toMatch(
      /with loads that take no time \(same slots\) lora-router reaches 93\.0% \(0\.98× the oracle\); its loads are 1\.10× the fewest possible \(pinned Belady\): the time the loads stop the engines stands in the way/,
    );
    const placement = goals25([{ ...point(300, 0.5, router), freeLoads: 0.7 }], 'lora-router').vsOracle;
    expect(placement?.why).toMatch(
      /even with loads that take no time \(same slots\) lora-router reaches 70\.0% \(0\.74×/,
    );
    // A run without the figure (older results.json) still explains with what it has.
    expect(goals25([point(300, 0.5, router)], 'lora-router').vsOracle?.why).not.toMatch(/no time/);
  });

  it('runs the default router with free loads at the points goal 3 applies to, and only there', async () => {
    const scenario = { replicas: 2, slots: 2, adapters: 20, alpha: 1, seed: 1, engine: {} };
    const arrivals = burstyWorkload(40, 1);
    const task = { workload: 'bursty', arrivals, capacity: 8, seed: 1 };
    const variants = ROUTING_VARIANTS.slice(0, 1);
    const at = await sloPoint(scenario, { ...task, loadMs: 300, load: 0.5 }, variants);
    expect(at.freeLoads).toBeGreaterThan(0);
    expect(at.freeLoads).toBeLessThanOrEqual(1);
    // More requests within the objective than with 300 ms loads, on the same requests.
    expect(at.freeLoads).toBeGreaterThanOrEqual(at.results[0]!.sloAttainment);
    expect(
      (await sloPoint(scenario, { ...task, loadMs: 300, load: 0.7 }, variants)).freeLoads,
    ).toBeUndefined();
    expect(
      (await sloPoint(scenario, { ...task, loadMs: 1000, load: 0.5 }, variants)).freeLoads,
    ).toBeUndefined();
    // Every baseline, the oracle and the bounds run at each point (issue 34): a busy machine needs time.
  }, 180_000);

  it('bounds loads per served request by those of the baseline with the best SLO', () => {
    expect(goals25([point(100, 0.3, { loads: 19 })], 'lora-router').loads.met).toBe(true);
    const g = goals25([point(100, 0.3, { loads: 25, completed: 100 })], 'lora-router');
    expect(g.loads).toMatchObject({ value: 0.25, bound: 0.2, met: false });
  });

  it('tallies the goals that apply and draws one chart per workload and load time', () => {
    const ps = [point(100, 0.3, {}), point(100, 0.7, {}), point(3000, 0.3, {}, 1, 'bursty')];
    expect(tally25(ps, 'lora-router').map((t) => t.of)).toEqual([3, 1, 1, 3]);
    const charts = sloCharts(ps, 'lora-router');
    expect(charts.map((c) => c.file)).toEqual([chartFile('long', 100), chartFile('bursty', 3000)]);
    // The router against the best baseline at each load (issue 34: the peers' best) and the oracle.
    expect(charts[0]!.svg).toContain('best baseline at each load');
    expect(charts[0]!.svg).toContain('oracle (unlimited slots)');
    // Issue 34: the peers' best at each load, one line, where the peers ran.
    expect(charts[0]!.svg).not.toContain("peers' best at each load");
    const peer = (p: SloPoint) => ({
      ...p,
      results: [...p.results, result('Dynamo min-cost-flow placement, loads ahead', { sloAttainment: 0.7 })],
    });
    expect(sloCharts(ps.map(peer), 'lora-router')[0]!.svg).toContain("peers' best at each load");
  });
});

describe('end to end vs simulation on the long workload (bench/parts/e2e-long.ts)', () => {
  it('agrees when SLO attainment is within 5 points for every policy', () => {
    const e = (policy: string, sloAttainment: number) => ({
      policy,
      requests: 100,
      completed: 100,
      errors: 0,
      loads: 0,
      ttftP50: 0,
      ttftP99: 0,
      ttftP99Served: 0,
      sloAttainment,
    });
    const run = {
      requests: 100,
      load: 0.5,
      timeScale: 2,
      des: [result('lora-router', { sloAttainment: 0.8 }), result('round robin', { sloAttainment: 0.6 })],
      e2e: [e('lora-router', 0.84), e('round robin', 0.66)],
    };
    const g = e2eLongGoal(run);
    expect(g.rows.map((r) => r.agree)).toEqual([true, false]);
    expect(g.met).toBe(false);
  });
});
