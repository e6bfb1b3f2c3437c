import { countTokens as gpt4oTokens } from 'gpt-tokenizer/cjs/model/gpt-4o';
import { estimateError, REFERENCES, workloadPrompts, type ChatPrompt } from '../../bench/token-estimate';
import { chatBody, systemPrompt } from '../../sim/workload/body';
import { promptText } from '../../sim/workload/text';
import { estimateTokens } from '../../src/work/estimate';

/**
 * The router's prompt-token estimate (characters / 4 + 4 a message) against a real tokenizer on
 * the prompts the benchmark generates. A bounded sample: the longest long-context prompts a
 * replica can take (~40-65k tokens) and a few of each workload, a few seconds of BPE in all.
 */
const BOUND = { bias: 0.1, p95: 0.15 };

const [simulator, o200k] = REFERENCES;

function sample(): ChatPrompt[] {
  const long = workloadPrompts('long', 200, 1);
  const tokens = (p: ChatPrompt) => estimateTokens(p.body).promptTokens;
  const fits = long.filter((p) => tokens(p) + 512 <= 65536).sort((a, b) => tokens(b) - tokens(a));
  return [...fits.slice(0, 4), ...fits.slice(-4), ...long.slice(0, 6), ...workloadPrompts('bursty', 10, 1)];
}

describe('prompt-token estimate against a real tokenizer (bench/token-estimate.ts)', () => {
  const prompts = sample();

  it('samples prompts up to a replica context, among them one of 40k+ tokens', () => {
    expect(prompts.length).toBe(24);
    expect(Math.max(...prompts.map((p) => estimateTokens(p.body).promptTokens))).toBeGreaterThan(40_000);
  });

  it("equals the simulator's count on generated bodies (the DES and the HTTP simulator agree)", () => {
    const e = estimateError(prompts, simulator!);
    expect(e.maxAbs).toBe(0);
  });

  it(`is within ${BOUND.bias * 100}% bias and ${BOUND.p95 * 100}% p95 |error| of o200k_base`, () => {
    const e = estimateError(prompts, o200k!);
    expect(Math.abs(e.bias)).toBeLessThanOrEqual(BOUND.bias);
    expect(e.p95Abs).toBeLessThanOrEqual(BOUND.p95);
  });

  it('would fail that bound with characters / 3, or on the repeated-character bodies it replaced', () => {
    // characters / 3: the same prompts, counted a third higher than the estimate's rule.
    const third = estimateError(
      prompts.map((p) => ({
        ...p,
        body: {
          ...p.body,
          messages: p.messages.map((m) => ({
            ...m,
            content: m.content + m.content.slice(0, m.content.length / 3),
          })),
        },
      })),
      { name: 'o200k of the unpadded prompt', count: (q) => gpt4oTokens(q.messages) },
    );
    expect(third.bias).toBeGreaterThan(BOUND.bias);
    // 'x' repeated, as bodies were before: a BPE merges runs of one letter into long tokens.
    const xs = 'x'.repeat(20_000);
    const est = estimateTokens({ messages: [{ role: 'user', content: xs }] }).promptTokens;
    const real = gpt4oTokens([{ role: 'user', content: xs }]);
    expect((est - real) / real).toBeGreaterThan(BOUND.bias);
  });
});

describe('generated prompt text (sim/workload/text.ts)', () => {
  it('is the same text for the same offset and length, and a shorter one is a prefix of a longer one', () => {
    expect(promptText(12345, 5000)).toBe(promptText(12345, 5000));
    expect(promptText(12345, 9000).startsWith(promptText(12345, 5000))).toBe(true);
    expect(systemPrompt(3, 4000).startsWith(systemPrompt(3, 1000))).toBe(true);
    expect(systemPrompt(3, 1000)).not.toBe(systemPrompt(4, 1000));
  });

  it('wraps round the corpus for prompts longer than it, exactly as long as asked', () => {
    const t = promptText(7, 700_000);
    expect(t.length).toBe(700_000);
  });

  it('reads as prose, code and JSON', () => {
    const body = JSON.parse(chatBody('m', { at: 5, promptTokens: 30_000, outputTokens: 10 }).toString()) as {
      messages: { content: string }[];
    };
    const text = body.messages.map((m) => m.content).join('');
    expect(text).toMatch(/[A-Z][a-z]+ [a-z]+ [a-z]+/);
    expect(text).toContain('```ts');
    expect(text).toMatch(/"results":/);
    expect(/x{20}/.test(text)).toBe(false);
  });
});
