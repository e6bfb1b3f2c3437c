/**
 * A poll's reading feeds the unseen hold (ReplicaWord, UNSEEN_HOLD_MS) as the unload's own word
 * does: an adapter the replica reports running or waiting that no lease in this node's view holds
 * there is routed by someone this node cannot see (a node deciding alone), who keeps sending it
 * requests. Fed only by the unload's word, a node whose unloads never read it busy unloaded it
 * under that router's next request (the fault run at 3be912e, +1110.9 s).
 */
import type { FleetStore } from '../fleet/store';
import type { ReplicaLoad } from '../metrics/replica-load';
import type { ReplicaWord } from './replica-word';

/**
 * Holds every adapter `load` (read by a poll that started at `startedAt`) reports busy on `url`
 * that no lease here holds, nor held since the poll started (one released while the reading
 * travelled back may be what it saw), nor another runtime's store counts (`leasedElsewhere`).
 * A lease's release moves its resident's `lastUsed` past its `since`; a poll's registry read
 * adopting an adapter the state did not know (emptied) writes both at the snapshot's time, which
 * is no lease: read as one, the poll that adopted it held nothing (dst seed 1965638).
 */
export async function holdUnseenBusy(
  store: FleetStore,
  word: ReplicaWord,
  leasedElsewhere: ((url: string, adapter: string) => boolean) | null,
  url: string,
  load: ReplicaLoad,
  startedAt: number,
): Promise<void> {
  if (!load.reportsActivity || load.activeAdapters.length === 0) return;
  const residents = new Map((await store.residents(url)).map((r) => [r.name, r]));
  for (const name of load.activeAdapters) {
    const r = residents.get(name);
    if (r && (r.inFlight > 0 || (r.lastUsed >= startedAt && r.lastUsed > r.since))) continue;
    if (leasedElsewhere?.(url, name)) continue;
    word.holdUnseen(url, name);
  }
}
