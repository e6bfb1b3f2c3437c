import type { ReplicaView } from '../fleet/types';
import type { FleetRuntime } from '../runtime';

/**
 * `views` (read from `rt`'s store) with each replica's health as the runtime polling now last saw
 * it. A runtime replaced by a `redis` record change polls no more (polling passed to its
 * successor, whose polls go to its own store), so its store's health goes stale while its
 * decisions still run there (seed 100526: one went to a replica the successor had polled down
 * 1.8 s before). Only health is taken: the lease, residency and placements of a decision stay its
 * runtime's. A replica the successor has not polled yet, or polled less recently, keeps its own.
 */
export async function withPolledHealth(rt: FleetRuntime, views: ReplicaView[]): Promise<ReplicaView[]> {
  const polling = rt.current();
  if (polling === rt || views.length === 0) return views;
  const polled = await polling.store.views(
    views.map((v) => v.url),
    undefined,
    false,
  );
  for (const v of views) {
    const p = polled.find((x) => x.url === v.url);
    if (p && p.checkedAt !== null && (v.checkedAt === null || p.checkedAt >= v.checkedAt))
      v.health = p.health;
  }
  return views;
}
