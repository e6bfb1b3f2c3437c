import { SimFleet } from '../../sim/fleet';
import type { VllmMetrics } from '../../sim/http/context';
import { readVllmLoad } from '../../src/metrics/replica-load';
import { WorkModel } from '../../src/work/work-model';
import { get, post } from '../helpers/http';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
/** A system prompt of 6,000 tokens by the simulator's count (4 characters a token). */
const SYSTEM = 'You are a support assistant for a bank. Answer briefly. '.repeat(430).slice(0, 24_000);
/** A question of about 2,000 tokens of its own. */
const QUESTION = 'Where is my card? I ordered it two weeks ago, the app says shipped. '.repeat(118);

const body = (i: number) => ({
  model: MODEL,
  max_tokens: 4,
  messages: [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: `[${i}] ${QUESTION}` },
  ],
});

/** A vLLM replica serving repeated system prompts, one request at a time; the router's work model scrapes it. */
async function serve(mode: VllmMetrics): Promise<{ rate: number; metrics: string }> {
  const fleet = await SimFleet.start([{ vllmMetrics: mode, timeScale: 10 }]);
  try {
    const u = fleet.urls[0]!;
    const w = new WorkModel({ prefillTokensPerS: 5000 });
    let metrics = '';
    for (let i = 0; i < 40; i++) {
      expect((await post(u, '/v1/chat/completions', body(i))).status).toBe(200);
      if (i % 4 === 3) {
        metrics = (await get(u, '/metrics')).text;
        w.observeReplica(u, readVllmLoad(metrics), i);
      }
    }
    return { rate: w.prefillRate(u), metrics };
  } finally {
    await fleet.stop();
  }
}

/** The simulator's engine computes 10,000 prompt tokens a second (`prefillMsPerToken` 0.1). */
const REAL = 10_000;

describe('prefix caching in the simulated vLLM', () => {
  it('serves a repeated system prompt from its prefix cache and says so in the computed-token families', async () => {
    const { metrics } = await serve('by-reason');
    const value = (re: RegExp) => Number(re.exec(metrics)?.[1]);
    const hits = value(/vllm:prompt_tokens_by_source_total\{[^}]*source="local_cache_hit"\} (\S+)/);
    const computed = value(/vllm:prompt_tokens_by_source_total\{[^}]*source="local_compute"\} (\S+)/);
    const prompt = value(/vllm:prompt_tokens_total\{[^}]*\} (\S+)/);
    // 39 of 40 requests find the system prompt's 375 blocks cached.
    expect(hits).toBe(39 * 6000);
    expect(hits + computed).toBe(prompt);
    expect(value(/vllm:request_prefill_kv_computed_tokens_sum\{[^}]*\} (\S+)/)).toBe(computed);
    expect(value(/vllm:prefix_cache_hits_total\{[^}]*\} (\S+)/)).toBe(hits);
  });

  it('the work model learns the prefill rate from computed tokens within 15% of the real one', async () => {
    // 2,000 computed tokens a request: 200 ms of prefill, and the step that ends it (20 ms) stays in.
    const { rate } = await serve('by-reason');
    expect(rate / REAL).toBeGreaterThan(0.85);
    expect(rate / REAL).toBeLessThan(1.15);
  });

  it('vLLM v0.11.0 (mode released) exports no computed tokens: learned from prompt tokens, the rate is far above the real one', async () => {
    const { rate, metrics } = await serve('released');
    expect(metrics).not.toContain('prompt_tokens_by_source');
    expect(metrics).not.toContain('request_prefill_kv_computed_tokens');
    // 8,000 prompt tokens in 220 ms: 3.6 times the real rate.
    expect(rate / REAL).toBeGreaterThan(3);
  });
});
