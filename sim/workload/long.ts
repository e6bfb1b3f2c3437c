import { seededRandom } from '../../src/random';
import { zipfSampler } from './zipf';
import { draws, type Arrival } from './workload';

/**
 * The shape of long-context chat (agent and RAG traffic, issue 25): prompts about ten times the
 * conversation trace's, log-normal with median ~7k and mean ~11k tokens and a p99 near a
 * replica's KV capacity (65,536 tokens); most prompts open with one of a few long shared system
 * prompts; answers of a few hundred tokens; requests arrive in short batches (an agent's fan-out,
 * a RAG pipeline's parallel calls). The tail past the capacity is kept: those requests get the
 * replica's context-length 400, as they would from vLLM.
 */
export const LONG_SHAPE = {
  /** Batches per second at the nominal rate; the benchmark rescales to its target load anyway. */
  batchesPerS: 0.25,
  /** Requests per batch: 1 + geometric with this mean of extra requests. */
  extraPerBatch: 3,
  /** A batch's requests spread uniformly over this many seconds. */
  batchSpreadS: 0.5,
  /** Prompt tokens: log-normal (median e^mu = 7,000), clamped to [min, max]. */
  prompt: { mu: Math.log(7000), sigma: 0.95, min: 256, max: 131072 },
  /** Answer tokens: log-normal, mean about 350. */
  output: { mu: Math.log(280), sigma: 0.67, min: 16, max: 2048 },
  /** Share of requests opening with a shared system prompt. */
  prefixShare: 0.85,
  /** Distinct shared system prompts, drawn Zipf(1). */
  prefixes: 8,
  /** Their lengths: uniform in [min, max] tokens, drawn once per prompt. */
  prefixTokens: { min: 1500, max: 6000 },
};

export function longWorkload(count: number, seed: number): Arrival[] {
  const r = seededRandom(seed * 7727 + 11);
  const s = LONG_SHAPE;
  const { exp, logNormal, uniform } = draws(r);
  const prefixLength = Array.from({ length: s.prefixes }, () => uniform(s.prefixTokens));
  const pickPrefix = zipfSampler(s.prefixes, 1, r);
  const times: number[] = [];
  let t = 0;
  while (times.length < count) {
    t += exp(1 / s.batchesPerS);
    // 1 + geometric(p) extra requests, mean extraPerBatch.
    let n = 1;
    while (r() < s.extraPerBatch / (1 + s.extraPerBatch)) n++;
    for (let k = 0; k < n; k++) times.push(t + r() * s.batchSpreadS);
  }
  times.sort((a, b) => a - b);
  return times.slice(0, count).map((at) => {
    const promptTokens = logNormal(s.prompt);
    const a: Arrival = { at: (at - times[0]!) * 1000, promptTokens, outputTokens: logNormal(s.output) };
    if (r() < s.prefixShare) {
      const id = pickPrefix();
      a.prefix = { id, tokens: Math.min(prefixLength[id]!, promptTokens) };
    }
    return a;
  });
}
