/**
 * Views never routed on blind: a replica with no fresh snapshot and no recent poll attempt is
 * polled before the decision, within `refresh_timeout_ms`. Apart from the service (router.ts)
 * because it is the one wait before placement that depends on the poller, not the decision.
 */
import { sleep } from '../clock';
import type { RouterConfig } from '../config/router-schema';
import type { AdapterRef, ReplicaSpec, ReplicaView } from '../fleet/types';
import type { FleetRuntime } from '../runtime';

/** Whether `views` holds a replica to poll before the decision (`refreshIfStale`): checked without a call that awaits. */
export function needsRefresh(config: RouterConfig, now: number, views: readonly ReplicaView[]): boolean {
  for (let i = 0; i < views.length; i++) if (unseen(views[i]!, now, config.stale_after_ms)) return true;
  return false;
}

/** No fresh snapshot and no recent poll attempt. */
function unseen(v: ReplicaView, now: number, staleAfterMs: number): boolean {
  return stale(v.snapshotAt, now, staleAfterMs) && stale(v.checkedAt, now, staleAfterMs);
}

function stale(t: number | null, now: number, staleAfterMs: number): boolean {
  return t === null || now - t > staleAfterMs;
}

/**
 * A replica with no fresh snapshot and no recent poll attempt (no poller in this process
 * yet, or it just started): poll it now rather than route blind. Single flight per replica
 * in the poller; bounded by `refresh_timeout_ms`.
 */
export async function refreshIfStale(
  fleet: { config: RouterConfig; specs: readonly ReplicaSpec[]; urls: string[] },
  rt: FleetRuntime,
  views: ReplicaView[],
  adapter: AdapterRef | undefined,
  withResidents: boolean,
): Promise<ReplicaView[]> {
  const now = rt.clock.now();
  const need = views.filter((v) => unseen(v, now, fleet.config.stale_after_ms));
  if (need.length === 0) return views;
  const specs = need.map((v) => fleet.specs.find((s) => s.url === v.url)!);
  await Promise.race([
    Promise.all(specs.map((s) => rt.poller.refresh(s))),
    sleep(rt.clock, fleet.config.refresh_timeout_ms),
  ]);
  return rt.store.views(fleet.urls, adapter, withResidents);
}
