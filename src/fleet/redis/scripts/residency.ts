/**
 * Residency as polls and upstream outcomes report it: a poll begun before the last one applied
 * changes nothing, an adapter missing from a registry read after its entry last changed is
 * dropped (a load under way never is), and a cold adapter is placed on one replica for the whole
 * fleet (`place`).
 * Each runs after the prelude (prelude.ts), with ARGV[1] = the prefix and no KEYS.
 */
import { SKEW_MARGIN_MS } from './prelude';

/**
 * The replicas' views (ARGV[from..] the urls), as a Lua function: the `views` script and the
 * request path's `viewsAndLease` (leases.ts) read them alike.
 */
export const VIEWS_FN = `
local function views(adapter, withRes, node, from)
  local placed = false
  if adapter ~= '' then placed = redis.call('GET', P .. 'place:' .. adapter) end
  local out = {}
  for i = from, #ARGV do
    local url = ARGV[i]
    local spec = redis.call('HGET', P .. 'spec', url)
    if spec then
      local row = {url, spec, redis.call('HGETALL', rkey(url)), false, false, false, false, false}
      if adapter ~= '' then
        row[4] = redis.call('HGET', reskey(url), adapter)
        row[5] = redis.call('HGET', busykey(url), adapter)
      end
      if withRes == '1' then
        row[6] = redis.call('HGETALL', reskey(url))
        row[7] = redis.call('HGETALL', busykey(url))
      end
      -- The reading node's leases among the in-flight count: one field, whatever the other nodes'.
      if node ~= '' then row[8] = redis.call('HGET', ownkey(url), node) or '0' end
      out[#out + 1] = row
    end
  end
  -- The epoch and the node count ride on the round trip every decision makes anyway.
  return {placed, out, redis.call('GET', P .. 'epoch'), livenodes()}
end`;

export const RESIDENCY_SCRIPTS = {
  /**
   * adapter ('' none), withResidents '0'|'1', node ('' none: not counted apart), urls... ->
   * {placement, rows, epoch, {nodes, epoch age}}
   */
  views: `${VIEWS_FN}
return views(ARGV[2], ARGV[3], ARGV[4], 5)`,

  /** url, snapshot JSON {at, startedAt, sharedStartedAt?, startedOnArrival?, took, ok, error?, load?, registry?[{name, path, managed}]}, llama JSON or '' */
  snapshot: `
local url = ARGV[2]
if not known(url) then return 0 end
local s = cjson.decode(ARGV[3])
local r = rkey(url)
-- When the scrape began, by Redis's clock (nodes' clocks disagree): read beside the scrape, less
-- the read's time (poller.ts), or else estimated from its duration (\`took\`, on the node's monotonic
-- clock: types.ts \`pollDuration\`), with a margin for this call's trip to Redis (an entry
-- changed within it is kept until the next poll).
local started = s.sharedStartedAt
-- A verdict seen in the call (Kong's own 502/504): begun now, no margin (a poll begun before it is older news).
if s.startedOnArrival then started = now_ms()
elseif type(started) ~= 'number' then started = now_ms() - s.took - ${SKEW_MARGIN_MS} end
local prev = redis.call('HGET', r, 'scrapedAt')
-- Any node may poll: a poll that began before the one applied last is older news.
if prev and started < tonumber(prev) then return 0 end
local health = redis.call('HGET', r, 'health')
local function markup()
  if health == 'down' then event({at = s.at, url = url, adapter = '', op = 'replica-up', result = 'ok'}) end
  redis.call('HSET', r, 'health', 'up', 'passive', 0)
  redis.call('HDEL', r, 'lastError')
end
local verdictAt = tonumber(redis.call('HGET', r, 'verdictAt'))
if s.verdictOnly and s.ok then
  -- An up verdict handed on without its poll (seen-down.ts), the health only: it read nothing here,
  -- so the record claims no poll (no start, no check): a router polls a record no poll read before
  -- routing on it, and a poll begun before the verdict still brings its registry (dst seed 705202).
  if not verdictAt or started > verdictAt then redis.call('HSET', r, 'verdictAt', started) end
  markup()
  return 1
end
-- Begun before a poll that found the replica up: older news.
if not s.ok and verdictAt and started < verdictAt then return 0 end
redis.call('HSET', r, 'scrapedAt', started, 'checkedAt', s.at)
if not s.ok then
  if health ~= 'down' then
    event({at = s.at, url = url, adapter = '', op = 'replica-down', result = 'error', detail = s.error})
  end
  redis.call('HSET', r, 'health', 'down', 'lastError', s.error)
  return 1
end
markup()
redis.call('HSET', r, 'snapshotAt', s.at)
if type(s.load) == 'table' then
  -- The replica runs or queues requests for these adapters: their leases are alive, whichever
  -- node holds them and whatever its clock. vLLM's vllm:lora_requests_info gauge, labels
  -- running_lora_adapters and waiting_lora_adapters (vllm/v1/metrics/loggers.py,
  -- PrometheusStatLogger.record, at vLLM v0.11.0), parsed in
  -- src/metrics/replica-load.ts.
  local t = now_ms()
  local function renew(name)
    for _, id in ipairs(redis.call('SMEMBERS', lskey(url, name))) do
      redis.call('ZADD', P .. 'lease-at', 'XX', t, id)
    end
  end
  if type(s.load.activeAdapters) == 'table' then
    for _, name in ipairs(s.load.activeAdapters) do renew(name) end
  end
  -- Base-model requests are no adapter's: the replica running or queueing any request is the only
  -- word on them, so it renews their leases (an orphan among them goes at the ceiling, as on a hot
  -- adapter). Unrenewed, one longer than the maximum age left the in-flight count while it ran.
  if (tonumber(s.load.running) or 0) + (tonumber(s.load.waiting) or 0) > 0 then renew('') end
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
  -- Missing from a registry read before this entry changed: the registry is the older truth. A
  -- load or unload under way is ended by its holder (an unload's end makes the room it was for); an
  -- unload's end then leaves it gone, even one ended not done (holder cut off: dst seed 826256).
  if not present[name] and (res.t or res.since) < started then
    if res.state == 'unloading' then
      if not res.missed then
        res.missed = true
        redis.call('HSET', reskey(url), name, cjson.encode(res))
      end
    elseif res.state ~= 'loading' then
      if res.state == 'loaded' then vanished = vanished + 1 end
      dropres(url, name)
    end
  end
end
local everLoaded = redis.call('HGET', r, 'everLoaded') == '1'
-- Loads begun before the first registry read (memory-store.ts reconcile): those names only.
local unseen = P .. 'unseen:' .. url
for _, e in ipairs(s.registry) do
  local cur = getres(url, e.name)
  if not cur then
    local gone = redis.call('ZSCORE', P .. 'gone:' .. url, e.name)
    if not gone or tonumber(gone) < started then
      local state = 'static'
      -- e.managed nil: no configurations known to the caller (false: listed at a path none loads,
      -- a start-up entry whatever was loaded here: seed 310213).
      if e.managed or (e.managed == nil and (everLoaded or redis.call('SISMEMBER', unseen, e.name) == 1)) then
        state = 'loaded'
      end
      putres(url, e.name, {state = state, since = s.at, lastUsed = s.at})
    end
  elseif cur.state == 'static' and e.managed then
    -- Classified before the configuration that manages it registered: a router's load after all.
    putres(url, e.name, {state = 'loaded', since = cur.since, lastUsed = cur.lastUsed})
  end
end
if redis.call('HGET', r, 'registrySeen') ~= '1' then
  redis.call('HSET', r, 'registrySeen', '1')
  if redis.call('EXISTS', unseen) == 1 then redis.call('HSET', r, 'everLoaded', '1') end
  redis.call('DEL', unseen)
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

  /**
   * url, ages '1'|'' -> {residency hash, busy hash[, ages]}: with ages, each resident leases count,
   * how long its oldest open lease has been held by Redis's clock (name, ms, flat), less the 1 ms
   * both times are floored to: never older than it is (unseen-busy.ts reads it against a poll's start).
   */
  residents: `
local url = ARGV[2]
local res, busy = redis.call('HGETALL', reskey(url)), redis.call('HGETALL', busykey(url))
if ARGV[3] ~= '1' then return {res, busy} end
local now, ages = now_ms(), {}
for i = 1, #busy, 2 do
  local name = busy[i]
  if tonumber(busy[i + 1]) > 0 and redis.call('HEXISTS', reskey(url), name) == 1 then
    local oldest = false
    for _, id in ipairs(redis.call('SMEMBERS', lskey(url, name))) do
      local t0 = tonumber(redis.call('ZSCORE', P .. 'lease-t0', id))
      if t0 and (not oldest or t0 < oldest) then oldest = t0 end
    end
    if oldest then
      ages[#ages + 1] = name
      ages[#ages + 1] = tostring(math.max(0, now - oldest - 1))
    end
  end
end
return {res, busy, ages}`,

  /** url, adapter, at */
  forget: `
return forget(ARGV[2], ARGV[3], tonumber(ARGV[4]))`,

  /** url, adapter, at */
  touch: `
touch(ARGV[2], ARGV[3], tonumber(ARGV[4]))
return 1`,

  /** adapter, url, seen ('' none), ttl, claimer ('' none) -> the replica holding the placement */
  place: `
local k, url, seen, claimer = P .. 'place:' .. ARGV[2], ARGV[3], ARGV[4], ARGV[6]
local c = P .. 'placers:' .. ARGV[2]
local cur = redis.call('GET', k)
if cur == url then
  if claimer ~= '' then
    redis.call('SADD', c, claimer)
    local left = redis.call('PTTL', k)
    if left > 0 then redis.call('PEXPIRE', c, left) end
  end
  return url
end
if cur and cur ~= seen then return cur end
-- Free, or a spread past the placement seen: placed here now, for this load (else the last claimer
-- of the old placement drops it under the load, and the next cold request places a third copy:
-- seed 2416114).
redis.call('SET', k, url, 'PX', ARGV[5])
redis.call('DEL', c)
if claimer ~= '' then
  redis.call('SADD', c, claimer)
  redis.call('PEXPIRE', c, ARGV[5])
end
return url`,

  /** adapter, url, claimer ('' none: drop it at once) */
  unplace: `
local k, c = P .. 'place:' .. ARGV[2], P .. 'placers:' .. ARGV[2]
if redis.call('GET', k) ~= ARGV[3] then return 1 end
if ARGV[4] ~= '' then
  redis.call('SREM', c, ARGV[4])
  if redis.call('SCARD', c) > 0 then return 1 end
end
redis.call('DEL', k, c)
return 1`,
} as const;
