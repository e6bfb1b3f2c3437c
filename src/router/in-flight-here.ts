import { LeaseHandle } from '../lease';
import { ReplicaCounts } from '../replica-counts';
import type { FleetRuntime } from '../runtime';

/**
 * Per runtime, per replica: decisions of this process that passed their hold (room-wait.ts
 * `holds`) and have not yet opened their lease (a cold one's placement claim is awaited between).
 */
const joining = new ReplicaCounts();

/**
 * Counts one decision on `url` from the end of its hold until its lease is open; the returned
 * function ends it (once, however often called).
 */
export function joinUnderWay(rt: FleetRuntime, url: string): () => void {
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
 * view's count (`viewed`: the store's, every node sharing it), or this process's own when higher.
 * The views are read before the decision, so requests decided at the same moment in this process
 * each saw the others' leases missing from them: counted here, from the end of their hold, only
 * one of them joins a replica at the bound (two batch requests decided at once on a replica with
 * one in flight, `max_in_flight: 1`, both went). `ownLease`: the request's own guessed lease is
 * open on `url` (taken before the decision, `redis` only): not counted against it.
 */
export function inFlightHere(rt: FleetRuntime, url: string, viewed: number, ownLease: boolean): number {
  const local = LeaseHandle.openOn(rt, url) + joining.get(rt, url) - (ownLease ? 1 : 0);
  return Math.max(viewed, local);
}
