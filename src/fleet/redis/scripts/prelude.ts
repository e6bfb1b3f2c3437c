import { FENCE_PER_MS } from '../../types';

/**
 * The Redis fleet store's operations, each one Lua script: Redis runs a script alone, so every
 * conditional change (begin a load, unload only when no node holds a lease, release once) is
 * decided atomically for all Kong nodes. Keys are built from the prefix in ARGV[1] (standalone
 * Redis, or an address that follows a replicated primary; not Cluster). Layout, P the prefix:
 *   P spec            hash url -> replica spec JSON
 *   P r:<url>         hash of the replica's figures (health, waiting, residents, inFlight...)
 *   P res:<url>       hash adapter -> residency JSON {state, since, lastUsed, t (Redis time), fence?, for?}
 *   P busy:<url>      hash adapter -> in-flight count
 *   P own:<url>       hash node -> its leases of the in-flight count (the node each lease id
 *                     names, '<node>-<seq>'; types.ts leaseNode); a node at 0 leaves; rebuilt by
 *                     `expire` where the fields no longer add up to inFlight (an older node's calls)
 *   P loads:<url>     zset adapter -> since, of the entries in state 'loading' (loads under way);
 *                     its count and lowest score mirrored in P r:<url> as 'loads', 'loadsSince'
 *   P gone:<url>      zset adapter -> when it was unloaded or forgotten, Redis time (bounded)
 *   P unseen:<url>    set of the adapters a load began for before the replica's first registry
 *                     read was adopted (an emptied state): that read counts only these as the
 *                     router's; deleted by it (a load ended 'static' takes its name out)
 *   P lease           hash lease id -> {id, url, adapter, at, node, c: counted in inFlight}
 *   P lease-at        zset id -> when the lease was taken or last renewed, Redis time
 *   P lease-t0        zset id -> when the lease was taken, Redis time (renewals end at a ceiling)
 *   P ls:<url>|<name> set of the lease ids on one adapter of one replica (renewed together; '' the base model's)
 *   P reclaimed       zset id -> when the expiry sweep reclaimed the lease (kept LEASE_CEILING max ages)
 *   P nl:<node>       set of a node's lease ids; P nodes zset node -> last heartbeat (Redis time)
 *   P epoch           a random id set by the first registration after Redis was empty: a node
 *                     that sees it change or vanish takes its leases again (FLUSHALL, restart)
 *   P epoch-at        when the epoch was set (Redis time): the live-node count is whole only node_ttl_ms after
 *   P reborn          set (PX node_ttl_ms) when a node that knew an older epoch sets a new one: no unload meanwhile
 *   P fence           the last fence handed out (newfence); P lock hash fence -> [url, adapter];
 *                     P lock-until zset fence -> expiry
 *   P place:<adapter> the replica a cold adapter was placed on (PX: load and queue timeouts)
 *   P placers:<adapter> set of the requests sharing that placement (expires with it)
 *   P events          list of fleet events, newest first; channel P changed: room may have freed
 *   P budget:<key>    cold loads granted in the current window (expires with it)
 *   P budget-at:<key> when that window opened, Redis time (expires with it): a refund's window
 *   P claims:<url>    zset node -> when it last claimed the replica (registered it, or listed it
 *                     to `retain`), Redis time; P nc:<node> set of the urls a node claims
 *   P claimed         zset url -> when some node last routed to it (a claim made or dropped, a
 *                     lapsed claim's last sign of life): one past the grace, no live claim, nothing
 *                     running, is forgotten with every key above named by its url (forgetting.ts)
 *
 * This file: the helpers every script begins with; the scripts are grouped by concern beside it.
 */

/** How much earlier than measured a poll counts as begun (the snapshot call's own trip to Redis). */
export const SKEW_MARGIN_MS = 50;

export const PRELUDE = `
local P = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function rkey(url) return P .. 'r:' .. url end
local function reskey(url) return P .. 'res:' .. url end
local function busykey(url) return P .. 'busy:' .. url end
local function ownkey(url) return P .. 'own:' .. url end
-- The node a lease id names ('<node>-<seq>', types.ts leaseNode), '' for an id without one.
local function nodeof(id) return string.match(id, '^(.*)%-') or '' end
local function known(url) return redis.call('HEXISTS', P .. 'spec', url) == 1 end
local function getres(url, name)
  local v = redis.call('HGET', reskey(url), name)
  if v then return cjson.decode(v) end
  return nil
end
-- Loads under way (entries 'loading'): a zset by since, its count and oldest mirrored in the
-- replica's figures, which every view reads whole anyway (no call more per replica per request).
local function loadskey(url) return P .. 'loads:' .. url end
local function mirrorloads(url)
  local oldest = redis.call('ZRANGE', loadskey(url), 0, 0, 'WITHSCORES')
  if #oldest == 0 then
    redis.call('HDEL', rkey(url), 'loads', 'loadsSince')
  else
    redis.call('HSET', rkey(url), 'loads', redis.call('ZCARD', loadskey(url)), 'loadsSince', oldest[2])
  end
end
-- residents: non-static entries, read per request, kept by putres/dropres. t: when the entry
-- last changed, by Redis's clock (the one clock every node's poll is compared with).
local function putres(url, name, res)
  local raw = redis.call('HGET', reskey(url), name)
  local was = raw and cjson.decode(raw).state
  if res.state ~= 'static' and (not was or was == 'static') then
    redis.call('HINCRBY', rkey(url), 'residents', 1)
  end
  res.t = now_ms()
  redis.call('HSET', reskey(url), name, cjson.encode(res))
  if res.state == 'loading' then
    redis.call('ZADD', loadskey(url), res.since, name)
    mirrorloads(url)
  elseif was == 'loading' then
    redis.call('ZREM', loadskey(url), name)
    mirrorloads(url)
  end
end
local function dropres(url, name)
  local was = redis.call('HGET', reskey(url), name)
  if not was then return end
  redis.call('HDEL', reskey(url), name)
  local state = cjson.decode(was).state
  if state ~= 'static' then redis.call('HINCRBY', rkey(url), 'residents', -1) end
  if state == 'loading' then
    redis.call('ZREM', loadskey(url), name)
    mirrorloads(url)
  end
end
-- The event list keeps the newest 200: pushevent takes one already encoded (a node's own JSON).
local function pushevent(raw)
  redis.call('LPUSH', P .. 'events', raw)
  redis.call('LTRIM', P .. 'events', 0, 199)
end
local function event(e) pushevent(cjson.encode(e)) end
local function changed() redis.call('PUBLISH', P .. 'changed', '1') end
-- The nodes heartbeating here and how long ago the state began (0: emptied, no epoch yet; -1: its
-- start unknown, long ago): until every live node's heartbeat came since, the count misses some.
local function livenodes()
  local age = 0
  if redis.call('EXISTS', P .. 'epoch') == 1 then
    local at = redis.call('GET', P .. 'epoch-at')
    age = at and math.max(0, now_ms() - tonumber(at)) or -1
  end
  return {redis.call('ZCARD', P .. 'nodes'), age}
end
local function markgone(url, name)
  local k = P .. 'gone:' .. url
  redis.call('ZADD', k, now_ms(), name)
  if redis.call('ZCARD', k) > 256 then redis.call('ZREMRANGEBYRANK', k, 0, 0) end
end
-- A lock's fence (types.ts nextFence): above the last one here and at least Redis's time in
-- tenths of a ms, so not one a state since emptied or rolled back handed out to a holder still naming it.
local function newfence()
  local f = math.max(tonumber(redis.call('GET', P .. 'fence') or '0') + 1, now_ms() * ${FENCE_PER_MS})
  redis.call('SET', P .. 'fence', f)
  return f
end
local function lock(url, name, fence, ttl, node)
  redis.call('HSET', P .. 'lock', fence, cjson.encode({url, name, node}))
  redis.call('ZADD', P .. 'lock-until', now_ms() + ttl, fence)
  -- A holder absent from the node set (a state emptied, its first heartbeat not yet come) enters it:
  -- one that dies before that heartbeat is found silent after nodeTtl, its locks ended then, not only
  -- at their TTL (dst seed 3142528: two loads kept 'loading', over the limit, 8 s).
  if node and node ~= '' then redis.call('ZADD', P .. 'nodes', 'NX', now_ms(), node) end
end
local function unlock(fence)
  redis.call('HDEL', P .. 'lock', fence)
  redis.call('ZREM', P .. 'lock-until', fence)
end
-- A finish refused (not the change its fence began) ends the lock only of a change that is over
-- (the entry holds another fence now): a fence named with another replica or adapter, or a load's
-- fence given to finish an unload, must not end the live change's lock.
local function unlockstale(fence, url, name, res)
  if res and res.fence == fence then return end
  local raw = redis.call('HGET', P .. 'lock', fence)
  if not raw then return end
  local k = cjson.decode(raw)
  if k[1] == url and k[2] == name then unlock(fence) end
end
-- Another node's lock under this fence: a server that lost this node's lock (a Sentinel switch, a
-- restart from a snapshot) handed the fence out again, its counter ahead of its clock (fences from a
-- server whose clock ran ahead). The end this node owes the old server is not that lock's.
local function othernodes(fence, node)
  if node == nil or node == '' then return false end
  local raw = redis.call('HGET', P .. 'lock', fence)
  return raw and cjson.decode(raw)[3] ~= node
end
-- Ends the change the fence began on the adapter (a load: 'loading', an unload: 'unloading'): its entry,
-- or nil if the fence is no longer current (a stale lock is ended only if its change is over).
local function endchange(url, name, fence, state, node)
  if othernodes(fence, node) then return nil end
  local res = getres(url, name)
  if not res or res.state ~= state or res.fence ~= fence then
    unlockstale(fence, url, name, res)
    return nil
  end
  unlock(fence)
  return res
end
-- Gone from the replica: a registry read begun before now may still list it, and must not bring it back.
local function gone(url, name)
  dropres(url, name)
  markgone(url, name)
end
local function touch(url, name, at)
  local res = getres(url, name)
  if res and res.lastUsed < at then
    res.lastUsed = at
    redis.call('HSET', reskey(url), name, cjson.encode(res))
  end
end
local function outcome(url, ok, at, limit)
  local r = rkey(url)
  if ok then redis.call('HSET', r, 'passive', 0) return end
  local n = redis.call('HINCRBY', r, 'passive', 1)
  if n == limit and redis.call('HGET', r, 'health') ~= 'down' then
    local why = limit .. ' upstream failures in a row'
    redis.call('HSET', r, 'health', 'down', 'lastError', why)
    event({at = at, url = url, adapter = '', op = 'replica-down', result = 'error', detail = why})
  end
end
local function forget(url, name, at)
  local res = getres(url, name)
  if not res or res.state ~= 'loaded' then return 0 end
  gone(url, name)
  return 1
end
local function lskey(url, name) return P .. 'ls:' .. url .. '|' .. name end
local function droplease(id, lease)
  redis.call('HDEL', P .. 'lease', id)
  redis.call('ZREM', P .. 'lease-at', id)
  redis.call('ZREM', P .. 'lease-t0', id)
  redis.call('SREM', P .. 'nl:' .. lease.node, id)
  redis.call('SREM', lskey(lease.url, lease.adapter), id)
  -- Only what acquire counted (its replica was registered then) is uncounted.
  if lease.c ~= 1 then return end
  redis.call('HINCRBY', rkey(lease.url), 'inFlight', -1)
  if redis.call('HINCRBY', ownkey(lease.url), nodeof(id), -1) <= 0 then
    redis.call('HDEL', ownkey(lease.url), nodeof(id))
  end
  if lease.adapter ~= '' then
    if redis.call('HINCRBY', busykey(lease.url), lease.adapter, -1) <= 0 then
      redis.call('HDEL', busykey(lease.url), lease.adapter)
      changed()
    end
  end
end
`;
