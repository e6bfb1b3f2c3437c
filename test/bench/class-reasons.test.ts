import type { ClassMisses } from '../../bench/des/class-misses';
import type { ClassPoint } from '../../bench/des/slo-classes';
import { CLASS_POLICY, CLASS_VARIANT_ONE, classGoal } from '../../bench/goals';

const figures = (within: number) => ({
  requests: 100,
  refused: 0,
  within,
  ttftP50: 500,
  ttftP99Served: 2500,
});
const misses = (late: number, otherLoads: number): ClassMisses => ({
  requests: 100,
  late,
  refused: 0,
  coldAtArrival: late - 1,
  byCause: { otherLoads, queue: late - otherLoads, gateway: 0, ownLoad: 0 },
  msByPart: { gateway: 0, loadQueue: 0, ownLoad: 0, otherLoads: 0, queue: 0, prefill: 0 },
  ownLoadAlone: 0,
  behindBatch: late,
});
const point = (seed: number, m?: Record<string, ClassMisses>): ClassPoint => ({
  workload: 'conversation',
  loadMs: 1000,
  load: 0.3,
  seed,
  policies: [
    { policy: CLASS_POLICY, byClass: { interactive: figures(0.94), batch: figures(1) } },
    { policy: CLASS_VARIANT_ONE, byClass: { interactive: figures(0.93), batch: figures(1) } },
  ],
  ...(m ? { misses: m } : {}),
});

describe('the two-class goals say where the late requests went', () => {
  it('sums the causes over the seeds, most first', () => {
    const g = classGoal([point(1, { interactive: misses(6, 5) }), point(2, { interactive: misses(6, 4) })]);
    expect(g.interactive!.why).toContain(
      "12 late, 10 of them for an adapter no replica held, put down to another adapter's load on its engine 9, the replica's queue 3",
    );
  });

  it('says nothing of causes for results recorded without them', () => {
    const g = classGoal([point(1), point(2, { interactive: misses(6, 5) })]);
    expect(g.interactive!.why).not.toContain('put down to');
    expect(g.interactive!.why).toContain('treated alike (one class) 93.0%');
  });
});
