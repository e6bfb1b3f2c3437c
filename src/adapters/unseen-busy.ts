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
 * Holds every adapter `load` reports busy on `url` that no lease here holds, nor another
 * runtime's store counts (`leasedElsewhere`), unless a request of this node routed there ended
 * since the poll began (`endedHere`: one that ended while the reading travelled back may be what
 * it saw). Not a resident's `lastUsed` at or past the poll's start: a poll's registry read adopting
 * an adapter the state did not know writes it (dst seed 1965638), and so do a lease given back
 * unused (a guessed lease whose decision went elsewhere), a hit's touch with no lease (a prefetch)
 * and another node's release, stamped by that node's clock (ahead of this one's: a request that
 * ended before the poll began). Each excused what a router this node cannot see ran (review 64).
 */
export async function holdUnseenBusy(
  store: FleetStore,
  word: ReplicaWord,
  leasedElsewhere: ((url: string, adapter: string) => boolean) | null,
  url: string,
  load: ReplicaLoad,
  endedHere: ((url: string, adapter: string) => boolean) | null = null,
): Promise<void> {
  if (!load.reportsActivity || load.activeAdapters.length === 0) return;
  const residents = new Map((await store.residents(url)).map((r) => [r.name, r]));
  for (const name of load.activeAdapters) {
    if ((residents.get(name)?.inFlight ?? 0) > 0) continue;
    if (endedHere?.(url, name)) continue;
    if (leasedElsewhere?.(url, name)) continue;
    word.holdUnseen(url, name);
  }
}
