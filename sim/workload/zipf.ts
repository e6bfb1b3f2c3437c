import type { Random } from '../../src/random';

/** Draws ranks 0..n-1 with P(k) proportional to 1/(k+1)^alpha (alpha 0 = uniform). */
export function zipfSampler(n: number, alpha: number, random: Random): () => number {
  const cdf = new Float64Array(n);
  let total = 0;
  for (let k = 0; k < n; k++) {
    total += 1 / Math.pow(k + 1, alpha);
    cdf[k] = total;
  }
  for (let k = 0; k < n; k++) cdf[k]! /= total;
  return () => {
    const u = random();
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}
