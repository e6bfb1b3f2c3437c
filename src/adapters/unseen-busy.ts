/**
 * A poll's reading feeds the unseen hold (ReplicaWord, UNSEEN_HOLD_MS) as the unload's own word
 * does: an adapter the replica reports running or waiting that no lease in this node's view holds
 * there is routed by someone this node cannot see (a node deciding alone), who keeps sending it
 * requests. Fed only by the unload's word, a node whose unloads never read it busy unloaded it
 * under that router's next request (the fault run at 3be912e, +1110.9 s).
 */
import { monotonic, type Clock } from '../clock';
import type { FleetStore } from '../fleet/store';
import type { ReplicaLoad } from '../metrics/replica-load';
import type { ReplicaWord } from './replica-word';

/** When the poll whose reading is judged began: on `clock`'s monotonic time line (`monotonic`). */
export interface PollBegun {
  clock: Clock;
  mono: number;
}

/**
 * Holds every adapter `load` reports busy on `url` that no lease here held when the poll began,
 * nor another runtime's store counts one opened by then (`leasedElsewhere`), unless a request of
 * this node routed there, open when the poll began, ended since (`endedHere`: one that ended while
 * the reading travelled back may be what it saw). A lease taken after the poll began (during this
 * judge's store read, or between the scrape and it) may have come after the replica wrote its
 * reading: it excused a reading an unseen router's request may have made, and once it ended no
 * hold stood (an adversarial read after review 65); so did a request of this node opened then and
 * ended before the judge. A lease counts only if its store says it has been held at least as long
 * as the poll has run, read on this node's monotonic clock once the store answered: no clocks of
 * two machines compared, and the answer's way back counts against the lease (the safe side).
 * Not a resident's `lastUsed` at or past the poll's start: a poll's registry read adopting an
 * adapter the state did not know writes it (dst seed 1965638), and so do a lease given back unused
 * (a guessed lease whose decision went elsewhere), a hit's touch with no lease (a prefetch) and
 * another node's release, stamped by that node's clock (ahead of this one's: a request that ended
 * before the poll began). Each excused what a router this node cannot see ran (review 64).
 * Without `began` no lease excuses anything.
 */
export async function holdUnseenBusy(
  store: FleetStore,
  word: ReplicaWord,
  leasedElsewhere: ((url: string, adapter: string) => boolean) | null,
  url: string,
  load: ReplicaLoad,
  endedHere: ((url: string, adapter: string) => boolean) | null = null,
  began?: PollBegun,
): Promise<void> {
  if (!load.reportsActivity || load.activeAdapters.length === 0) return;
  const residents = new Map((await store.residents(url, began?.clock.now())).map((r) => [r.name, r]));
  const polling = began ? monotonic(began.clock) - began.mono : Infinity;
  for (const name of load.activeAdapters) {
    const r = residents.get(name);
    if (r && r.inFlight > 0 && (r.leasedFor ?? -Infinity) >= polling) continue;
    if (endedHere?.(url, name)) continue;
    if (leasedElsewhere?.(url, name)) continue;
    word.holdUnseen(url, name);
  }
}
