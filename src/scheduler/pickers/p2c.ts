import type { Picker } from '../types';

/**
 * Power of two choices: two distinct candidates at random, the better score wins. Near
 * max-score quality without herding every router instance onto the same replica between polls.
 */
export const powerOfTwo: Picker = {
  name: 'p2c',
  pick(scored, ctx) {
    if (scored.length === 1) return scored[0]!;
    const i = Math.floor(ctx.random() * scored.length);
    let j = Math.floor(ctx.random() * (scored.length - 1));
    if (j >= i) j++;
    const a = scored[i]!;
    const b = scored[j]!;
    return b.score > a.score ? b : a;
  },
};
