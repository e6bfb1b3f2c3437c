/** Lower is better: min-max normalised to [0, 1], 1 for the lowest; all equal scores 1. */
export function lowerIsBetter(values: number[]): number[] {
  return lowerIsBetterBy(values, (v) => v);
}

/**
 * `lowerIsBetter` of `of(item)` for each item, without the array of values between: a scorer
 * reads one figure per candidate per decision, and that array was one more per scorer.
 */
export function lowerIsBetterBy<T>(items: readonly T[], of: (item: T) => number): number[] {
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < items.length; i++) {
    const v = of(items[i]!);
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const span = max - min;
  return items.map((x) => (span > 0 ? (max - of(x)) / span : 1));
}
