/**
 * How many nodes share the state, as a node keeps it from the replies it reads: the divisor of
 * its cold-load share while it decides alone (outage-budget.ts). RedisFleetStore keeps it so, and
 * the simulation's modelled Redis links alike (dst/redis-model.ts).
 */

/** The cold-load budgets' window (`cold_loads_per_minute`, per consumer too): a lower count waits one. */
const BUDGET_WINDOW_MS = 60_000;

export interface NodeCount {
  /** Nodes sharing the state as last seen whole; null: never seen whole (grant nothing alone). */
  nodes: number | null;
  /** The state's age (Redis time) when a whole count first read lower than `nodes`; null: none. */
  lowerSince: number | null;
}

export const NO_COUNT: NodeCount = { nodes: null, lowerSince: null };

/**
 * The count after a reply that read `nodes` heartbeating on a state `epochAgeMs` old (-1: its
 * start unknown, an older state's keys: taken as it is).
 * - Younger than `nodeTtlMs`, the count misses the nodes not heard from yet (after an emptied
 *   Redis it reads 1; in a fleet starting up each node counts only those registered before it:
 *   the simulation's seed 5560): only a floor over a count seen before.
 * - Whole but lower than before, it is held at the larger count for one budget window: nodes cut
 *   off earlier fall silent past node_ttl_ms and leave the count while they may still grant
 *   alone, so the later ones' shares would grow within the window (budget 6, three nodes cut off
 *   one after another: 6 + 3 + 6 granted, over the bound of twice the budget). The state's age is
 *   the clock: Redis's, the same for every node.
 */
export function nextNodeCount(
  had: NodeCount,
  nodes: number,
  epochAgeMs: number,
  nodeTtlMs: number,
): NodeCount {
  if (epochAgeMs >= 0 && epochAgeMs < nodeTtlMs)
    return had.nodes === null ? had : { nodes: Math.max(had.nodes, nodes), lowerSince: had.lowerSince };
  const n = Math.max(1, nodes);
  if (had.nodes === null || n >= had.nodes || epochAgeMs < 0) return { nodes: n, lowerSince: null };
  // A `lowerSince` past the age is another epoch's (the state was emptied since): start again.
  const since = had.lowerSince !== null && had.lowerSince <= epochAgeMs ? had.lowerSince : epochAgeMs;
  return epochAgeMs - since >= BUDGET_WINDOW_MS
    ? { nodes: n, lowerSince: null }
    : { nodes: had.nodes, lowerSince: since };
}
