import { goalList, goalListTable } from '../../bench/goal-list';
import { classGoal, PEERS, type BenchResults } from '../../bench/goals';
import { FREE_LOADS, POOLED } from '../../bench/des/bounds';
import { peerGoals } from '../../bench/des/peers-report';
import type { PolicyResult } from '../../bench/des/run';
import type { ClassFigures, ClassPoint } from '../../bench/des/slo-classes';
import type { SloPoint } from '../../bench/des/slo-sweep';
import { policyResult } from '../helpers/policy-result';

const DYNAMO = PEERS[2]!;

/** One seed of one point: lora-router, two baselines (Dynamo's controller one of them) and the bounds. */
const point = (
  loadMs: number,
  load: number,
  router: Partial<PolicyResult>,
  dynamo: Partial<PolicyResult> = {},
) =>
  ({
    workload: 'bursty',
    loadMs,
    load,
    seed: 1,
    pinned: 10,
    blocked: 0.1,
    results: [
      policyResult('lora-router', { sloAttainment: 0.9, ...router }),
      policyResult('round robin', { sloAttainment: 0.5, ttftP99: 3000, loads: 40 }),
      policyResult(DYNAMO, { sloAttainment: 0.85, ttftP99: 2000, loads: 20, unloads: 10, ...dynamo }),
      policyResult('oracle (unlimited slots)', { sloAttainment: 1, loads: 0 }),
      policyResult(POOLED, { sloAttainment: 1, loads: 0 }),
      policyResult(`lora-router${FREE_LOADS}`, { sloAttainment: 0.97 }),
    ],
  }) as SloPoint;

describe("issue 34's goals per point (bench/des/peers-report.ts)", () => {
  it('TTFT p99 below capacity against the baseline with the lowest p99, saying what the tail bought', () => {
    const g = peerGoals([point(300, 0.5, { ttftP99: 2400, ttftP99Served: 2400 })], 'lora-router');
    expect(g.p99).toMatchObject({ value: 2400, bound: 2000, met: false });
    expect(g.p99!.why).toMatch(
      /best: Dynamo min-cost-flow .* 2\.00 s, SLO 85\.0%; lora-router 1\.20× that, SLO 90\.0%/,
    );
    expect(peerGoals([point(300, 0.5, { ttftP99: 1900 })], 'lora-router').p99!.met).toBe(true);
    // Refusals past 1%: the p99 request is never answered.
    const refused = peerGoals([point(300, 0.9, { ttftP99: Infinity, errors: 5 })], 'lora-router').p99!;
    expect(refused.why).toMatch(/refused 5\.0% of requests: its p99 request is never answered/);
    expect(peerGoals([point(300, 1.2, {})], 'lora-router').p99).toBeUndefined();
  });

  it('against the pooled bound, tells the split into replicas and slots from the loads and placement', () => {
    const placement = peerGoals([point(300, 0.5, { sloAttainment: 0.8 })], 'lora-router').vsPooled!;
    expect(placement.met).toBe(false);
    expect(placement.why).toBe(
      "pooled 100.0%; with loads free the fleet's replicas and slots reach 97.0% (0.97×: what the split into replicas costs), lora-router 80.0% (0.82× that: what its loads and placement cost)",
    );
    expect(peerGoals([point(1000, 0.5, {})], 'lora-router').vsPooled).toBeUndefined();
  });

  it("churn: operations per served request at most Dynamo's, at equal or better SLO; says which failed", () => {
    // Dynamo: (20 + 10) / 100 = 0.3 per served request.
    expect(peerGoals([point(300, 0.5, { loads: 10, unloads: 5 })], 'lora-router').churn!.met).toBe(true);
    const more = peerGoals([point(300, 0.5, { loads: 30, unloads: 10 })], 'lora-router').churn!;
    expect(more.why).toMatch(/^0\.40 operations per served request, 1\.33× Dynamo MCF's 0\.30/);
    const worse = peerGoals([point(300, 0.5, { loads: 10, sloAttainment: 0.8 })], 'lora-router').churn!;
    expect(worse.why).toBe("SLO 80.0% below Dynamo MCF's 85.0%");
  });
});

const figures = (within: number, refused = 0): ClassFigures => ({
  requests: 100,
  refused,
  within,
  ttftP50: 500,
  ttftP99Served: 1500,
});
const classPoint = (
  loadMs: number,
  load: number,
  seed: number,
  interactive: number,
  batch: number,
  refused = 0,
) =>
  ({
    workload: 'conversation',
    loadMs,
    load,
    seed,
    policies: [
      {
        policy: 'lora-router, SLO classes',
        byClass: { interactive: figures(interactive), batch: figures(batch, refused) },
      },
      { policy: 'lora-router, one class', byClass: { interactive: figures(0.9), batch: figures(1) } },
    ],
  }) as ClassPoint;

describe('the two-class goals per class (bench/goals.ts classGoal)', () => {
  it('interactive up to 70% with loads up to 1 s, batch below capacity; means over seeds, with the reason', () => {
    const g = classGoal([classPoint(300, 0.7, 1, 1, 0.97, 3), classPoint(300, 0.7, 2, 0.99, 0.99, 1)]);
    expect(g.interactive).toMatchObject({ value: 0.995, met: true });
    expect(g.batch).toMatchObject({ value: 0.98, met: false });
    expect(g.batch!.why).toBe(
      '98.0% within 30 s: 2.0% refused, served p99 1.50 s; treated alike (one class) 100.0%',
    );
    expect(classGoal([classPoint(3000, 0.7, 1, 0.5, 1)]).interactive).toBeUndefined();
    const over = classGoal([classPoint(300, 1.2, 1, 0.5, 0.5)]);
    expect(over).toEqual({});
  });
});

describe("issue 34's goal list (bench/goal-list.ts)", () => {
  const header = {
    date: '2026-12-03T00:00:00.000Z',
    full: false,
    scenario: { replicas: 8, slots: 8, adapters: 200, alpha: 1, seed: 1, engine: {} },
    workload: 'trace',
    capacity: 10,
  };

  it('says "not measured" for every goal whose part did not run', () => {
    const list = goalList(header);
    expect(list.every((g) => g.of === undefined)).toBe(true);
    expect(goalListTable(header)).not.toMatch(/\*\*(met|missed)\*\*/);
    expect(goalListTable(header).match(/not measured/g)).toHaveLength(list.length);
  });

  it('counts the points each goal applies to and names the missed ones', () => {
    const r: BenchResults = {
      ...header,
      slo: {
        requests: 100,
        variants: ['lora-router'],
        points: [
          point(300, 0.5, { ttftP99: 2400 }),
          point(1000, 0.5, {}),
          point(300, 0.7, { sloAttainment: 0.8 }),
        ],
      },
      classes: { requests: 100, points: [classPoint(300, 0.5, 1, 0.9, 1)] },
    };
    const goal = (part: string) => goalList(r).find((g) => g.goal.includes(part))!;
    expect(goal('every baseline')).toMatchObject({ met: 2, of: 3, missed: ['bursty 300 ms 70%'] });
    expect(goal('pooled')).toMatchObject({ met: 1, of: 2, missed: ['bursty 300 ms 70%'] });
    expect(goal('TTFT p99')).toMatchObject({ met: 2, of: 3, missed: ['bursty 300 ms 50%'] });
    expect(goal('batch')).toMatchObject({ met: 1, of: 1, missed: [] });
    expect(goal('interactive')).toMatchObject({ met: 0, of: 1, missed: ['300 ms 50%'] });
    expect(goalListTable(r)).toMatch(/\*\*missed\*\* at 1 of 3 points \| bursty 300 ms 50%/);
  });
});
