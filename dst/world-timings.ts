/** The world's timings: the router's poll and probe, the settling, Kong's and the Schema's defaults. */
export const POLL_MS = 1000;
export const POLL_TIMEOUT_MS = 1000;
/** A poll's trips and the store call that records what it saw. */
export const SEEN_SLACK_MS = 500;
export const PROBE_MS = 1000;
/** The `redis` record's `timeout` (ms; one more on every other record change: dst/node-processes.ts). */
export const REDIS_TIMEOUT_MS = 500;
export const NODE_TTL_MS = 2000;
/**
 * After the span: faults healed, traffic done, the world settles at most this long before the
 * lease check; less once it is quiescent (`settled`).
 */
export const SETTLE_MS = 3 * PROBE_MS;
/** How often the settling looks whether the world is quiescent. */
export const SETTLE_TICK_MS = 100;
/**
 * The longest the traffic's tail may run after the span (requests waiting for room, faults
 * healing): past the access deadline (55 s) and Kong's upstream timeout.
 */
export const TAIL_MS = 70_000;
/** Bounded memory: wake-ups per node beyond one per request under way there. */
export const WAKEUP_SLACK = 8;
export const TIMER_BOUND = 20_000;
/** Kong's upstream read timeout (the proxy's 504), unless the world sets its own. */
export const UPSTREAM_TIMEOUT_MS = 10_000;
/** queue_timeout_ms, unless the world sets its own. */
export const QUEUE_TIMEOUT_MS = 8000;
/** backoff_base_ms (the Schema's default): a failed load is not tried again sooner by its runtime. */
export const BACKOFF_BASE_MS = 1000;
/** load_timeout_ms: a decision (room wait and two load calls) ends before LEASE_CEILING x lease_max_age_ms. */
export const LOAD_TIMEOUT_MS = 3000;
/** The longest a Redis restart keeps it down (schedule.ts draws `downMs` up to this). */
export const REDIS_DOWN_MAX_MS = 3000;

/**
 * A slow path's added time each way, ms: most short (a congested link), up to the 3 s of a SYN
 * lost twice (Linux resends it after 1 s, then 2 s more: RFC 6298's initial timeout, doubled).
 */
export const SLOW_HOP_MS = [10, 3000] as const;
