/**
 * "A request makes room for its load and no more" (docs/reliability.md "Decisions shared between
 * nodes"), read off
 * the replicas' own logs: every unload a request sends to make room for its load (Room.claimSlot,
 * not its after-load undo) leaves the replica's registry, plus the loads under way there, plus one
 * slot for each adapter requests are making room for there whose load is not under way yet
 * (its own included: `roomsMaking`; two requests for one adapter fill one slot), at or above
 * `max_loaded_adapters`. Before 8196ff3, on a replica over its limit (a, b, c at 2), b unloaded for
 * x left 2 of 2; a trim unloading c still counted as occupying, so the store granted a second
 * unload for x (a): three unloads where two were needed, a slot left empty.
 *
 * Judged when the replica answers the unload, so a room the request then leaves unused (placed
 * elsewhere on its recheck, refused by the budget, its access phase over) is no break: by design,
 * the slot stays free for the next load. Excused: an unload sent by a node deciding alone, or judged
 * while a fault is under way or after one began or healed since it was granted, or after a node
 * deciding alone unloaded there within `staleMs` before its grant, or after the shared state was
 * emptied since its grant, or restored from an older copy or moved by a record change within
 * `staleMs` before it, or granted after a restart of the replica forgot adapters loaded there and
 * before a registry read answered (the store's count may then be above the registry). Loads the store
 * counted and rooms it kept at the grant are read in the order it ran its scripts (the locks' lives
 * the model records), not by when the calls were sent: a failed load's end sent before a grant can
 * run after it (seed 501915), and a dead process's unload lock lasts until the node is found silent
 * (seed 640336). Narrower than the trim's
 * excuses, which excused every break the reverted fix made in seeds 1-20000 (2767, 5273, 9117): a
 * node deciding alone elsewhere begins no unload and its loads only add; an emptied state brings
 * back no lock.
 */
import { claimedAt, grantedAt, makesRoom, roomFor, roomMaker, roomsKept, roomsMaking } from './room-making';
import { callAnswered, type NeedScope, type SentCalls, type UnloadAnswer } from './trim-check';

/** Why the make-room unload answered as `e` made more room than its request's load takes (undefined: it did not). */
export function roomOverMade(
  e: UnloadAnswer,
  max: number,
  calls: SentCalls,
  w: NeedScope,
  staleMs = 0,
): string | undefined {
  if (e.loaded >= max - 1) return undefined;
  const unloads = calls.unloads ?? [];
  const call = callAnswered(e, unloads);
  if (!call || !makesRoom(call, calls.loads)) return undefined;
  const from = grantedAt(call);
  if (call.alone || (w.faultOpen ?? w.degraded) || w.lastFaultAt >= from) return undefined;
  // A node deciding alone unloads there with no word to the shared store (its after-load undo):
  // the store's count stays above the registry until a poll. Elsewhere it changes nothing here:
  // it begins no unload (the degradable store refuses one), and its loads only add.
  if (unloads.some((c) => c.alone && c.url === e.url && c.at <= e.at && c.at >= from - staleMs))
    return undefined;
  const at = (r: number | { from: number; to: number }) => (typeof r === 'number' ? r : r.to);
  // The shared state emptied since the grant; or, within a lock's TTL before, brought back from an
  // older copy (a lock of a load that ended counts a slot no load fills: seed 835's kind).
  if (w.resets.some((r) => at(r) >= from)) return undefined;
  if ((w.restores ?? w.resets).some((r) => at(r) >= from - staleMs)) return undefined;
  // The replica restarted, forgetting adapters, and no registry read had answered since by the
  // grant: the store still counted them there (seed 441699: `a` lost in a restart, counted beside
  // bio, so a request for sql was granted bio's unload, leaving the replica empty).
  if ((w.registryLost ?? []).some((l) => l.url === e.url && l.at <= from && l.readAt > from))
    return undefined;
  // Loads under way there from its grant on: the store counted them, and they fill slots as they land.
  const under = calls.loads.filter(
    (c) => c.url === e.url && c.at <= e.at && !((c.endedAt ?? Infinity) < from),
  );
  const occupied = new Set(under.map((c) => c.name));
  // Slots the store granted loads there and still counted at the grant, their call not sent yet,
  // never sent (its process died: the lock lasts its TTL, seed 494165), or failed and not yet
  // ended: the store counts a load from its claim until it runs the end, which may come after a
  // grant though its holder sent it before (seeds 500849, 501915). By the order the store ran its
  // scripts in, where the locks are known (`heldAt`; dst/redis-model.ts `LockLife`), else by time.
  const seq = call.lock?.seq;
  const claimed = claimedAt(e.url, from, e.at, calls.claims ?? [], seq).filter((n) => !occupied.has(n));
  for (const n of claimed) occupied.add(n);
  const loading = under.length + claimed.length;
  // One slot per adapter being made room for (itself included), less those whose load is under
  // way there, counted above: a second request for x unloading for x's one load makes no room.
  const rooms = roomsMaking(e.url, from, e.at, calls, occupied, seq);
  if (!occupied.has(roomFor(call))) rooms.add(roomFor(call));
  // Rooms the store still kept at the grant for adapters whose request has decided since (by the
  // order it ran its scripts): it counts each as a slot taken, by design.
  if (seq !== undefined) for (const r of roomsKept(e.url, seq, from, calls, occupied)) rooms.add(r);
  if (e.loaded + loading + rooms.size >= max) return undefined;
  return (
    `${e.name} unloaded from ${e.url} for ${roomMaker(call)}${call.for ? ` (${call.for})` : ''} (granted at ${Math.round(from)} ms) ` +
    `left ${e.loaded} loaded, ${loading} loading and ${rooms.size} adapter(s) being made room for (limit ${max})`
  );
}
