import { LeaseHandle } from '../lease';
import { ReplicaCounts } from '../replica-counts';
import type { FleetRuntime } from '../runtime';

/**
 * Per runtime, per replica: decisions of this process that passed their hold (room-wait.ts
 * `holds`) and have not yet opened their lease (a cold one's placement claim is awaited between).
 */
const joining = new ReplicaCounts();

/** Drops the count of `url` on `rt` (a replica that left); false while a decision joins it. */
export function forgetJoining(rt: FleetRuntime, url: string): boolean {
  return joining.forget(rt, url);
}

/** Whether `rt` keeps a count of `url` here, at 0 or not (dst/replica-records.ts). */
export function joinsOn(rt: FleetRuntime, url: string): boolean {
  return joining.has(rt, url);
}

/** A decision counted already: nothing to end. */
const counted = (): void => undefined;

/**
 * Counts one decision on `url` from the end of its hold until its lease is open; the returned
 * function ends it (once, however often called). A decision onto its own guessed lease's replica
 * (`own`, open there already) is counted by that lease, not twice.
 */
export function joinUnderWay(rt: FleetRuntime, url: string, own?: LeaseHandle): () => void {
  if (own?.lease.url === url) return counted;
  joining.add(rt, url, 1);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    joining.add(rt, url, -1);
  };
}

/**
 * The router's requests in flight on `url` as a class bounded by `max_in_flight` judges it: the
 * view's count (`viewed`: the store's, every node sharing it) plus this process's requests the
 * view cannot show: its decisions past their hold not yet holding a lease, and its leases whose
 * acquire the store answered after the views read began (`viewsMark`: LeaseHandle.viewsMark, taken
 * before it), or not yet. Never less than this process's own (its open leases and those
 * decisions): a view that lost them (an emptied store) still leaves them counted. Requests decided
 * at the same moment in this process each saw the others' leases missing from their views: counted
 * here, from the end of their hold, only one of them joins a replica at the bound (two batch
 * requests decided at once on a replica with one in flight, `max_in_flight: 1`, both went). The
 * higher of the view's and the process's own alone fell short of both (dst seed 176: another
 * node's request in the view and this process's decision joining, `max_in_flight: 2`, and a second
 * batch request went). `own`: the request's own guessed lease (taken before the decision, `redis`
 * only), not counted against it: neither as this process's nor in views read after its acquire was
 * answered (a request held kept it once and judged itself one of the bound's; held, it now gives it
 * back: placement.ts `decided(null)`).
 *
 * `viewedOwn`: of `viewed`, this node's leases (ReplicaView.ownInFlight; undefined: the store does
 * not tell). Told, the count is exact without the marks: the other nodes' in the view, plus every
 * lease this process holds open there (on this runtime or another of the node's on the same state,
 * all counted in `viewedOwn` when the view showed them) and its decisions joining. A lease the store
 * reclaimed by age while its request still ran (sent into a replica that hangs: nothing renews it)
 * is then still counted, on top of the other nodes' (dst seed 3169793: the higher of the two let a
 * third batch request go at `max_in_flight: 2`).
 */
export function inFlightHere(
  rt: FleetRuntime,
  url: string,
  viewed: number,
  own: LeaseHandle | undefined,
  viewsMark = Infinity,
  viewedOwn?: number,
): number {
  const mine = own?.lease.url === url ? own : undefined;
  const joins = joining.get(rt, url);
  if (viewedOwn !== undefined)
    return Math.max(0, viewed - viewedOwn) + LeaseHandle.nodeOpenOn(rt, url) - (mine ? 1 : 0) + joins;
  const local = LeaseHandle.openOn(rt, url) + joins - (mine ? 1 : 0);
  const seen = Math.max(0, viewed - (mine?.answeredBy(viewsMark) ? 1 : 0));
  return Math.max(seen + LeaseHandle.unseenOn(rt, url, viewsMark, mine) + joins, local);
}
