/**
 * The unloads a request sends to make room for its load (Room.claimSlot), told from the other
 * unloads a runtime sends off the calls alone: a trim after a poll is sent for no request, and a
 * request's after-load undo (AdapterManager.undoLoad) unloads the adapter that request itself
 * loaded there just before, which makes room for no load to come.
 */
import type { LoadCall } from './invariants';
import type { UnloadCall } from './trim-check';

/** Whether `c` was sent by a request to make room for its load (not a trim, not an after-load undo). */
export function makesRoom(c: UnloadCall, loads: readonly LoadCall[]): boolean {
  if (c.request === undefined) return false;
  return !loads.some((l) => l.request === c.request && l.url === c.url && l.name === c.name && l.at <= c.at);
}

/**
 * The requests that sent a make-room unload to `url` under way in [from, to]: sent by `to`, not
 * answered before `from`. Each of them is to load into one slot there, which the registry does not
 * show yet: the unload of one for it may run beside a trim, or another request's room-making, each
 * granted on a count that could not see the other's.
 */
export function roomsUnderWay(
  url: string,
  from: number,
  to: number,
  unloads: readonly UnloadCall[],
  loads: readonly LoadCall[],
): Set<number> {
  const requests = new Set<number>();
  for (const c of unloads) {
    if (c.url !== url || c.at > to || (c.endedAt ?? Infinity) < from) continue;
    if (makesRoom(c, loads)) requests.add(c.request!);
  }
  return requests;
}
