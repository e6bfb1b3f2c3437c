/**
 * The cold-load budget: fixed windows in Redis time, and the spends a node counted alone during an
 * outage added to the current window so the fleet's budget is not granted twice.
 * Each runs after the prelude (prelude.ts), with ARGV[1] = the prefix and no KEYS.
 */
export const BUDGET_SCRIPTS = {
  /** key, limit, window ms -> 0 within the budget, else ms until its window ends (fixed windows, Redis time) */
  budget: `
local k = P .. 'budget:' .. ARGV[2]
local n = redis.call('INCR', k)
if n == 1 then redis.call('PEXPIRE', k, ARGV[4]) end
if n <= tonumber(ARGV[3]) then return 0 end
local left = redis.call('PTTL', k)
if left < 0 then
  redis.call('PEXPIRE', k, ARGV[4])
  left = tonumber(ARGV[4])
end
return left`,

  /**
   * key, count, window ms: adds cold loads a node counted alone during an outage to the current
   * window (opening one if none), so the fleet's budget is not granted twice.
   */
  budgetAdd: `
local k = P .. 'budget:' .. ARGV[2]
redis.call('INCRBY', k, ARGV[3])
if redis.call('PTTL', k) < 0 then redis.call('PEXPIRE', k, ARGV[4]) end
return 1`,
} as const;
