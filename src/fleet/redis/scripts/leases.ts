/**
 * Leases: a request's hold on its replica and adapter, counted in flight once, released once,
 * expired by age (never by its node's silence: a partitioned node's requests may still run), and
 * pruned when the node that took them no longer holds them.
 * Each runs after the prelude (prelude.ts), with ARGV[1] = the prefix and no KEYS.
 */
import { CLAIM_FN } from './forgetting';
import { VIEWS_FN } from './residency';

/** Takes a lease and returns the adapter's state on its replica (false: none), as a Lua function. */
const ACQUIRE_FN = `
local function acquire(id, url, name, at, node)
  local state = false
  if name ~= '' then
    local res = getres(url, name)
    if res then state = res.state end
  end
  local function count(u, n)
    if not known(u) then return 0 end
    redis.call('HINCRBY', rkey(u), 'inFlight', 1)
    redis.call('HINCRBY', ownkey(u), nodeof(id), 1)
    if n ~= '' then redis.call('HINCRBY', busykey(u), n, 1) end
    return 1
  end
  local raw = redis.call('HGET', P .. 'lease', id)
  if raw then
    -- Open, but counted nowhere (taken before its replica was registered: an emptied state): its
    -- node's recovery takes it again once the replica is, and it must hold the adapter from then.
    local lease = cjson.decode(raw)
    if lease.c ~= 1 and count(lease.url, lease.adapter) == 1 then
      lease.c = 1
      redis.call('HSET', P .. 'lease', id, cjson.encode(lease))
    end
    return state
  end
  local counted = count(url, name)
  redis.call('HSET', P .. 'lease', id,
    cjson.encode({id = id, url = url, adapter = name, at = at, node = node, c = counted}))
  -- Its age is kept on Redis's clock: nodes' clocks disagree (issue 24, item 8).
  local t = now_ms()
  redis.call('ZADD', P .. 'lease-at', t, id)
  redis.call('ZADD', P .. 'lease-t0', t, id)
  redis.call('SADD', P .. 'nl:' .. node, id)
  -- A base-model lease joins the set named '': polls renew it while the replica is busy.
  redis.call('SADD', lskey(url, name), id)
  return state
end`;

export const LEASE_SCRIPTS = {
  /** id, url, adapter ('' none), at, node -> the adapter's state, or nil */
  acquire: `${ACQUIRE_FN}
return acquire(ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6])`,

  /**
   * node, then id, url, adapter ('' none), at for each lease (at most RETAKE_BATCH, store.ts) ->
   * the ids refused. A node takes the leases it holds again (recovery, an emptied state), each as
   * `acquire` does, in one round trip; one the expiry sweep reclaimed is refused (it stays so).
   */
  retake: `${ACQUIRE_FN}
local node = ARGV[2]
local refused = {}
for i = 3, #ARGV - 3, 4 do
  if redis.call('ZSCORE', P .. 'reclaimed', ARGV[i]) then refused[#refused + 1] = ARGV[i]
  else acquire(ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), node) end
end
return refused`,

  /**
   * id, url, adapter ('' none), at, node, views' adapter ('' none), urls... -> {views, state}:
   * `views` then `acquire`, atomically, in the one round trip a resident adapter's request makes
   * in the access phase (the lease on the replica its last decision chose). The views are the
   * lease's node's (its own leases counted apart).
   */
  viewsAndLease: `${VIEWS_FN}${ACQUIRE_FN}
local v = views(ARGV[7], '0', nodeof(ARGV[2]), 8)
return {v, acquire(ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6])}`,

  /** id, at, upstream status ('' none), failure limit -> {lease JSON, idle 1|0} or nil (released already) */
  release: `
local id, at, status = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local raw = redis.call('HGET', P .. 'lease', id)
if not raw then return false end
local lease = cjson.decode(raw)
droplease(id, lease)
-- A base-model lease was no adapter's: releasing it leaves none idle.
local idle = 0
if lease.adapter ~= '' then
  touch(lease.url, lease.adapter, at)
  if tonumber(redis.call('HGET', busykey(lease.url), lease.adapter) or '0') == 0 then idle = 1 end
end
if status and known(lease.url) then
  outcome(lease.url, status < 500, at, tonumber(ARGV[5]))
end
return {raw, idle}`,

  /**
   * now, maxAge, nodeTtl, ceiling -> expired lease JSONs. Ends the load/unload locks and the replica
   * claims of nodes silent for nodeTtl, any lease not taken or renewed for maxAge and any lock past
   * its expiry, all by Redis time. A silent node's leases stay: it may be cut off from Redis while its requests still run
   * on the replicas (a partition), and an unload under them is what must never happen.
   */
  expire: `${CLAIM_FN}
local now, maxAge, nodeTtl, ceiling = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local t = now_ms()
local out = {}
local function expire(id, why)
  local raw = redis.call('HGET', P .. 'lease', id)
  if not raw then return end
  local lease = cjson.decode(raw)
  droplease(id, lease)
  -- Remembered while any store could still hold it: its node's recovery must not re-take it.
  redis.call('ZADD', P .. 'reclaimed', t, id)
  out[#out + 1] = raw
  event({at = now, url = lease.url, adapter = lease.adapter, op = 'lease-expired', result = 'error',
    detail = 'lease ' .. id .. ' ' .. why})
end
local function endlock(f, raw, why)
  unlock(f)
  local k = cjson.decode(raw)
  local url, name = k[1], k[2]
  local res = getres(url, name)
  if not res or res.fence ~= tonumber(f) then return end
  -- Its holder died or stalled: a load is forgotten (the next poll adopts it if it landed),
  -- an unload leaves the adapter loaded (a 404 or the next poll corrects that), or gone once a
  -- poll begun since its grant missed it (dst seed 826256).
  local op = 'load'
  if res.state == 'loading' then dropres(url, name)
  else
    op = 'unload'
    if res.missed then gone(url, name)
    else putres(url, name, {state = 'loaded', since = res.since, lastUsed = res.lastUsed}) end
  end
  event({at = now, url = url, adapter = name, op = op, result = 'error', detail = why})
  changed()
end
local dead = redis.call('ZRANGEBYSCORE', P .. 'nodes', '-inf', t - nodeTtl, 'LIMIT', 0, 100)
if #dead > 0 then
  local gone = {}
  for _, node in ipairs(dead) do
    gone[node] = true
    local beat = tonumber(redis.call('ZSCORE', P .. 'nodes', node))
    redis.call('ZREM', P .. 'nodes', node)
    -- Its claims lapse (forgetting.ts): the replicas only it routed to may be forgotten after the grace.
    dropclaims(node, t, beat)
  end
  local locks = redis.call('HGETALL', P .. 'lock')
  for i = 1, #locks, 2 do
    local node = cjson.decode(locks[i + 1])[3]
    if gone[node] then endlock(locks[i], locks[i + 1], 'lock of node ' .. node .. ', which stopped') end
  end
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'lease-at', '-inf', t - maxAge, 'LIMIT', 0, 1000)) do
  expire(id, 'held over ' .. maxAge .. ' ms')
end
-- Renewed or not, a lease taken this long ago goes (LEASE_CEILING in memory-store.ts).
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'lease-t0', '-inf', t - ceiling, 'LIMIT', 0, 1000)) do
  expire(id, 'taken over ' .. ceiling .. ' ms ago')
end
redis.call('ZREMRANGEBYSCORE', P .. 'reclaimed', '-inf', t - ceiling)
-- The per-node counts (own:<url>) add up to the in-flight count, but in a fleet of mixed versions:
-- an older node takes, releases and reclaims leases without them, and its sweep reclaiming a newer
-- node's lease left that node's count above its leases for good (it then read another node's
-- request as its own: test/core/own-count-mixed.test.ts). Rebuilt from the leases where the sum
-- disagrees: two reads per replica, the walk only then (never in a fleet of one version).
local stale = {}
local anystale = false
for _, url in ipairs(redis.call('HKEYS', P .. 'spec')) do
  local sum = 0
  for _, n in ipairs(redis.call('HVALS', ownkey(url))) do sum = sum + tonumber(n) end
  if sum ~= tonumber(redis.call('HGET', rkey(url), 'inFlight') or '0') then
    stale[url] = {}
    anystale = true
  end
end
if anystale then
  for _, raw in ipairs(redis.call('HVALS', P .. 'lease')) do
    local lease = cjson.decode(raw)
    local counts = stale[lease.url]
    if counts and lease.c == 1 then
      local n = nodeof(lease.id)
      counts[n] = (counts[n] or 0) + 1
    end
  end
  for url, counts in pairs(stale) do
    redis.call('DEL', ownkey(url))
    for n, k in pairs(counts) do redis.call('HSET', ownkey(url), n, k) end
  end
end
for _, f in ipairs(redis.call('ZRANGEBYSCORE', P .. 'lock-until', '-inf', t, 'LIMIT', 0, 1000)) do
  local raw = redis.call('HGET', P .. 'lock', f)
  if raw then endlock(f, raw, 'lock expired') else unlock(f) end
end
return out`,

  /**
   * node, ids it holds (JSON array), leaving (1|0) -> leases dropped. Drops the node's leases it
   * no longer holds: a snapshot Redis restarted from (RDB, or AOF fsynced every second) may
   * predate their release, and a live node's lease never expires by its silence. Leaving (its
   * runtime moved to other state): it stops counting among the live nodes too, and its claims on
   * replicas go.
   */
  prune: `${CLAIM_FN}
local node = ARGV[2]
local keep = {}
for _, id in ipairs(cjson.decode(ARGV[3])) do keep[id] = true end
local n = 0
for _, id in ipairs(redis.call('SMEMBERS', P .. 'nl:' .. node)) do
  if not keep[id] then
    local raw = redis.call('HGET', P .. 'lease', id)
    if raw then
      droplease(id, cjson.decode(raw))
      n = n + 1
    else
      redis.call('SREM', P .. 'nl:' .. node, id)
    end
  end
end
if ARGV[4] == '1' then
  redis.call('ZREM', P .. 'nodes', node)
  -- It routes nowhere on this state any more: its claims go at once (forgetting.ts).
  dropclaims(node, now_ms())
end
if n > 0 then changed() end
return n`,
} as const;
