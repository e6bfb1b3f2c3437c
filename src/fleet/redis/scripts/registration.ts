/**
 * Registration and the state's epoch: a replica's spec, a node's heartbeat (the live nodes), the
 * dump and the event list. The epoch set by the first registration after Redis was empty is how a
 * node learns the state was emptied (FLUSHALL, a restart without persistence) and must re-take its
 * leases; the grace after it (`reborn`) grants no unload meanwhile.
 * Each runs after the prelude (prelude.ts), with ARGV[1] = the prefix and no KEYS.
 */
import { CLAIM_FN } from './forgetting';

export const REGISTRATION_SCRIPTS = {
  /**
   * url, spec JSON, epoch candidate, grace ms (0: none), node ('' none) -> the state's epoch (the candidate if
   * Redis had none). A grace is asked by a node that knew an older epoch: the state was emptied
   * (FLUSHALL, a restart without persistence), and this call begins it anew. The other nodes'
   * leases count nowhere until each learns of it from its heartbeat (every node_ttl_ms / 4) or a
   * call, so no unload is granted for the grace (beginUnload).
   */
  upsert: `${CLAIM_FN}
local url = ARGV[2]
redis.call('HSET', P .. 'spec', url, ARGV[3])
-- The registering node claims it (forgetting.ts): a registration then a list must not forget it.
-- None named (a node of an older version): no claim.
if ARGV[6] and ARGV[6] ~= '' then claim(url, ARGV[6], now_ms()) end
if redis.call('EXISTS', rkey(url)) == 0 then
  redis.call('HSET', rkey(url), 'health', 'unknown', 'residents', 0, 'inFlight', 0)
end
if redis.call('SET', P .. 'epoch', ARGV[4], 'NX') then
  redis.call('SET', P .. 'epoch-at', now_ms())
  if tonumber(ARGV[5]) > 0 then redis.call('SET', P .. 'reborn', '1', 'PX', ARGV[5]) end
end
return redis.call('GET', P .. 'epoch')`,

  /** node: this node is alive (Redis time, so node clocks may disagree) -> {epoch, {nodes, epoch age}} */
  heartbeat: `
redis.call('ZADD', P .. 'nodes', now_ms(), ARGV[2])
return {redis.call('GET', P .. 'epoch'), livenodes()}`,

  /** -> rows {url, spec, figures, residency, busy} for every replica */
  dump: `
local out = {}
local specs = redis.call('HGETALL', P .. 'spec')
for i = 1, #specs, 2 do
  local url = specs[i]
  out[#out + 1] = {url, specs[i + 1], redis.call('HGETALL', rkey(url)),
    redis.call('HGETALL', reskey(url)), redis.call('HGETALL', busykey(url))}
end
return out`,

  /** event JSON */
  event: `
pushevent(ARGV[2])
return 1`,
} as const;
