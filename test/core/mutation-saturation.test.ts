/**
 * A replica's saturation (src/fleet/saturation.ts) alone: the count rule's two ratios and its
 * target of 0, and the predicted rule's figure against the fastest other replica that is up.
 * Also `nextFence` (src/fleet/types.ts): at least the clock in tenths of a ms, above the last.
 */
import { replicaSaturations, saturation, type SaturationPolicy } from '../../src/fleet/saturation';
import { FENCE_PER_MS, nextFence } from '../../src/fleet/types';

const COUNT: SaturationPolicy = { targetWaitingPerReplica: 4, kvCeiling: 0.8 };

describe('saturation (count)', () => {
  it('the larger of waiting over its target and KV usage over its ceiling', () => {
    expect(saturation({ waiting: 2, kvUsage: 0.2 }, COUNT)).toBe(0.5);
    expect(saturation({ waiting: 1, kvUsage: 0.6 }, COUNT)).toBeCloseTo(0.75);
    expect(saturation({ waiting: 6, kvUsage: 0.8 }, COUNT)).toBe(1.5);
    // llama.cpp: no KV figure, the queue alone.
    expect(saturation({ waiting: 3, kvUsage: undefined }, COUNT)).toBe(0.75);
  });

  it('a target of 0: any waiting request saturates, none does not', () => {
    const p = { targetWaitingPerReplica: 0, kvCeiling: 0.8 };
    expect(saturation({ waiting: 1, kvUsage: 0 }, p)).toBe(Infinity);
    expect(saturation({ waiting: 0, kvUsage: 0.4 }, p)).toBe(0.5);
    expect(saturation({ waiting: 0, kvUsage: undefined }, p)).toBe(0);
  });
});

describe('replicaSaturations', () => {
  const up = (url: string, waiting = 0) => ({ url, waiting, kvUsage: 0.4, health: 'up' as const });

  it('count: each replica by its own policy, no wait asked', () => {
    const waitMs = jest.fn(() => 0);
    const out = replicaSaturations(
      [up('a', 2), up('b', 2)],
      (url) => (url === 'a' ? COUNT : { targetWaitingPerReplica: 1, kvCeiling: 0.8 }),
      waitMs,
      100,
    );
    expect(out).toEqual([0.5, 2]);
    expect(waitMs).not.toHaveBeenCalled();
  });

  it('predicted: its wait over the fastest other one that is up, plus a load and the margin', () => {
    const p = { ...COUNT, predictedMarginMs: 50 };
    const waits: Record<string, number> = { a: 600, b: 200, c: 100, d: 0 };
    const out = replicaSaturations(
      [up('a'), up('b'), up('c'), { ...up('d'), health: 'down' as const }],
      () => p,
      (url) => waits[url]!,
      250,
    );
    // a: 600 / (100 + 250 + 50); b: 200 / (100 + 300); c: 100 / (200 + 300); d (down) counts for none.
    expect(out[0]).toBeCloseTo(1.5);
    expect(out[1]).toBeCloseTo(0.5);
    expect(out[2]).toBeCloseTo(0.2);
    expect(out[3]).toBeCloseTo(0 / 400);
  });

  it('predicted: the fastest other one, wherever it is listed', () => {
    const p = { ...COUNT, predictedMarginMs: 0 };
    const waits: Record<string, number> = { a: 100, b: 600, c: 300 };
    const out = replicaSaturations(
      [up('a'), up('b'), up('c')],
      () => p,
      (url) => waits[url]!,
      0,
    );
    expect(out[2]).toBe(3);
  });

  it('predicted, alone or the others down: against an idle replica; never over less than 1 ms', () => {
    const p = { ...COUNT, predictedMarginMs: 50 };
    expect(
      replicaSaturations(
        [up('a')],
        () => p,
        () => 300,
        250,
      ),
    ).toEqual([1]);
    expect(
      replicaSaturations(
        [up('a'), { ...up('b'), health: 'down' as const }],
        () => p,
        () => 300,
        250,
      )[0],
    ).toBe(1);
    const tight = { ...COUNT, predictedMarginMs: 0 };
    expect(
      replicaSaturations(
        [up('a')],
        () => tight,
        () => 5,
        0,
      ),
    ).toEqual([5]);
    expect(
      replicaSaturations(
        [up('a')],
        () => ({ ...COUNT, predictedMarginMs: 0.5 }),
        () => 5,
        0,
      ),
    ).toEqual([5]);
  });

  it('predicted beside count: the count replicas are not waited on', () => {
    const waits: Record<string, number> = { a: 400, b: 100 };
    const out = replicaSaturations(
      [up('a'), up('b', 2)],
      (url) => (url === 'a' ? { ...COUNT, predictedMarginMs: 0 } : COUNT),
      (url) => waits[url]!,
      0,
    );
    // b is count-judged: its wait is taken as 0, the fastest for a.
    expect(out).toEqual([400, 0.5]);
  });
});

describe('nextFence', () => {
  it('the clock in tenths of a ms when above the last, else the last + 1', () => {
    expect(FENCE_PER_MS).toBe(10);
    expect(nextFence(0, 5.9)).toBe(50);
    expect(nextFence(49, 5)).toBe(50);
    expect(nextFence(50, 5)).toBe(51);
    expect(nextFence(70, 5)).toBe(71);
    expect(nextFence(3, Number.NaN)).toBe(4);
  });
});
