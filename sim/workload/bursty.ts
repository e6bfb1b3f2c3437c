import { seededRandom } from '../../src/random';
import { percentile } from './percentile';
import { normal, type Arrival } from './workload';

/**
 * The shape of bursty, prefill-heavy production traffic (short answers to long prompts, as in
 * issue 15's trace): almost every request arrives inside a burst, at `peakRate` times the mean
 * rate for an exponentially distributed while (mean `burstS`), and bursts are far apart, which
 * gives an inter-arrival coefficient of variation around 10-15 (the conversation trace: 1.1).
 * A thin Poisson background keeps the quiet stretches from being empty.
 */
const BURSTY_SHAPE = {
  /** Mean request rate (req/s); the benchmark rescales to its target load anyway. */
  ratePerS: 1,
  /** Arrival rate inside a burst, as a multiple of the mean rate. */
  peakRate: 25,
  /** Mean burst length (s). */
  burstS: 3,
  /** Share of requests outside bursts. */
  background: 0.002,
  /** Prompt tokens: log-normal clamped to [min, max]; mean about 2k. */
  prompt: { mu: 7.43, sigma: 0.6, min: 1000, max: 8000 },
  /** Answer tokens: log-normal clamped to [min, max]; mean about 30. */
  output: { mu: 3.38, sigma: 0.45, min: 5, max: 50 },
};

export function burstyWorkload(count: number, seed: number): Arrival[] {
  const r = seededRandom(seed * 104729 + 3);
  const s = BURSTY_SHAPE;
  const exp = (mean: number) => -Math.log(1 - r()) * mean;
  const peak = s.peakRate * s.ratePerS;
  // Bursts start at the rate that puts (1 - background) of the mean rate inside them.
  const burstStarts = ((1 - s.background) * s.ratePerS) / (peak * s.burstS);
  const quiet = s.background * s.ratePerS;
  const times: number[] = [];
  let t = 0;
  while (times.length < count) {
    t += exp(1 / (burstStarts + quiet));
    if (r() < quiet / (burstStarts + quiet)) {
      times.push(t);
      continue;
    }
    const end = t + exp(s.burstS);
    for (let u = t + exp(1 / peak); u < end; u += exp(1 / peak)) times.push(u);
  }
  times.sort((a, b) => a - b);
  const tokens = (d: { mu: number; sigma: number; min: number; max: number }) =>
    Math.min(d.max, Math.max(d.min, Math.round(Math.exp(d.mu + d.sigma * normal(r)))));
  return times.slice(0, count).map((at) => ({
    at: (at - times[0]!) * 1000,
    promptTokens: tokens(s.prompt),
    outputTokens: tokens(s.output),
  }));
}

/** Inter-arrival CV and the busiest seconds' rate over the mean (p90 of non-empty seconds). */
export function arrivalShape(arrivals: readonly Arrival[]): { cv: number; peak: number } {
  const gaps = arrivals.slice(1).map((a, i) => a.at - arrivals[i]!.at);
  const mean = gaps.reduce((n, g) => n + g, 0) / gaps.length;
  const sd = Math.sqrt(gaps.reduce((n, g) => n + (g - mean) ** 2, 0) / gaps.length);
  const perSecond = new Map<number, number>();
  for (const a of arrivals)
    perSecond.set(Math.floor(a.at / 1000), (perSecond.get(Math.floor(a.at / 1000)) ?? 0) + 1);
  const meanPerS = 1000 / mean;
  return { cv: sd / mean, peak: percentile([...perSecond.values()], 0.9) / meanPerS };
}
