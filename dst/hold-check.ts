/**
 * Issue 31 item 1c's invariant, "a hold never waits with nothing that could change": a request
 * alone on an idle fleet, with nothing changing while it routes, routes within its load, an
 * unload making room, two probes and a poll, besides the time its calls wait on a slow path
 * (docs/reliability/explored-schedules.md).
 */

/** One request as it routed: when it came, how long its route took, whether it was alone. */
export interface RoutedRequest {
  began: number;
  took: number;
  /** No other request was under way when it came. */
  alone: boolean;
  /** No request came after it while it routed. */
  last: boolean;
  /**
   * The time its decision's calls spent on a slow path (dst/replicas.ts `slowPath`), each no
   * longer than its hops both ways: a timing of the network the bound does not hold (seed 536271).
   */
  slowMs: number;
}

/** What of the world the judgement reads. */
export interface HoldScope {
  /** When the last fault began or healed. */
  lastFaultAt: number;
  /**
   * When the last `redis` record change reached its last node (Kong pushes it to the nodes in
   * turn): until then a node may still take it, and its runtime's hand-over with it.
   */
  lastRecordChange: number;
  /** How long an idle fleet may take to route one request. */
  boundMs: number;
}

/**
 * Whether the request waited past the bound with nothing that could change, the time its calls
 * spent on a slow path aside (seed 536271: a registry read and a load call each timed out over
 * one; the rest of its wait is judged). A request that came while a record change still reached
 * the nodes is out of scope: its node may take the change while it routes (seed 16974: its
 * decision then waits on the retired runtime, which unloads nothing, while the successor unloads
 * nothing until that decision ends).
 */
export function waitedIdle(r: RoutedRequest, w: HoldScope): boolean {
  const quiet = w.lastFaultAt < r.began && w.lastRecordChange < r.began;
  return r.alone && r.last && quiet && r.took - r.slowMs > w.boundMs;
}
