/**
 * The cold-load budget: fixed windows in Redis time, and the spends a node counted alone during an
 * outage added to the current window so the fleet's budget is not granted twice. A window's
 * opening time (`budget-at:<key>`, expiring with it) names it: a refund goes back to the window
 * its units were counted in, never to one opened since.
 * Each runs after the prelude (prelude.ts), with ARGV[1] = the prefix and no KEYS.
 */
const OPEN_WINDOW = `
local k = P .. 'budget:' .. ARGV[2]
local w = P .. 'budget-at:' .. ARGV[2]
-- A count with no expiry is a new window (opened now, or its expiry lost): it ends a window from now.
local function open_window(ms)
  if redis.call('PTTL', k) < 0 then
    redis.call('PEXPIRE', k, ms)
    redis.call('SET', w, string.format('%d', now_ms()), 'PX', ms)
  end
end`;

export const BUDGET_SCRIPTS = {
  /**
   * key, limit, window ms -> {0, the window's opening time} within the budget, else {ms until its
   * window ends, false}. A refused spend is not counted: the count is the units granted.
   */
  budget: `${OPEN_WINDOW}
local n = redis.call('INCR', k)
open_window(ARGV[4])
if n <= tonumber(ARGV[3]) then return {0, redis.call('GET', w) or false} end
redis.call('DECR', k)
-- At least 1: a key in its expiry's last millisecond answers PTTL 0, which reads as a grant.
return {math.max(redis.call('PTTL', k), 1), false}`,

  /**
   * key, count, window ms: adds cold loads a node counted alone during an outage to the current
   * window (opening one if none), so the fleet's budget is not granted twice.
   */
  budgetAdd: `${OPEN_WINDOW}
redis.call('INCRBY', k, ARGV[3])
open_window(ARGV[4])
return 1`,

  /**
   * key, window opening time, count -> units given back: only to the window they were counted in
   * (a window opened since, or none, gets nothing), never below zero.
   */
  budgetRefund: `${OPEN_WINDOW}
if redis.call('GET', w) ~= ARGV[3] then return 0 end
local back = math.min(tonumber(redis.call('GET', k) or '0'), tonumber(ARGV[4]))
if back <= 0 then return 0 end
redis.call('DECRBY', k, back)
return back`,
} as const;
