import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { seededRandom } from '../../src/random';
import { AZURE_CONVERSATION_FIT, atRate, readTrace, syntheticWorkload } from '../../sim/workload/workload';
import { zipfSampler } from '../../sim/workload/zipf';
import { arrivalShape, burstyWorkload } from '../../sim/workload/bursty';

const TRACE = join(
  __dirname,
  '..',
  '..',
  '..',
  'shared',
  'data',
  'azure-llm-inference-2023',
  'conversation.csv',
);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe('workloads', () => {
  (existsSync(TRACE) ? it : it.skip)('reads the Azure trace: 19,366 requests over about 58 minutes', () => {
    const t = readTrace(TRACE);
    expect(t).toHaveLength(19366);
    expect(t[0]).toEqual({ at: 0, promptTokens: 374, outputTokens: 44 });
    expect(t.at(-1)!.at / 60000).toBeCloseTo(58.4, 0);
  });

  it('generates a synthetic workload with the fitted rate, burstiness and token medians', () => {
    const w = syntheticWorkload(20000, 7);
    const rate = (w.length - 1) / (w.at(-1)!.at / 1000);
    expect(rate).toBeCloseTo(AZURE_CONVERSATION_FIT.ratePerS, 0);
    const gaps = w.slice(1).map((a, i) => a.at - w[i]!.at);
    const mean = gaps.reduce((s, g) => s + g, 0) / gaps.length;
    const cv = Math.sqrt(gaps.reduce((s, g) => s + (g - mean) ** 2, 0) / gaps.length) / mean;
    expect(cv).toBeGreaterThan(1.0);
    expect(cv).toBeLessThan(1.2);
    expect(median(w.map((a) => a.promptTokens))).toBeGreaterThan(650); // trace: 1020 (exp(mu) = 760)
    expect(median(w.map((a) => a.promptTokens))).toBeLessThan(1100);
    expect(median(w.map((a) => a.outputTokens))).toBeGreaterThan(120); // trace: 129
    expect(median(w.map((a) => a.outputTokens))).toBeLessThan(170);
    expect(syntheticWorkload(10, 7)).toEqual(syntheticWorkload(10, 7));
  });

  it('rescales arrivals to a target rate', () => {
    const w = atRate(syntheticWorkload(1000, 1), 50);
    expect((w.length - 1) / (w.at(-1)!.at / 1000)).toBeCloseTo(50, 5);
  });

  it('draws Zipf ranks: rank 0 most often, in proportion to 1/(k+1)^alpha', () => {
    const z = zipfSampler(10, 1, seededRandom(3));
    const counts = Array(10).fill(0);
    for (let i = 0; i < 100000; i++) counts[z()]++;
    const h = 1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 1 / 6 + 1 / 7 + 1 / 8 + 1 / 9 + 1 / 10;
    expect(counts[0] / 100000).toBeCloseTo(1 / h, 2);
    expect(counts[1] / 100000).toBeCloseTo(1 / 2 / h, 2);
    const uniform = zipfSampler(4, 0, seededRandom(3));
    const u = Array(4).fill(0);
    for (let i = 0; i < 40000; i++) u[uniform()]++;
    for (const c of u) expect(c / 40000).toBeCloseTo(0.25, 1);
  });
});

describe('bursty, prefill-heavy workload', () => {
  const w = burstyWorkload(20000, 1);
  const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
  it('arrives in bursts: inter-arrival CV 10-15, busy seconds about 25x the mean rate', () => {
    const { cv, peak } = arrivalShape(w);
    expect(cv).toBeGreaterThan(9);
    expect(cv).toBeLessThan(16);
    expect(peak).toBeGreaterThan(15);
    expect(peak).toBeLessThan(40);
    // The conversation shape is nowhere near: this is what makes the workload different.
    expect(arrivalShape(syntheticWorkload(20000, 1)).cv).toBeLessThan(1.3);
  });
  it('has long prompts (1-8k, mean about 2k) and short answers (5-50, mean about 30)', () => {
    const p = w.map((a) => a.promptTokens);
    const o = w.map((a) => a.outputTokens);
    expect(Math.min(...p)).toBeGreaterThanOrEqual(1000);
    expect(Math.max(...p)).toBeLessThanOrEqual(8000);
    expect(mean(p)).toBeGreaterThan(1800);
    expect(mean(p)).toBeLessThan(2300);
    expect(Math.min(...o)).toBeGreaterThanOrEqual(5);
    expect(Math.max(...o)).toBeLessThanOrEqual(50);
    expect(mean(o)).toBeGreaterThan(26);
    expect(mean(o)).toBeLessThan(34);
    expect(burstyWorkload(50, 3)).toEqual(burstyWorkload(50, 3));
  });
});
