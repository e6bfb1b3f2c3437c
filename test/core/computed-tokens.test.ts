import { readVllmLoad } from '../../src/metrics/replica-load';
import { LoadTimes } from '../../src/work/load-times';
import { predictTtft, type PredictCandidate } from '../../src/work/predict';
import { WorkModel, type Admission } from '../../src/work/work-model';

const A = 'http://a:8000';
const B = 'http://b:8000';
const L = 'engine="0",model_name="m"';

/**
 * A replica's /metrics after `n` finished requests of 2,000 prompt tokens each, 1,800 of them a
 * system prompt its prefix cache held: 200 computed each, at 10,000 computed tokens a second
 * (0.02 s of prefill each). `computed`: the families newer vLLM exports (absent in v0.11.0).
 */
function metrics(n: number, computed: boolean): string {
  const lines = [
    `vllm:num_requests_running{${L}} 2.0`,
    `vllm:num_requests_waiting{${L}} 0.0`,
    `vllm:prompt_tokens_total{${L}} ${n * 2000}.0`,
    `vllm:time_to_first_token_seconds_count{${L}} ${n}.0`,
    `vllm:request_prompt_tokens_sum{${L}} ${n * 2000}.0`,
    `vllm:request_prompt_tokens_count{${L}} ${n}.0`,
    `vllm:request_prefill_time_seconds_sum{${L}} ${n * 0.02}`,
  ];
  if (computed)
    lines.push(
      `vllm:request_prefill_kv_computed_tokens_sum{${L}} ${n * 200}.0`,
      `vllm:request_prefill_kv_computed_tokens_count{${L}} ${n}.0`,
      `vllm:prompt_tokens_by_source_total{${L},source="local_compute"} ${n * 200}.0`,
      `vllm:prompt_tokens_by_source_total{${L},source="local_cache_hit"} ${n * 1800}.0`,
      `vllm:prompt_tokens_by_source_total{${L},source="external_kv_transfer"} 0.0`,
    );
  return lines.join('\n') + '\n';
}

/** Scrapes once a second, 50 requests finishing in each. */
function learn(computed: boolean): WorkModel {
  const w = new WorkModel({ prefillTokensPerS: 5000 });
  for (let t = 0; t <= 20; t++) w.observeReplica(A, readVllmLoad(metrics(t * 50, computed)), t * 1000);
  return w;
}

describe('prefill rate from computed tokens (prefix caching)', () => {
  it('a replica serving repeated system prompts: learned from computed tokens, within 5% of its real rate', () => {
    const w = learn(true);
    expect(w.prefillRate(A)).toBeGreaterThan(9500);
    expect(w.prefillRate(A)).toBeLessThan(10_500);
  });

  it('without the computed-token families (vLLM v0.11.0): from prompt tokens, hits included, and no prefix credit there', () => {
    const w = learn(false);
    // The fallback: 100,000 prompt tokens a second of prefill, ten times the real rate.
    expect(w.prefillRate(A)).toBeGreaterThan(95_000);
  });

  it('reads the computed-token families over every engine (data parallel adds up), the local computes only', () => {
    const text =
      metrics(10, true) +
      `vllm:request_prefill_kv_computed_tokens_sum{engine="1",model_name="m"} 500.0\n` +
      `vllm:prompt_tokens_by_source_total{engine="1",model_name="m",source="local_compute"} 700.0\n`;
    const load: Record<string, unknown> = { ...readVllmLoad(text) };
    expect(load.finishedComputedTokens).toBe(2500);
    expect(load.computedTokensTotal).toBe(2700);
  });
});

describe('the step that ends each prefill', () => {
  it('is taken out of the rate learned from computed tokens, and the prediction adds it back', () => {
    // 50 requests a second, each 20 computed tokens (the rest cached) and 30 ms of prefill: 10 ms
    // of computing at 2,000 tokens a second, then a 20 ms step (the decode time per token).
    const w = new WorkModel({ prefillTokensPerS: 5000, decodeMsPerToken: 20 });
    for (let t = 0; t <= 20; t++)
      w.observeReplica(
        A,
        {
          waiting: 0,
          running: 2,
          finishedPromptTokens: t * 50 * 2000,
          finishedComputedTokens: t * 50 * 20,
          prefillSeconds: t * 50 * 0.03,
          generationTokens: t * 50 * 11,
          finishedRequests: t * 50,
          decodeSeconds: t * 50 * 0.2,
        } as Parameters<WorkModel['observeReplica']>[1],
        t * 1000,
      );
    expect(w.prefillRate(A)).toBeCloseTo(2000, 0);
    const held = { url: A, residentCount: 0, holder: true, prefixTokens: 1980 } as PredictCandidate;
    const req = { promptTokens: 2000, maxTokens: 10, maxLoadedAdapters: 4, queueTimeoutMs: 1000 };
    expect(predictTtft(held, req, 20_000, w, new LoadTimes(500, 50)).ownMs).toBeCloseTo(30, 5);
  });
});

describe('prefix credit in the predicted TTFT', () => {
  const req = { promptTokens: 2000, maxTokens: 10, maxLoadedAdapters: 4, queueTimeoutMs: 1000 };
  const loads = new LoadTimes(500, 50);

  it('a prompt whose prefix the replica holds is predicted cheaper there than on one without it', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    const held = { url: A, residentCount: 0, holder: true, prefixTokens: 1800 } as PredictCandidate;
    const a = predictTtft(held, req, 0, w, loads);
    const b = predictTtft({ url: B, residentCount: 0, holder: true }, req, 0, w, loads);
    // 200 computed tokens against 2,000, at 10,000 a second.
    expect(a.totalMs).toBeCloseTo(20, 5);
    expect(b.totalMs).toBeCloseTo(200, 5);
  });

  it('credits at most all but the last token, and queues only the computed part behind it', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    const whole = { url: A, residentCount: 0, holder: true, prefixTokens: 5000 } as PredictCandidate;
    expect(predictTtft(whole, req, 0, w, loads).totalMs).toBeCloseTo(0.1, 5);
    w.admit({ id: '1', url: A, promptTokens: 2000, maxTokens: 10, at: 0, cachedTokens: 1800 } as Admission);
    expect(w.queuedPrefill(A, 0)).toBe(200);
  });

  it('no credit where the rate was learned from prompt tokens: it prices the hits in already', () => {
    const w = learn(false);
    const held = { url: A, residentCount: 0, holder: true, prefixTokens: 1800 } as PredictCandidate;
    const plain = { url: A, residentCount: 0, holder: true } as PredictCandidate;
    expect(predictTtft(held, req, 21_000, w, loads).totalMs).toBe(
      predictTtft(plain, req, 21_000, w, loads).totalMs,
    );
  });
});
