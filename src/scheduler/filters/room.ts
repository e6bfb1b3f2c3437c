import type { Filter } from '../types';
import { loadCost } from '../victims';

/**
 * When the adapter must be loaded where it is not held, keep the replicas that can start the
 * load now: holders, a free slot, or an idle adapter to unload. A replica whose every adapter
 * is busy would make the request wait for one to go idle (and 503 after queue_timeout_ms).
 * Fails open: if none can, all stay and the wait is the only way.
 */
export const room: Filter = {
  name: 'room',
  filter(req, candidates, ctx) {
    if (req.kind !== 'on-demand' || candidates.every((c) => c.holder)) return { kept: candidates };
    const kept = candidates.filter((c) => loadCost(c, ctx) !== undefined);
    return { kept: kept.length > 0 ? kept : candidates };
  },
};
