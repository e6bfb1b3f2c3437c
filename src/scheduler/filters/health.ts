import type { Candidate, Filter } from '../types';
import { keep } from './keep';

/**
 * Drops replicas that are down; keeps stale ones (figures unknown) only when no fresh one
 * is left. Fails open: never returns an empty set for a non-empty input, since routing
 * somewhere beats refusing everything when every health signal is wrong at once.
 */
export const health: Filter = {
  name: 'health',
  filter(_req, candidates) {
    const alive = keep(candidates, notDown);
    const fresh = keep(alive, notStale);
    if (fresh.length > 0) return { kept: fresh };
    if (alive.length > 0) return { kept: alive };
    return { kept: candidates };
  },
};

const notDown = (c: Candidate) => c.health !== 'down';
const notStale = (c: Candidate) => !c.stale;
