import type { ReplicaView } from '../../fleet/types';
import type { Filter, LoadBackoffView } from '../types';
import { keep } from './keep';

/**
 * Replicas where the adapter would need a load that is backing off after a failure
 * (src/adapters/backoff.ts) are dropped while another candidate can take the request without one:
 * a holder (saturated or not) or a replica whose load is not held off. Only when every candidate
 * would need such a load do they stay, those whose backoff ends soonest: the load there is
 * refused (503 `adapter_load_backoff`) with the soonest Retry-After. Before the affinity rule, so
 * its holder / free-slot / all steps choose among replicas that can serve. One lookup per
 * decision while nothing backs off for the adapter (the common case); on-demand adapters only.
 */
export const loadBackoff: Filter = {
  name: 'load-backoff',
  filter(req, candidates, ctx) {
    const held = ctx.loadBackoff;
    const name = req.adapter?.name;
    if (req.kind !== 'on-demand' || !held || name === undefined || !held.anyHeld(name, ctx.now))
      return { kept: candidates };
    const now = ctx.now;
    const free = keep(candidates, (c) => !heldOffThere(c, name, held, now));
    if (free.length > 0) return { kept: free };
    let soonest = Infinity;
    for (let i = 0; i < candidates.length; i++) {
      const until = held.heldUntil(name, candidates[i]!.url);
      if (until < soonest) soonest = until;
    }
    return { kept: keep(candidates, (c) => held.heldUntil(name, c.url) <= soonest) };
  },
};

/** Whether a request for `name` sent to `v` at `now` would make a load there that is held off (the filter's test, and placement's). */
export function heldOffThere(
  v: Pick<ReplicaView, 'adapter' | 'url'>,
  name: string,
  held: LoadBackoffView,
  now: number,
): boolean {
  return needsLoad(v) && held.heldUntil(name, v.url) > now;
}

/**
 * A request sent there makes a load of its own: the adapter absent or going, or there only by a
 * placement nobody is loading yet (another router's, `placed`; this process's, `claimed`). Not
 * where it is resident or another process is loading it (the request waits for that load).
 */
export function needsLoad(v: Pick<ReplicaView, 'adapter'>): boolean {
  const a = v.adapter;
  return a === undefined || a.state === 'unloading' || a.placed === true || a.claimed === true;
}
