import type { Candidate } from '../types';

/**
 * The candidates `pass` keeps, in order: the same array when it keeps them all, which is what
 * most filters do on most requests (no copy of 64 candidates per filter per decision).
 */
export function keep(candidates: Candidate[], pass: (c: Candidate) => boolean): Candidate[] {
  for (let i = 0; i < candidates.length; i++)
    if (!pass(candidates[i]!)) {
      const kept = candidates.slice(0, i);
      for (let k = i + 1; k < candidates.length; k++) if (pass(candidates[k]!)) kept.push(candidates[k]!);
      return kept;
    }
  return candidates;
}
