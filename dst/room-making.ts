/**
 * The unloads a request sends to make room for its load (Room.claimSlot), told from the other
 * unloads a runtime sends off the calls alone: a trim after a poll is sent for no request, and a
 * request's after-load undo (AdapterManager.undoLoad) unloads the adapter that request itself
 * loaded there just before, which makes room for no load to come.
 */
import type { LoadCall } from './invariants';
import type { UnloadCall } from './trim-check';

/** What the room-making reads of the calls (CallSource's fields). */
export interface RoomCalls {
  loads: readonly LoadCall[];
  unloads?: readonly UnloadCall[];
  /** When a request's decision ended (its route answered or threw; undefined: not yet). */
  decidedAt?: (request: number) => number | undefined;
}

/** Whether `c` was sent by a request to make room for its load (not a trim, not an after-load undo). */
export function makesRoom(c: UnloadCall, loads: readonly LoadCall[]): boolean {
  if (c.request === undefined) return false;
  return !loads.some((l) => l.request === c.request && l.url === c.url && l.name === c.name && l.at <= c.at);
}

/** When the store granted the call (its lock), else when it was sent: from then it counted as under way. */
export const grantedAt = (c: UnloadCall): number => c.grantedAt ?? c.at;

/**
 * The requests making room on `url` while an unload granted at `from` and answered by the
 * replica at `to` was under way: each is to load into one slot there that the registry does not
 * show yet. One whose make-room unload was granted by `to` and either still under way at `from`
 * (each granted on a count that could not see the other's end), or ended before it while the
 * request, at `from`, had sent no load there since and was still deciding (it rechecks its
 * placement, or spends its budget, before its load). A request that sent its load there is counted
 * by its load (one sent before its unload was an earlier try's: seed 414447, a request back on the
 * replica its first load left); one that decided (placed elsewhere on its recheck, refused by the
 * budget) left its room unused, by design (`Room.claimSlot`), and the store's count shows that
 * slot free.
 */
export function roomsMaking(url: string, from: number, to: number, calls: RoomCalls): Set<number> {
  const requests = new Set<number>();
  for (const c of calls.unloads ?? []) {
    if (c.url !== url || grantedAt(c) > to || !makesRoom(c, calls.loads)) continue;
    const r = c.request!;
    if (requests.has(r)) continue;
    if ((c.endedAt ?? Infinity) >= from) {
      requests.add(r);
      continue;
    }
    const loaded = calls.loads.some((l) => l.request === r && l.url === url && l.at >= c.at && l.at <= from);
    if (!loaded && !((calls.decidedAt?.(r) ?? Infinity) <= from)) requests.add(r);
  }
  return requests;
}
