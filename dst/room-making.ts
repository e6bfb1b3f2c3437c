/**
 * The unloads a request sends to make room for its load (Room.claimSlot), told from the other
 * unloads a runtime sends off the calls alone: a trim after a poll is sent for no request, and a
 * request's after-load undo (LoadCalls.undoLoad, src/adapters/load-call.ts) unloads the adapter that request itself
 * loaded there just before, which makes room for no load to come.
 */
import type { LoadCall } from './invariants';
import type { LockLife } from './redis-model';
import type { UnloadCall } from './trim-check';

/**
 * A slot the shared store granted a load (`beginLoad`): its count holds it from the grant until its
 * holder ends it (`finishLoad`) or its lock's TTL passes, whether or not a load call was sent then
 * (not yet, or never: its process died first) or has ended (a failed load, not yet finished).
 */
export interface LoadClaim {
  /** When the store granted it (its script ran), on the scheduler's clock: before its answer reached its sender. */
  at: number;
  url: string;
  name: string;
  /** The plugin-server process's runtime that holds it. */
  sender: string;
  /** When its lock's TTL passes (`at` + the TTL asked for). */
  until: number;
  /** When its holder asked the store to end it (undefined: not yet, or never: its process died). */
  endedAt?: number;
  /** Its lock as the shared store held it, granted and ended (undefined: not known). */
  lock?: LockLife;
}

/**
 * Whether the store held `lock` when it ran the script `seq`: granted before, not ended before.
 * By the scripts' order, not their times: the store's count changes at its scripts, which a
 * holder's call reaches a trip after it was sent (seed 501915: a failed load's end sent at 3,097
 * ms ran at 3,099 ms, after another node's make-room unload, which the store judged full).
 */
export const heldAt = (lock: LockLife, seq: number): boolean =>
  lock.seq < seq && (lock.endSeq ?? Infinity) > seq;

/**
 * The adapters whose load slot on `url` the store held at `from` (granted by then and by `to`, not
 * ended nor past its TTL before `from`): one each, however many claims. With `seq` (the script
 * that granted the unload judged), a claim whose lock is known is held if the store held that lock
 * then.
 */
export function claimedAt(
  url: string,
  from: number,
  to: number,
  claims: readonly LoadClaim[],
  seq?: number,
): string[] {
  const held = claims.filter(
    (c) =>
      c.url === url &&
      (seq !== undefined && c.lock
        ? heldAt(c.lock, seq)
        : c.at <= Math.min(from, to) && Math.min(c.endedAt ?? Infinity, c.until) >= from),
  );
  return [...new Set(held.map((c) => c.name))];
}

/** What the room-making reads of the calls (CallSource's fields). */
export interface RoomCalls {
  loads: readonly LoadCall[];
  /** The load slots the shared store granted (undefined: none known). */
  claims?: readonly LoadClaim[];
  unloads?: readonly UnloadCall[];
  /** When a request's decision ended (its route answered or threw; undefined: not yet). */
  decidedAt?: (request: number) => number | undefined;
}

/** Whether `c` was sent by a request to make room for its load (not a trim, not an after-load undo). */
export function makesRoom(c: UnloadCall, loads: readonly LoadCall[]): boolean {
  // A prefetch's unload of another adapter than the one it loads: a victim's, room for its load.
  if (c.prefetch) return c.for !== undefined && c.name !== c.for;
  if (c.request === undefined) return false;
  return !loads.some((l) => l.request === c.request && l.url === c.url && l.name === c.name && l.at <= c.at);
}

/** When the store granted the call (its lock), else when it was sent: from then it counted as under way. */
export const grantedAt = (c: UnloadCall): number => c.grantedAt ?? c.at;

/** The slot a make-room unload is for: its request's adapter (else the request alone, when not known). */
export const roomFor = (c: UnloadCall): string => c.for ?? `request ${c.request}`;

/** Who made room: a request, or a prefetch (the room-check's words). */
export const roomMaker = (c: UnloadCall): string => (c.prefetch ? 'a prefetch' : `request ${c.request}`);

/**
 * The adapters requests are making room for on `url` while an unload granted at `from` and
 * answered by the replica at `to` was under way, less `occupied` (adapters whose load there is
 * counted already): each is to load into one slot there that the registry does not show yet. One
 * slot per adapter, not per request: two requests for x each granted an unload (the store's "one
 * unload per load" broken) fill one slot with x's one load. A request counts whose make-room
 * unload was granted by `to` and either still under way at `from` (each granted on a count that
 * could not see the other's end), or ended before it while the request, at `from`, had sent no
 * load there and was still deciding (it rechecks its placement, or spends its budget, before its
 * load). A request that sent its load there is counted by its load (one sent before its unload was an earlier try's: seed 414447, a
 * request back on the replica its first load left); one that decided (placed
 * elsewhere on its recheck, refused by the budget, its process dead) left its room unused, by
 * design (`Room.claimSlot`): the store's count shows that slot free once another load takes the room or
 * its TTL passes (until then `roomsKept` counts it at a grant, as the store does).
 */
export function roomsMaking(
  url: string,
  from: number,
  to: number,
  calls: RoomCalls,
  occupied: ReadonlySet<string> = new Set(),
  seq?: number,
): Set<string> {
  const rooms = new Set<string>();
  for (const c of calls.unloads ?? []) {
    if (c.url !== url || grantedAt(c) > to || !makesRoom(c, calls.loads)) continue;
    const room = roomFor(c);
    if (rooms.has(room) || occupied.has(room)) continue;
    // Its lock still held by the store at the grant (`seq`): it counted the adapter there as
    // unloading, its slot to come for this room, even if its sender has died since (the lock lasts
    // until the node is found silent or its TTL passes: seed 640336).
    if (seq !== undefined && c.lock && heldAt(c.lock, seq)) {
      rooms.add(room);
      continue;
    }
    if ((c.endedAt ?? Infinity) >= from) {
      rooms.add(room);
      continue;
    }
    // A prefetch's: its load from the same process, and the end of its load's ensure.
    const mine = (l: LoadCall) =>
      c.prefetch ? l.prefetch === true && l.proc === c.proc && l.name === c.for : l.request === c.request;
    const loaded = calls.loads.some((l) => mine(l) && l.url === url && l.at >= c.at && l.at <= from);
    const decided = c.prefetch ? c.prefetchEnsure?.endedAt : calls.decidedAt?.(c.request!);
    if (!loaded && !((decided ?? Infinity) <= from)) rooms.add(room);
  }
  return rooms;
}

/**
 * The adapters on `url` whose room a make-room unload made and the store still kept when it ran
 * the grant `seq` (at `at`), less `occupied`: made by that unload's end before the grant, not past
 * its TTL, its adapter's load not begun by then (a load claim for it takes the room). The store
 * counts such a room against another adapter's make-room unload whether or not the request that made
 * it still comes (refused by the budget, placed elsewhere): the adapter's next request loads into it
 * (docs/reliability.md, a room still free is kept for its adapter until its load begins or its TTL;
 * seed 160064: chat's room, its request refused by the budget 2 ms before fin's grant, another
 * request for chat placed there the script before).
 */
export function roomsKept(
  url: string,
  seq: number,
  at: number,
  calls: RoomCalls,
  occupied: ReadonlySet<string> = new Set(),
): Set<string> {
  const kept = new Set<string>();
  for (const c of calls.unloads ?? []) {
    const made = c.lock;
    if (c.url !== url || c.for === undefined || made?.roomUntil === undefined || made.endSeq === undefined)
      continue;
    if (made.endSeq >= seq || made.roomUntil <= at || occupied.has(c.for)) continue;
    const taken = (calls.claims ?? []).some(
      (l) =>
        l.url === url &&
        l.name === c.for &&
        l.lock !== undefined &&
        l.lock.seq > made.endSeq! &&
        l.lock.seq < seq,
    );
    if (!taken) kept.add(c.for);
  }
  return kept;
}
