/**
 * The Redis fleet store's operations, each one Lua script: Redis runs a script alone, so every
 * conditional change (begin a load, unload only when no node holds a lease, release once) is
 * decided atomically for all Kong nodes. Keys are built from the prefix in ARGV[1] (standalone
 * Redis, or an address that follows a replicated primary; not Cluster). Layout, P the prefix:
 *   P spec            hash url -> replica spec JSON
 *   P r:<url>         hash of the replica's figures (health, waiting, residents, inFlight...)
 *   P res:<url>       hash adapter -> residency JSON {state, since, lastUsed, t (Redis time), fence?, for?}
 *   P busy:<url>      hash adapter -> in-flight count
 *   P gone:<url>      zset adapter -> when it was unloaded or forgotten, Redis time (bounded)
 *   P lease           hash lease id -> {id, url, adapter, at, node, c: counted in inFlight}
 *   P lease-at        zset id -> when the lease was taken or last renewed, Redis time
 *   P lease-t0        zset id -> when the lease was taken, Redis time (renewals end at a ceiling)
 *   P ls:<url>|<name> set of the lease ids on one adapter of one replica (renewed together)
 *   P nl:<node>       set of a node's lease ids; P nodes zset node -> last heartbeat (Redis time)
 *   P epoch           a random id set by the first registration after Redis was empty: a node
 *                     that sees it change or vanish takes its leases again (FLUSHALL, restart)
 *   P reborn          set (PX node_ttl_ms) when a node that knew an older epoch sets a new one: no unload meanwhile
 *   P fence           counter; P lock hash fence -> [url, adapter]; P lock-until zset fence -> expiry
 *   P place:<adapter> the replica a cold adapter was placed on (PX: load and queue timeouts)
 *   P events          list of fleet events, newest first; channel P changed: room may have freed
 *   P budget:<key>    cold loads counted in the current window (expires with it)
 */

/** How much earlier than measured a poll counts as begun (the snapshot call's own trip to Redis). */
export const SKEW_MARGIN_MS = 50;

const PRELUDE = `
local P = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function rkey(url) return P .. 'r:' .. url end
local function reskey(url) return P .. 'res:' .. url end
local function busykey(url) return P .. 'busy:' .. url end
local function known(url) return redis.call('HEXISTS', P .. 'spec', url) == 1 end
local function getres(url, name)
  local v = redis.call('HGET', reskey(url), name)
  if v then return cjson.decode(v) end
  return nil
end
-- residents: non-static entries, read per request, kept by putres/dropres. t: when the entry
-- last changed, by Redis's clock (the one clock every node's poll is compared with).
local function putres(url, name, res)
  local was = redis.call('HGET', reskey(url), name)
  if res.state ~= 'static' and (not was or cjson.decode(was).state == 'static') then
    redis.call('HINCRBY', rkey(url), 'residents', 1)
  end
  res.t = now_ms()
  redis.call('HSET', reskey(url), name, cjson.encode(res))
end
local function dropres(url, name)
  local was = redis.call('HGET', reskey(url), name)
  if not was then return end
  redis.call('HDEL', reskey(url), name)
  if cjson.decode(was).state ~= 'static' then redis.call('HINCRBY', rkey(url), 'residents', -1) end
end
local function event(e)
  redis.call('LPUSH', P .. 'events', cjson.encode(e))
  redis.call('LTRIM', P .. 'events', 0, 199)
end
local function changed() redis.call('PUBLISH', P .. 'changed', '1') end
local function markgone(url, name)
  local k = P .. 'gone:' .. url
  redis.call('ZADD', k, now_ms(), name)
  if redis.call('ZCARD', k) > 256 then redis.call('ZREMRANGEBYRANK', k, 0, 0) end
end
local function lock(url, name, fence, ttl, node)
  redis.call('HSET', P .. 'lock', fence, cjson.encode({url, name, node}))
  redis.call('ZADD', P .. 'lock-until', now_ms() + ttl, fence)
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
  dropres(url, name)
  markgone(url, name)
  return 1
end
local function lskey(url, name) return P .. 'ls:' .. url .. '|' .. name end
local function droplease(id, lease)
  redis.call('HDEL', P .. 'lease', id)
  redis.call('ZREM', P .. 'lease-at', id)
  redis.call('ZREM', P .. 'lease-t0', id)
  redis.call('SREM', P .. 'nl:' .. lease.node, id)
  if lease.adapter ~= '' then redis.call('SREM', lskey(lease.url, lease.adapter), id) end
  -- Only what acquire counted (its replica was registered then) is uncounted.
  if lease.c ~= 1 then return end
  redis.call('HINCRBY', rkey(lease.url), 'inFlight', -1)
  if lease.adapter ~= '' then
    if redis.call('HINCRBY', busykey(lease.url), lease.adapter, -1) <= 0 then
      redis.call('HDEL', busykey(lease.url), lease.adapter)
      changed()
    end
  end
end
`;

/** name -> body; each runs with ARGV[1] = prefix and no KEYS. */
export const SCRIPTS = {
  /**
   * url, spec JSON, epoch candidate, grace ms (0: none) -> the state's epoch (the candidate if
   * Redis had none). A grace is asked by a node that knew an older epoch: the state was emptied
   * (FLUSHALL, a restart without persistence), and this call begins it anew. The other nodes'
   * leases count nowhere until each learns of it from its heartbeat (every node_ttl_ms / 4) or a
   * call, so no unload is granted for the grace (beginUnload).
   */
  upsert: `
local url = ARGV[2]
redis.call('HSET', P .. 'spec', url, ARGV[3])
if redis.call('EXISTS', rkey(url)) == 0 then
  redis.call('HSET', rkey(url), 'health', 'unknown', 'residents', 0, 'inFlight', 0)
end
if redis.call('SET', P .. 'epoch', ARGV[4], 'NX') and tonumber(ARGV[5]) > 0 then
  redis.call('SET', P .. 'reborn', '1', 'PX', ARGV[5])
end
return redis.call('GET', P .. 'epoch')`,

  /** adapter ('' none), withResidents '0'|'1', urls... -> {placement, rows, epoch, nodes} */
  views: `
local adapter, withRes = ARGV[2], ARGV[3]
local placed = false
if adapter ~= '' then placed = redis.call('GET', P .. 'place:' .. adapter) end
local out = {}
for i = 4, #ARGV do
  local url = ARGV[i]
  local spec = redis.call('HGET', P .. 'spec', url)
  if spec then
    local row = {url, spec, redis.call('HGETALL', rkey(url)), false, false, false, false}
    if adapter ~= '' then
      row[4] = redis.call('HGET', reskey(url), adapter)
      row[5] = redis.call('HGET', busykey(url), adapter)
    end
    if withRes == '1' then
      row[6] = redis.call('HGETALL', reskey(url))
      row[7] = redis.call('HGETALL', busykey(url))
    end
    out[#out + 1] = row
  end
end
-- The epoch and the node count ride on the round trip every decision makes anyway.
return {placed, out, redis.call('GET', P .. 'epoch'), redis.call('ZCARD', P .. 'nodes')}`,

  /** url, snapshot JSON {at, startedAt, sharedStartedAt?, ok, error?, load?, registry?[{name, path, managed}]}, llama JSON or '' */
  snapshot: `
local url = ARGV[2]
if not known(url) then return 0 end
local s = cjson.decode(ARGV[3])
local r = rkey(url)
-- When the scrape began, by Redis's clock (nodes' clocks disagree): read before the scrape, or
-- else estimated from its duration, with a margin for this call's trip to Redis (an entry
-- changed within it is kept until the next poll).
local started = s.sharedStartedAt
if type(started) ~= 'number' then started = now_ms() - (s.at - s.startedAt) - ${SKEW_MARGIN_MS} end
local prev = redis.call('HGET', r, 'scrapedAt')
-- Any node may poll: a poll that began before the one applied last is older news.
if prev and started < tonumber(prev) then return 0 end
redis.call('HSET', r, 'scrapedAt', started, 'checkedAt', s.at)
local health = redis.call('HGET', r, 'health')
if not s.ok then
  if health ~= 'down' then
    event({at = s.at, url = url, adapter = '', op = 'replica-down', result = 'error', detail = s.error})
  end
  redis.call('HSET', r, 'health', 'down', 'lastError', s.error)
  return 1
end
if health == 'down' then event({at = s.at, url = url, adapter = '', op = 'replica-up', result = 'ok'}) end
redis.call('HSET', r, 'health', 'up', 'passive', 0, 'snapshotAt', s.at)
redis.call('HDEL', r, 'lastError')
if type(s.load) == 'table' then
  -- The replica runs or queues requests for these adapters: their leases are alive, whichever
  -- node holds them and whatever its clock. vLLM's vllm:lora_requests_info gauge, labels
  -- running_lora_adapters and waiting_lora_adapters (vllm/v1/metrics/loggers.py,
  -- PrometheusStatLogger.record, at vLLM v0.11.0), parsed in
  -- src/metrics/replica-load.ts.
  if type(s.load.activeAdapters) == 'table' then
    local t = now_ms()
    for _, name in ipairs(s.load.activeAdapters) do
      for _, id in ipairs(redis.call('SMEMBERS', lskey(url, name))) do
        redis.call('ZADD', P .. 'lease-at', 'XX', t, id)
      end
    end
  end
  redis.call('HSET', r, 'waiting', s.load.waiting, 'running', s.load.running)
  if type(s.load.kvUsage) == 'number' then redis.call('HSET', r, 'kvUsage', s.load.kvUsage)
  else redis.call('HDEL', r, 'kvUsage') end
end
if ARGV[4] ~= '' then redis.call('HSET', r, 'llama', ARGV[4]) end
if type(s.registry) ~= 'table' then return 1 end
local present = {}
for _, e in ipairs(s.registry) do present[e.name] = true end
local vanished = 0
local all = redis.call('HGETALL', reskey(url))
for i = 1, #all, 2 do
  local name, res = all[i], cjson.decode(all[i + 1])
  -- Missing from a registry read before this entry changed: the registry is the older truth.
  if not present[name] and res.state ~= 'loading' and (res.t or res.since) < started then
    if res.state == 'loaded' then vanished = vanished + 1 end
    dropres(url, name)
  end
end
local everLoaded = redis.call('HGET', r, 'everLoaded') == '1'
for _, e in ipairs(s.registry) do
  local cur = getres(url, e.name)
  if not cur then
    local gone = redis.call('ZSCORE', P .. 'gone:' .. url, e.name)
    if not gone or tonumber(gone) < started then
      local state = 'static'
      if everLoaded or e.managed then state = 'loaded' end
      putres(url, e.name, {state = state, since = s.at, lastUsed = s.at})
    end
  elseif cur.state == 'static' and e.managed then
    -- Classified before the configuration that manages it registered: a router's load after all.
    putres(url, e.name, {state = 'loaded', since = cur.since, lastUsed = cur.lastUsed})
  end
end
if vanished > 0 then
  event({at = s.at, url = url, adapter = '', op = 'replica-restart', result = 'ok',
    detail = vanished .. ' loaded adapter(s) left the registry'})
end
return 1`,

  /** url, ok '1'|'0', at, failure limit */
  outcome: `
if known(ARGV[2]) then outcome(ARGV[2], ARGV[3] == '1', tonumber(ARGV[4]), tonumber(ARGV[5])) end
return 1`,

  /** url -> {residency hash, busy hash} */
  residents: `
local url = ARGV[2]
return {redis.call('HGETALL', reskey(url)), redis.call('HGETALL', busykey(url))}`,

  /** url, adapter, at, limit, ttl, node -> fence or nil */
  beginLoad: `
local url, name, at, limit, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if not known(url) or redis.call('HEXISTS', reskey(url), name) == 1 then return false end
if tonumber(redis.call('HGET', rkey(url), 'residents') or '0') >= limit then return false end
local fence = redis.call('INCR', P .. 'fence')
putres(url, name, {state = 'loading', since = at, lastUsed = at, fence = fence})
redis.call('HSET', rkey(url), 'everLoaded', '1')
lock(url, name, fence, ttl, ARGV[7])
return fence`,

  /** url, adapter, fence, ok, at -> 1 if the fence was current */
  finishLoad: `
local url, name, fence, at = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[6])
local res = getres(url, name)
if not res or res.state ~= 'loading' or res.fence ~= fence then
  unlockstale(fence, url, name, res)
  return 0
end
unlock(fence)
if ARGV[5] == '1' then putres(url, name, {state = 'loaded', since = at, lastUsed = at})
else
  -- Ended without it (a failure, or the after-load undo unloaded it): a registry read begun
  -- before now may still list it, and must not bring it back.
  dropres(url, name)
  markgone(url, name)
end
changed()
return 1`,

  /**
   * url, adapter, at, ttl, node, for ('' none) -> fence or nil (busy on any node, static, absent
   * or moving; or made room for an adapter that is resident already or has an unload under way;
   * or the state was begun anew within its grace, see upsert)
   */
  beginUnload: `
local url, name, at, ttl, forName = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[7]
local res = getres(url, name)
if not res or res.state ~= 'loaded' then return false end
if tonumber(redis.call('HGET', busykey(url), name) or '0') > 0 then return false end
-- The state was emptied and begun anew lately: other nodes may not have re-taken their leases yet.
if redis.call('EXISTS', P .. 'reborn') == 1 then return false end
if forName ~= '' then
  -- Another node is making room for the same adapter: one unload per load.
  if redis.call('HEXISTS', reskey(url), forName) == 1 then return false end
  local all = redis.call('HVALS', reskey(url))
  for _, raw in ipairs(all) do
    local o = cjson.decode(raw)
    if o.state == 'unloading' and o['for'] == forName then return false end
  end
end
local fence = redis.call('INCR', P .. 'fence')
putres(url, name, {state = 'unloading', since = at, lastUsed = res.lastUsed, fence = fence, ['for'] = forName})
lock(url, name, fence, ttl, ARGV[6])
return fence`,

  /** url, adapter, fence, ok, at -> 1 if the fence was current */
  finishUnload: `
local url, name, fence, at = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[6])
local res = getres(url, name)
if not res or res.state ~= 'unloading' or res.fence ~= fence then
  unlockstale(fence, url, name, res)
  return 0
end
unlock(fence)
if ARGV[5] == '1' then
  dropres(url, name)
  markgone(url, name)
else
  putres(url, name, {state = 'loaded', since = at, lastUsed = res.lastUsed})
end
changed()
return 1`,

  /** url, adapter, fence -> 1 if it still grants the change */
  holds: `
local res = getres(ARGV[2], ARGV[3])
local until_ = redis.call('ZSCORE', P .. 'lock-until', ARGV[4])
if res and res.fence == tonumber(ARGV[4]) and until_ and tonumber(until_) > now_ms() then return 1 end
return 0`,

  /** url, adapter, at */
  forget: `
return forget(ARGV[2], ARGV[3], tonumber(ARGV[4]))`,

  /** url, adapter, at */
  touch: `
touch(ARGV[2], ARGV[3], tonumber(ARGV[4]))
return 1`,

  /** adapter, url, seen ('' none), ttl -> the replica holding the placement */
  place: `
local k, url, seen = P .. 'place:' .. ARGV[2], ARGV[3], ARGV[4]
local cur = redis.call('GET', k)
if not cur then
  redis.call('SET', k, url, 'PX', ARGV[5])
  return url
end
if cur == url or cur == seen then return url end
return cur`,

  /** adapter, url */
  unplace: `
local k = P .. 'place:' .. ARGV[2]
if redis.call('GET', k) == ARGV[3] then redis.call('DEL', k) end
return 1`,

  /** id, url, adapter ('' none), at, node -> the adapter's state, or nil */
  acquire: `
local id, url, name, at, node = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local state = false
if name ~= '' then
  local res = getres(url, name)
  if res then state = res.state end
end
if redis.call('HEXISTS', P .. 'lease', id) == 1 then return state end
local counted = 0
if known(url) then
  counted = 1
  redis.call('HINCRBY', rkey(url), 'inFlight', 1)
  if name ~= '' then redis.call('HINCRBY', busykey(url), name, 1) end
end
redis.call('HSET', P .. 'lease', id,
  cjson.encode({id = id, url = url, adapter = name, at = at, node = node, c = counted}))
-- Its age is kept on Redis's clock: nodes' clocks disagree (issue 24, item 8).
local t = now_ms()
redis.call('ZADD', P .. 'lease-at', t, id)
redis.call('ZADD', P .. 'lease-t0', t, id)
redis.call('SADD', P .. 'nl:' .. node, id)
if name ~= '' then redis.call('SADD', lskey(url, name), id) end
return state`,

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
   * now, maxAge, nodeTtl, ceiling -> expired lease JSONs. Ends the load/unload locks of nodes silent for
   * nodeTtl, any lease not taken or renewed for maxAge and any lock past its expiry, all by Redis
   * time. A silent node's leases stay: it may be cut off from Redis while its requests still run
   * on the replicas (a partition), and an unload under them is what must never happen.
   */
  expire: `
local now, maxAge, nodeTtl, ceiling = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local t = now_ms()
local out = {}
local function expire(id, why)
  local raw = redis.call('HGET', P .. 'lease', id)
  if not raw then return end
  local lease = cjson.decode(raw)
  droplease(id, lease)
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
  -- an unload leaves the adapter loaded (a 404 or the next poll corrects that).
  local op = 'load'
  if res.state == 'loading' then dropres(url, name)
  else
    op = 'unload'
    putres(url, name, {state = 'loaded', since = res.since, lastUsed = res.lastUsed})
  end
  event({at = now, url = url, adapter = name, op = op, result = 'error', detail = why})
  changed()
end
local dead = redis.call('ZRANGEBYSCORE', P .. 'nodes', '-inf', t - nodeTtl, 'LIMIT', 0, 100)
if #dead > 0 then
  local gone = {}
  for _, node in ipairs(dead) do
    gone[node] = true
    redis.call('ZREM', P .. 'nodes', node)
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
for _, f in ipairs(redis.call('ZRANGEBYSCORE', P .. 'lock-until', '-inf', t, 'LIMIT', 0, 1000)) do
  local raw = redis.call('HGET', P .. 'lock', f)
  if raw then endlock(f, raw, 'lock expired') else unlock(f) end
end
return out`,

  /**
   * node, ids it holds (JSON array), leaving (1|0) -> leases dropped. Drops the node's leases it
   * no longer holds: a snapshot Redis restarted from (RDB, or AOF fsynced every second) may
   * predate their release, and a live node's lease never expires by its silence. Leaving (its
   * runtime moved to other state): it stops counting among the live nodes too.
   */
  prune: `
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
if ARGV[4] == '1' then redis.call('ZREM', P .. 'nodes', node) end
if n > 0 then changed() end
return n`,

  /** node: this node is alive (Redis time, so node clocks may disagree) -> {epoch, nodes} */
  heartbeat: `
redis.call('ZADD', P .. 'nodes', now_ms(), ARGV[2])
return {redis.call('GET', P .. 'epoch'), redis.call('ZCARD', P .. 'nodes')}`,

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

  /** event JSON */
  event: `
redis.call('LPUSH', P .. 'events', ARGV[2])
redis.call('LTRIM', P .. 'events', 0, 199)
return 1`,
} as const;

export type ScriptName = keyof typeof SCRIPTS;

/** The body Redis runs: the shared helpers, then the operation. */
export function scriptSource(name: ScriptName): string {
  return PRELUDE + SCRIPTS[name];
}
