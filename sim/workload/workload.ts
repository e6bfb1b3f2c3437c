import { readFileSync } from 'node:fs';
import { seededRandom, type Random } from '../../src/random';

/** One request of a workload: when it arrives (ms from the start) and its token counts. */
export interface Arrival {
  at: number;
  promptTokens: number;
  outputTokens: number;
  /** A system prompt shared with other requests: which one, and its tokens (part of `promptTokens`). */
  prefix?: { id: number; tokens: number };
  /**
   * A later turn of a conversation: its earlier messages (user, assistant, user, ...), their
   * tokens each, after the system prompt and before the new user message (part of `promptTokens`).
   */
  history?: { conversation: number; turns: number[] };
}

/**
 * Reads a CSV in the Azure LLM inference trace's format (TIMESTAMP, ContextTokens,
 * GeneratedTokens); times become ms from the first request.
 */
export function readTrace(path: string): Arrival[] {
  const lines = readFileSync(path, 'utf8').split(/\r?\n/);
  const header = (lines[0] ?? '').split(',').map((h) => h.trim());
  const iT = header.indexOf('TIMESTAMP');
  const iP = header.indexOf('ContextTokens');
  const iO = header.indexOf('GeneratedTokens');
  if (iT < 0 || iP < 0 || iO < 0)
    throw new Error(`${path}: expected columns TIMESTAMP, ContextTokens, GeneratedTokens`);
  const out: Arrival[] = [];
  let t0: number | undefined;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (!line.trim()) continue;
    const f = line.split(',');
    // "2023-11-16 18:15:46.6805900": seven fractional digits; Date takes three.
    const ts =
      f[iT]!.trim()
        .replace(' ', 'T')
        .replace(/(\.\d{3})\d*$/, '$1') + 'Z';
    const t = Date.parse(ts);
    const p = Number(f[iP]);
    const o = Number(f[iO]);
    if (!Number.isFinite(t) || !Number.isFinite(p) || !Number.isFinite(o))
      throw new Error(`${path}:${i + 1}: cannot read "${line}"`);
    t0 ??= t;
    out.push({ at: t - t0, promptTokens: Math.max(1, p), outputTokens: Math.max(1, o) });
  }
  return out.sort((a, b) => a.at - b.at);
}

/**
 * Distributions fitted to the Azure 2023 conversation trace (19,366 requests over 58 min):
 * 5.53 req/s with inter-arrival CV 1.09 (gamma, shape 1/CV^2), prompt and output tokens
 * log-normal. The trace itself is not shipped; these numbers stand in for it.
 */
export const AZURE_CONVERSATION_FIT = {
  ratePerS: 5.53,
  interArrivalCv: 1.094,
  prompt: { mu: 6.633, sigma: 0.985, max: 14050 },
  output: { mu: 5.019, sigma: 0.859, max: 1000 },
};

export function syntheticWorkload(
  count: number,
  seed: number,
  ratePerS = AZURE_CONVERSATION_FIT.ratePerS,
): Arrival[] {
  const r = seededRandom(seed);
  const f = AZURE_CONVERSATION_FIT;
  const shape = 1 / (f.interArrivalCv * f.interArrivalCv);
  const meanGapMs = 1000 / ratePerS;
  const out: Arrival[] = [];
  let t = 0;
  for (let i = 0; i < count; i++) {
    out.push({
      at: t,
      promptTokens: Math.min(
        f.prompt.max,
        Math.max(1, Math.round(Math.exp(f.prompt.mu + f.prompt.sigma * normal(r)))),
      ),
      outputTokens: Math.min(
        f.output.max,
        Math.max(1, Math.round(Math.exp(f.output.mu + f.output.sigma * normal(r)))),
      ),
    });
    t += gamma(r, shape) * (meanGapMs / shape);
  }
  return out;
}

/** Rescales arrival times so the workload runs at `ratePerS` on average. */
export function atRate(arrivals: Arrival[], ratePerS: number): Arrival[] {
  if (arrivals.length < 2) return arrivals;
  const span = arrivals[arrivals.length - 1]!.at - arrivals[0]!.at;
  const current = ((arrivals.length - 1) / span) * 1000;
  const k = current / ratePerS;
  return arrivals.map((a) => ({ ...a, at: (a.at - arrivals[0]!.at) * k }));
}

/** Draws over `r` the generators share: exponential by its mean, log-normal rounded into [min, max], uniform in [min, max] rounded. */
export function draws(r: Random) {
  return {
    exp: (mean: number) => -Math.log(1 - r()) * mean,
    logNormal: (d: { mu: number; sigma: number; min: number; max: number }) =>
      Math.min(d.max, Math.max(d.min, Math.round(Math.exp(d.mu + d.sigma * normal(r))))),
    uniform: (d: { min: number; max: number }) => Math.round(d.min + r() * (d.max - d.min)),
  };
}

export function normal(r: Random): number {
  const u = 1 - r();
  const v = r();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/** Marsaglia-Tsang gamma(shape, 1) sampler (with the shape < 1 boost). */
function gamma(r: Random, shape: number): number {
  if (shape < 1) return gamma(r, shape + 1) * Math.pow(r(), 1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = normal(r);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = r();
    if (u < 1 - 0.0331 * x ** 4 || Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}
