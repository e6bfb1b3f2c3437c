/**
 * Replicas that leave the fleet are forgotten: each node claims the replicas it routes to
 * (`retain`, from a poll round when its list changed and every 30 s, and `upsert`), and one no node has claimed for a grace, with
 * nothing running on it, goes with every key of it. The in-process twin is
 * src/fleet/replica-claims.ts with MemoryFleetStore.retainReplicas (kept equal by
 * test/core/store-differential.test.ts).
 * Each runs after the prelude (prelude.ts), with ARGV[1] = the prefix and no KEYS.
 */

/**
 * A node's claim on a url, as Lua functions: `P claims:<url>` zset node -> when it last claimed
 * (Redis time), `P nc:<node>` the urls it claims, `P claimed` zset url -> when some node last
 * routed to it (a claim made or dropped, a lapsed claim's node's last sign of life). A url with
 * no `claimed` entry was never claimed (registered by an older version): never forgotten.
 */
export const CLAIM_FN = `
local function claimskey(url) return P .. 'claims:' .. url end
local function stampclaimed(url, t)
  local cur = redis.call('ZSCORE', P .. 'claimed', url)
  if not cur or tonumber(cur) < t then redis.call('ZADD', P .. 'claimed', t, url) end
end
local function claim(url, node, t)
  redis.call('ZADD', claimskey(url), t, node)
  redis.call('SADD', P .. 'nc:' .. node, url)
  stampclaimed(url, t)
end
local function unclaim(url, node)
  redis.call('ZREM', claimskey(url), node)
  redis.call('SREM', P .. 'nc:' .. node, url)
end
-- A node gone: silent past the node ttl (the expiry sweep; beat: its last heartbeat), or leaving the
-- state (prune; beat nil: it routed there until now). Its claims go, each stamped with its last sign
-- of life. Else a dead node's claims stayed on every replica a live node still claims: one set per
-- node id ever seen. All of them: one made after that heartbeat, left to retain, stayed so too (retain
-- looks only at replicas due, and a live node's claims keep one from being due); stamped with its
-- time, its replica is forgotten no sooner than it lapsed (the grace is at least the node ttl).
local function dropclaims(node, t, beat)
  for _, url in ipairs(redis.call('SMEMBERS', P .. 'nc:' .. node)) do
    local seen = t
    if beat then seen = math.max(tonumber(redis.call('ZSCORE', claimskey(url), node) or beat), beat) end
    unclaim(url, node)
    if known(url) then stampclaimed(url, seen) end
  end
end`;

/** Replicas one `retain` call looks at for forgetting at most (memory-store.ts FORGET_BATCH). */
const FORGET_BATCH = 100;

export const FORGETTING_SCRIPTS = {
  /**
   * node, grace ms, node ttl ms, event time ('' Redis time), urls... -> the urls forgotten. The
   * node routes to exactly `urls`: it claims the registered ones and drops its other claims at
   * once. Then each url last claimed before grace ago is looked at: a claim whose node neither
   * claimed nor heartbeat within the node ttl lapses (a dead node; its last sign of life counts as
   * the last claim), and a url no live claim holds, still past the grace, with nothing running
   * on it (no in-flight count, no lease counted or not, no load or unload: its residency, the lock
   * hash) loses its spec and every key of it.
   */
  retain: `${CLAIM_FN}
local node, grace, nodeTtl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local t = now_ms()
local at = tonumber(ARGV[5]) or t
local listed = {}
for i = 6, #ARGV do
  local url = ARGV[i]
  listed[url] = true
  if known(url) then claim(url, node, t) end
end
-- Stopped listing: its claim goes at once; it routed there until now.
for _, url in ipairs(redis.call('SMEMBERS', P .. 'nc:' .. node)) do
  if not listed[url] then
    unclaim(url, node)
    if known(url) then stampclaimed(url, t) end
  end
end
-- A live claim restamps the url with its node's last sign of life: else, with a grace under the
-- retain interval, live urls stayed due, first in the batch (oldest first), and a fleet of more than
-- FORGET_BATCH replicas never reached the ones to forget.
local function live(url)
  local alive = false
  local claims = redis.call('ZRANGE', claimskey(url), 0, -1, 'WITHSCORES')
  for i = 1, #claims, 2 do
    local n = claims[i]
    local seen = tonumber(claims[i + 1])
    local beat = redis.call('ZSCORE', P .. 'nodes', n)
    if beat and tonumber(beat) > seen then seen = tonumber(beat) end
    if seen > t - nodeTtl then alive = true else unclaim(url, n) end
    stampclaimed(url, seen)
  end
  return alive
end
local function idle(url)
  -- Counted leases, without the walk below (which finds them too).
  if tonumber(redis.call('HGET', rkey(url), 'inFlight') or '0') ~= 0 then return false end
  for _, raw in ipairs(redis.call('HVALS', reskey(url))) do
    local state = cjson.decode(raw).state
    if state == 'loading' or state == 'unloading' then return false end
  end
  for _, raw in ipairs(redis.call('HVALS', P .. 'lock')) do
    if cjson.decode(raw)[1] == url then return false end
  end
  -- Counted or not (taken before the replica was registered): a walk, only for a url to forget.
  for _, raw in ipairs(redis.call('HVALS', P .. 'lease')) do
    if cjson.decode(raw).url == url then return false end
  end
  return true
end
local out = {}
local due = redis.call('ZRANGEBYSCORE', P .. 'claimed', '-inf', '(' .. (t - grace), 'LIMIT', 0, ${FORGET_BATCH})
for _, url in ipairs(due) do
  if not known(url) then
    for _, n in ipairs(redis.call('ZRANGE', claimskey(url), 0, -1)) do unclaim(url, n) end
    redis.call('ZREM', P .. 'claimed', url)
  elseif not live(url) and tonumber(redis.call('ZSCORE', P .. 'claimed', url)) < t - grace and idle(url) then
    redis.call('HDEL', P .. 'spec', url)
    redis.call('DEL', rkey(url), reskey(url), busykey(url), ownkey(url), loadskey(url), P .. 'gone:' .. url,
      P .. 'unseen:' .. url, P .. 'made:' .. url, claimskey(url))
    redis.call('ZREM', P .. 'claimed', url)
    event({at = at, url = url, adapter = '', op = 'replica-forgotten', result = 'ok',
      detail = 'no node routes to it: forgotten'})
    out[#out + 1] = url
  end
end
return out`,
} as const;
