/** Lower is better: min-max normalised to [0, 1], 1 for the lowest; all equal scores 1. */
export function lowerIsBetter(values: number[]): number[] {
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const span = max - min;
  return values.map((v) => (span > 0 ? (max - v) / span : 1));
}
