import type { Picker } from '../types';

/** The highest score; ties broken at random (seeded), so equal replicas share the load. */
export const maxScore: Picker = {
  name: 'max-score',
  pick(scored, ctx) {
    let best = -Infinity;
    for (const s of scored) if (s.score > best) best = s.score;
    const top = scored.filter((s) => s.score === best);
    return top[Math.floor(ctx.random() * top.length)]!;
  },
};
