import { p99Below, sloGoals, type SloPoint } from '../../bench/des/slo-sweep';
import type { PolicyResult } from '../../bench/des/run';
import { policyResult } from '../helpers/policy-result';

const result = (policy: string, r: Partial<PolicyResult>): PolicyResult =>
  policyResult(policy, { pinnedBelady: 10, pinnedLru: 13, ...r });

function point(
  load: number,
  router: Partial<PolicyResult>,
  oracle: Partial<PolicyResult>,
  x: Partial<SloPoint> = {},
) {
  return {
    workload: 'bursty',
    loadMs: 100,
    load,
    seed: 1,
    pinned: 10,
    blocked: 0.3,
    results: [
      result('lora-router', router),
      result('round robin', { ttftP99: 2000, sloAttainment: 0.9 }),
      result('llm-d soft affinity', { ttftP99: 4000, sloAttainment: 0.95 }),
      result('oracle (unlimited slots)', oracle),
    ],
    ...x,
  } as SloPoint;
}

describe('routing goals (bench/des/slo-sweep.ts)', () => {
  it('compares with the best baseline: the highest SLO attainment, the lowest p99', () => {
    const g = sloGoals([point(0.3, { ttftP99: 900, sloAttainment: 0.96 }, { ttftP99: 500 })], 'lora-router');
    expect(g.sloVsBaseline).toMatchObject({ value: 0.96, bound: 0.95, met: true });
    expect(g.p99VsBaseline).toMatchObject({ value: 900 / 2000, met: true });
    expect(g.noRefusal?.met).toBe(true);
  });

  it('says when even the oracle misses a p99 goal', () => {
    const g = sloGoals([point(0.5, { ttftP99: 1800 }, { ttftP99: 1500 })], 'lora-router');
    expect(g.p99VsBaseline?.met).toBe(false);
    expect(g.p99VsBaseline?.why).toBe('even the oracle, which never loads, is at 0.75×');
    // The oracle meets the bound: no "even".
    const h = sloGoals([point(0.5, { ttftP99: 1800 }, { ttftP99: 600 })], 'lora-router');
    expect(h.p99VsBaseline?.why).toBe('the oracle, which never loads, is at 0.30×');
  });

  it('blames blocked engines only when the fewest loads stop them a quarter of the window or more', () => {
    const miss = { sloAttainment: 0.5 };
    const much = sloGoals([point(0.3, miss, {}, { blocked: 0.3 })], 'lora-router');
    expect(much.sloVsOracle?.why).toBe(
      'the fewest loads possible stop the engines 30.0% of the arrival window',
    );
    const little = sloGoals([point(0.3, miss, {}, { blocked: 0.05 })], 'lora-router');
    expect(little.sloVsOracle?.why).toBe(
      'reachable: the fewest loads possible stop the engines only 5.0% of the arrival window',
    );
  });

  it('with the free-load figure, says the loads take the engines, not "reachable", however short the window share', () => {
    // Issue 26: bursty at 300 ms loads and 50%, 9-16% of the arrival window, yet 0.67x the oracle
    // and 0.96x with loads that take no time: the arrival window hides that bursts are short.
    const miss = { sloAttainment: 0.6 };
    const g = sloGoals([point(0.5, miss, {}, { blocked: 0.05, freeLoads: 0.95 })], 'lora-router');
    expect(g.sloVsOracle?.why).toBe(
      'the fewest loads possible stop the engines 5.0% of the arrival window; with loads that take no time (same slots) lora-router reaches 95.0% (0.95× the oracle); its loads are 1.00× the fewest possible (pinned Belady): the time the loads stop the engines stands in the way',
    );
  });

  it('blames refusals for an infinite p99, and blocked engines for a refusal', () => {
    const g = sloGoals(
      [point(0.5, { errors: 5, ttftP99: Infinity, sloAttainment: 0.5 }, { ttftP99: 500 }, { blocked: 1.3 })],
      'lora-router',
    );
    expect(g.noRefusal).toMatchObject({ value: 5, met: false });
    expect(g.noRefusal?.why).toBe('the fewest loads possible stop the engines 130.0% of the arrival window');
    expect(g.p99VsBaseline?.why).toMatch(/^over 1% refused: the p99 request is never answered/);
    expect(g.sloVsBaseline?.why).toBe(
      'the fewest loads possible stop the engines 130.0% of the arrival window',
    );
  });

  it('compares loads with pinned Belady over what the router served, and says whether LRU gets there', () => {
    const g = sloGoals([point(0.7, { loads: 14, pinnedBelady: 10 }, {})], 'lora-router');
    expect(g.loadsVsPinned).toMatchObject({
      value: 1.4,
      met: false,
      why: 'beyond LRU: LRU on one cache of every slot, same pins, needs 1.30×',
    });
    const h = sloGoals([point(0.7, { loads: 14, pinnedBelady: 10, pinnedLru: 11 }, {})], 'lora-router');
    expect(h.loadsVsPinned?.why).toBe(
      'reachable online: LRU on one cache of every slot, same pins, needs 1.10×',
    );
    // Above 50% load only the goals that apply there.
    expect(g.noRefusal).toBeUndefined();
    expect(g.p99VsBaseline).toBeUndefined();
  });

  it('means over seeds, but one refusal in any seed misses "no refusal"', () => {
    const g = sloGoals(
      [point(0.3, { sloAttainment: 1 }, {}), point(0.3, { sloAttainment: 0.9, errors: 1 }, {}, { seed: 2 })],
      'lora-router',
    );
    expect(g.sloVsBaseline?.value).toBeCloseTo(0.95);
    expect(g.noRefusal?.met).toBe(false);
  });

  it('ranks variants by p99 below capacity: a geometric mean over the points every variant answers', () => {
    const both = (load: number, loadMs: number, a: number, b: number, errors = 0) => {
      const p = point(load, { ttftP99: a, errors }, {}, { loadMs });
      p.results.push(result('other', { ttftP99: b }));
      return p;
    };
    const points = [
      both(0.3, 100, 500, 2000),
      both(0.5, 300, 2000, 1000),
      // lora-router's p99 is never answered here: left out for both.
      both(0.5, 1000, Infinity, 100, 3),
      // Above 50% load: left out.
      both(0.7, 100, 100, 100),
    ];
    const r = p99Below(points, ['lora-router', 'other']);
    expect(r.get('lora-router')).toBeCloseTo(0.5); // 0.25 and 1
    expect(r.get('other')).toBeCloseTo(Math.sqrt(0.5)); // 1 and 0.5
  });
});
