import { defaultEngineOptions } from '../../sim/engine/engine';
import { parseCompletion } from '../../sim/http/openai';
import { chatBody, systemPrompt } from '../../sim/workload/body';
import { arrivalShape } from '../../sim/workload/bursty';
import { longWorkload } from '../../sim/workload/long';
import { percentile } from '../../sim/workload/percentile';
import { syntheticWorkload, type Arrival } from '../../sim/workload/workload';
import { fleetCapacity, type Scenario } from '../../bench/des/run';
import { parseBody } from '../../src/router/request';

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('long-context workload (sim/workload/long.ts)', () => {
  const w = longWorkload(20000, 3);
  const prompts = w.map((a) => a.promptTokens);

  it('has prompts of mean ~11k, median ~7k tokens and a p99 near a replica KV capacity', () => {
    expect(mean(prompts)).toBeGreaterThan(9500);
    expect(mean(prompts)).toBeLessThan(12500);
    expect(percentile(prompts, 0.5)).toBeGreaterThan(6300);
    expect(percentile(prompts, 0.5)).toBeLessThan(7700);
    expect(percentile(prompts, 0.99)).toBeGreaterThan(50_000);
    expect(percentile(prompts, 0.99)).toBeLessThan(85_000);
  });

  it('answers a few hundred tokens, most prompts open with a shared system prompt', () => {
    expect(mean(w.map((a) => a.outputTokens))).toBeGreaterThan(300);
    expect(mean(w.map((a) => a.outputTokens))).toBeLessThan(400);
    const shared = w.filter((a) => a.prefix);
    expect(shared.length / w.length).toBeGreaterThan(0.8);
    expect(shared.length / w.length).toBeLessThan(0.9);
    expect(new Set(shared.map((a) => a.prefix!.id)).size).toBeLessThanOrEqual(8);
    expect(shared.every((a) => a.prefix!.tokens <= a.promptTokens && a.prefix!.tokens >= 256)).toBe(true);
  });

  it('arrives in short batches: gaps far more variable than Poisson', () => {
    const { cv } = arrivalShape(w);
    expect(cv).toBeGreaterThan(1.5);
    // A batch's requests land within half a second of each other: many gaps are tiny.
    const gaps = w.slice(1).map((a, i) => a.at - w[i]!.at);
    expect(gaps.filter((g) => g < 500).length / gaps.length).toBeGreaterThan(0.6);
  });
});

describe('request bodies (sim/workload/body.ts)', () => {
  it.each([
    { at: 1, promptTokens: 9, outputTokens: 5 },
    { at: 2, promptTokens: 7000, outputTokens: 300 },
    { at: 3, promptTokens: 40_000, outputTokens: 300, prefix: { id: 2, tokens: 4000 } },
    { at: 4, promptTokens: 3000, outputTokens: 300, prefix: { id: 1, tokens: 6000 } },
  ] as Arrival[])('is as long as the request, by the simulator tokenizer: %j', (a) => {
    const body = chatBody('ad-1', a);
    const parsed = parseCompletion('chat', JSON.parse(body.toString()), 16);
    expect(parsed).toMatchObject({ model: 'ad-1', promptTokens: a.promptTokens, maxTokens: a.outputTokens });
    // The router reads the same body (its model) as in production.
    expect(parseBody(body, 'inference', 10 * 1024 * 1024).model).toBe('ad-1');
  });

  it('repeats the same system prompt text for requests sharing it, and diverges after it', () => {
    const a = chatBody('m', { at: 1, promptTokens: 5000, outputTokens: 1, prefix: { id: 4, tokens: 2000 } });
    const b = chatBody('m', { at: 2, promptTokens: 8000, outputTokens: 1, prefix: { id: 4, tokens: 2000 } });
    const sys = (x: Buffer) => (JSON.parse(x.toString()) as { messages: { content: string }[] }).messages;
    expect(sys(a)[0]!.content).toBe(systemPrompt(4, 2000));
    expect(sys(b)[0]!.content).toBe(sys(a)[0]!.content);
    expect(sys(a)[1]!.content.slice(0, 20)).not.toBe(sys(b)[1]!.content.slice(0, 20));
  });
});

describe('fleet capacity: 100% load per workload token mix (bench/des/run.ts)', () => {
  const s: Scenario = { replicas: 8, slots: 8, adapters: 200, alpha: 1, seed: 1, engine: {} };
  const e = defaultEngineOptions;
  const same = (prompt: number, out: number, n = 10): Arrival[] =>
    Array.from({ length: n }, (_, i) => ({ at: i, promptTokens: prompt, outputTokens: out }));

  it('short prompts: a full batch of max_num_seqs, prefill plus a share of the decode steps', () => {
    const b = e.maxNumSeqs;
    const step = e.decodeMsPerStep * (1 + e.decodeSlowdownPerSeq * (b - 1));
    expect(fleetCapacity(s, same(1000, 200), e)).toBeCloseTo((8 * 1000) / ((200 * step) / b + 1000 * 0.1), 6);
  });

  it('long prompts: KV capacity bounds the batch before the slot count does', () => {
    // 20,000 + 300 tokens reserved each: 65,536 / 20,300 = 3.2 sequences at once, not 16.
    const b = 65536 / 20300;
    const step = e.decodeMsPerStep * (1 + e.decodeSlowdownPerSeq * (b - 1));
    const cap = fleetCapacity(s, same(20000, 300), e);
    expect(cap).toBeCloseTo((8 * 1000) / ((300 * step) / b + 20000 * 0.1), 6);
    // Far below what counting requests per replica (a full batch of 16) would claim.
    const naive = (8 * 1000) / ((300 * e.decodeMsPerStep * (1 + e.decodeSlowdownPerSeq * 15)) / 16 + 2000);
    expect(cap).toBeLessThan(naive * 0.95);
  });

  it('leaves out requests no replica can take (longer than its context)', () => {
    const w = [...same(1000, 200), { at: 99, promptTokens: 100_000, outputTokens: 300 }];
    expect(fleetCapacity(s, w, e)).toBe(fleetCapacity(s, same(1000, 200), e));
  });

  it('is unchanged for the conversation workload, whose batches KV never bounds', () => {
    const w = syntheticWorkload(3000, 1);
    const meanP = mean(w.map((a) => a.promptTokens));
    const meanO = mean(w.map((a) => a.outputTokens));
    const step = e.decodeMsPerStep * (1 + e.decodeSlowdownPerSeq * 15);
    expect(fleetCapacity(s, w, e)).toBeCloseTo((8 * 1000) / ((meanO * step) / 16 + meanP * 0.1), 6);
  });
});
