/**
 * "A class bounded by `max_in_flight` joins a replica at its bound only after its wait"
 * (docs/configuration.md `slo_classes[].max_in_flight`, docs/routing.md; src/router/room-wait.ts
 * `holdsNow`, src/router/in-flight-here.ts), judged from the world, never from the router's
 * counters: a request of a class bounded at N, decided onto a replica (its hold over) less than
 * half its objective after it came (on its node's clock, as the router measures it; a class that
 * ages: before its wait and the start its decision predicted reached half its objective), and sent
 * there, found fewer than N of the router's requests in flight there when decided. In flight: sent
 * and not yet answered by the replica (on their way, or running or queued in its engine; the
 * replica's own word, dst/replicas.ts `proxy`), or decided there before it and sent there after.
 *
 * Which of them the decision owed (what `inFlightHere` counts: the other nodes' leases in the view
 * plus every lease this process's node holds open there and its decisions joining):
 * - its own runtime's (the process's leases there, and its decisions past their hold not yet
 *   holding one): every one decided before it (the order of their hold ends), always, its lease
 *   reclaimed by the state or not;
 * - another runtime's (another node, a restarted process, a replaced configuration): only those
 *   the view it read must show, sent before its views could be read (its last hold, else its
 *   arrival), on the same shared state, by a process alive then, neither router deciding alone
 *   meanwhile, no fault begun or healed since the other came, none under way at the decision. Not
 *   the rest (docs/routing.md: "with `redis` the shared count as each node last read it: two nodes
 *   deciding at the same moment may each send one past it"): a lease the view could not yet show,
 *   one an emptied or switched state lost, one of a process that died (its leases go with it), one
 *   on the other state of a record change, a router cut off counting only its own.
 * Nor another runtime's whose lease the expiry reclaimed by age while no word of the replica could
 * renew it (`leaseAgedOut`: on its way, or sent into a replica that hangs, longer than
 * `lease_max_age_ms`; docs/reliability.md "A lease whose log phase never came"), its lease not
 * taken again: the view no longer counts it. Its own runtime's still is: its process holds the
 * lease open (until LEASE_CEILING max ages after it was taken, past any upstream timeout here) and
 * counts it on top of the view, which tells the node's own leases apart (ReplicaView.ownInFlight;
 * seed 3169793: a batch request sent into a hang of replica-1, its lease reclaimed at 4 s, another
 * node's request in the view, and a batch request of the first node went as the second).
 * A request released before the replica answered it is not in flight: none is (the log phase runs
 * after the answer, or after the 504 that aborts it on the replica).
 */
import type { FleetRuntime } from '../src/runtime';

export const BOUND_INVARIANT = 'a bounded class joins a replica at its bound only after its wait';

/** A request sent to a replica, as Kong and the replica saw it. */
export interface Flight {
  /** Arrival number. */
  request: number;
  url: string;
  /** The runtime that decided it (its lease's). */
  decider: FleetRuntime;
  /** Its plugin-server process (node and generation). */
  proc: string;
  /** The shared state its lease is on. */
  db: number;
  arrivedAt: number;
  /** The order of its last hold end before it was sent (none seen: `sentAt` stands for it). */
  decidedSeq?: number;
  sentAt: number;
  /** Its router decided alone at some step since it came, or did when it sent it. */
  alone: boolean;
  /** When the replica answered it, or its exchange ended (undefined: not yet). */
  doneAt?: number;
  /** The lease it was proxied on. */
  lease?: string;
  /** When it reached the replica (undefined: not yet, on a slow path), and whether the replica hung then. */
  reachedAt?: number;
  reachedHung?: boolean;
}

/**
 * Whether `f`'s lease was reclaimed by age by `at` with no word of the replica able to renew it:
 * reclaimed (`expiredAt`, the state's time) after `f` was sent and by `at`, not open in its state
 * now (`open`: not taken again), and `f` not in the replica's engine by then (on its way, or it
 * reached a replica that hung). Not one that ran or waited there: a poll finding it renews its
 * lease (a base-model one too, seed 834440), and its count lost is a break.
 */
export function leaseAgedOut(f: Flight, expiredAt: number | undefined, open: boolean, at: number): boolean {
  if (f.lease === undefined || expiredAt === undefined || open) return false;
  if (expiredAt <= f.sentAt || expiredAt > at) return false;
  return f.reachedAt === undefined || f.reachedAt > expiredAt || f.reachedHung === true;
}

/** A bounded request's last hold end (its decision), with the world around it then. */
export interface BoundDecision {
  request: number;
  /** The order of this hold end among all (`Flight.decidedSeq`). */
  seq: number;
  at: number;
  /** Its views were read no earlier: its last hold (a hold re-reads them), else its arrival. */
  viewsFrom: number;
  /** Its wait in the gateway then, on its node's clock. */
  waitedMs: number;
  /**
   * Its class ages (behind a higher one): the start its decision predicted where it went, which
   * with its wait ends the wait at half its objective (src/router/room-wait.ts `holds`).
   */
  agingStartMs?: number;
  bound: number;
  objectiveMs: number;
  /** Where it was sent, by which runtime, on which shared state. */
  url: string;
  decider: FleetRuntime;
  db: number;
  /** Processes alive at the decision. */
  live: ReadonlySet<string>;
  /** A fault under way or a node deciding alone at the decision (WorldView.degraded). */
  degraded: boolean;
  /** The last fault begun or healed before the decision. */
  lastFaultAt: number;
  /** Its router decided alone at some step since `viewsFrom`. */
  alone: boolean;
}

/**
 * The requests in flight on `d`'s replica that its decision owed to count (see the file's comment).
 * `agedOut`: whether a flight's lease was reclaimed by age by then with nothing able to renew it
 * (`leaseAgedOut` on the world's state), asked of another runtime's flights only.
 */
export function owedInFlight(
  d: BoundDecision,
  flights: readonly Flight[],
  agedOut: (f: Flight, at: number) => boolean = () => false,
): Flight[] {
  return flights.filter((f) => {
    if (f.request === d.request || f.url !== d.url) return false;
    if (f.doneAt !== undefined && f.doneAt <= d.at) return false;
    // Its own runtime's, lease reclaimed or not: its process counts every lease it holds open.
    if (f.decider === d.decider) return f.decidedSeq !== undefined ? f.decidedSeq < d.seq : f.sentAt < d.at;
    if (agedOut(f, d.at)) return false;
    return (
      f.sentAt < d.viewsFrom &&
      f.db === d.db &&
      d.live.has(f.proc) &&
      !d.degraded &&
      !d.alone &&
      !f.alone &&
      d.lastFaultAt < f.arrivedAt
    );
  });
}

/** A violation's detail if `d` joined at its bound before its wait was over, else undefined. */
export function joinedPastBound(
  d: BoundDecision,
  flights: readonly Flight[],
  agedOut?: (f: Flight, at: number) => boolean,
): string | undefined {
  if (d.waitedMs >= d.objectiveMs / 2) return undefined;
  if (d.agingStartMs !== undefined && d.waitedMs + d.agingStartMs >= d.objectiveMs / 2) return undefined;
  const owed = owedInFlight(d, flights, agedOut);
  if (owed.length < d.bound) return undefined;
  const mine = owed.filter((f) => f.decider === d.decider).length;
  return (
    `request ${d.request} (max_in_flight ${d.bound}) decided onto ${d.url} at ${Math.round(d.at)} ms, ` +
    `${Math.round(d.waitedMs)} ms after it came (half its objective ${d.objectiveMs / 2} ms` +
    `${d.agingStartMs === undefined ? '' : `, predicted to start ${Math.round(d.agingStartMs)} ms on`}), with ` +
    `${owed.length} in flight there (${mine} its runtime's): requests ${owed.map((f) => f.request).join(', ')}`
  );
}
