/**
 * Loads and unloads under a fenced lock: a load begins only into a free slot, an unload only when
 * no node holds a lease on the adapter (and not during the grace after the state was emptied),
 * and a change ends only with the fence that began it.
 * Each runs after the prelude (prelude.ts), with ARGV[1] = the prefix and no KEYS.
 */
export const LOAD_LOCK_SCRIPTS = {
  /** url, adapter, at, limit, ttl, node -> fence or nil */
  beginLoad: `
local url, name, at, limit, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if not known(url) or redis.call('HEXISTS', reskey(url), name) == 1 then return false end
if tonumber(redis.call('HGET', rkey(url), 'residents') or '0') >= limit then return false end
-- Its load begins: the room made for it is taken. A load refused keeps it (the slot may come back).
redis.call('HDEL', P .. 'made:' .. url, name)
local fence = newfence()
putres(url, name, {state = 'loading', since = at, lastUsed = at, fence = fence})
-- Before the first registry read (a state emptied), only this name says it is no start-up adapter.
if redis.call('HGET', rkey(url), 'registrySeen') == '1' then redis.call('HSET', rkey(url), 'everLoaded', '1')
else redis.call('SADD', P .. 'unseen:' .. url, name) end
lock(url, name, fence, ttl, ARGV[7])
return fence`,

  /** url, adapter, fence, ok ('1', '0', 'static' or 'replayed'), at, node ('' any) -> 1 if the fence was current and the node's */
  finishLoad: `
local url, name, fence, at = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[6])
if not endchange(url, name, fence, 'loading', ARGV[7]) then return 0 end
if ARGV[5] == 'static' then
  -- Registered at the replica's start ("already loaded"): static, and no load of ours for the first read.
  dropres(url, name)
  putres(url, name, {state = 'static', since = at, lastUsed = at})
  redis.call('SREM', P .. 'unseen:' .. url, name)
-- Sent again after the server lost it (ended-locks.ts): the replica may have changed since (another
-- node's unload, its gone mark lost too). Gone, as after a failure: the next read begun after adopts it.
elseif ARGV[5] == 'replayed' then gone(url, name)
elseif ARGV[5] == '1' then putres(url, name, {state = 'loaded', since = at, lastUsed = at})
-- Ended without it: a failure, or the after-load undo unloaded it.
else gone(url, name) end
changed()
return 1`,

  /**
   * url, adapter, at, ttl, node, for ('' none), limit ('' none) -> fence or nil (busy on any node,
   * static, absent or moving; or made room for an adapter that is resident already, has an unload
   * under way, or has the room an ended unload made still free, or finds a slot free that no room
   * made for another adapter holds; a trim, at or below the limit; or the state was begun anew within
   * its grace, see upsert)
   */
  beginUnload: `
local url, name, at, ttl, forName = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[7]
local limit = tonumber(ARGV[8]) or math.huge
local res = getres(url, name)
if not res or res.state ~= 'loaded' then return false end
if tonumber(redis.call('HGET', busykey(url), name) or '0') > 0 then return false end
-- The state was emptied and begun anew lately: other nodes may not have re-taken their leases yet.
if redis.call('EXISTS', P .. 'reborn') == 1 then return false end
if forName ~= '' then
  -- Another node is making room for the same adapter: one unload per load.
  if redis.call('HEXISTS', reskey(url), forName) == 1 then return false end
  -- A trim under way (its 'for' starts with NUL) frees its slot for no one: not counted.
  local trimming, loading = 0, 0
  local all = redis.call('HVALS', reskey(url))
  for _, raw in ipairs(all) do
    local o = cjson.decode(raw)
    if o.state == 'unloading' and o['for'] == forName then return false end
    if o.state == 'unloading' and o['for'] and string.byte(o['for'], 1) == 0 then trimming = trimming + 1 end
    if o.state == 'loading' then loading = loading + 1 end
  end
  -- A trim takes the replica down to its limit, not below (the caller's reading may be stale). A
  -- load under way is left to its own after-load check (dst seed 125407): counted once landed.
  if string.byte(forName, 1) == 0 and limit ~= math.huge
    and tonumber(redis.call('HGET', rkey(url), 'residents') or '0') - trimming - loading <= limit then return false end
  -- An unload for it ended, its load has not begun, and the room is still free (no other load took
  -- it, the replica is not over the limit): one unload per load.
  local residents = tonumber(redis.call('HGET', rkey(url), 'residents') or '0')
  if tonumber(redis.call('HGET', P .. 'made:' .. url, forName) or '0') > now_ms()
    and residents - trimming < limit then return false end
  -- A slot is free that no room made for another adapter holds (a load that filled the replica
  -- failed after the caller read it full: dst seeds 708211, 848577): load into it, unload nothing.
  if string.byte(forName, 1) ~= 0 and limit ~= math.huge then
    local held = 0
    local made = redis.call('HGETALL', P .. 'made:' .. url)
    for i = 1, #made, 2 do
      if made[i] ~= forName and tonumber(made[i + 1]) > now_ms()
        and redis.call('HEXISTS', reskey(url), made[i]) == 0 then held = held + 1 end
    end
    if residents - trimming + held < limit then return false end
  end
end
local fence = newfence()
putres(url, name, {state = 'unloading', since = at, lastUsed = res.lastUsed, fence = fence, ['for'] = forName, ttl = ttl})
lock(url, name, fence, ttl, ARGV[6])
return fence`,

  /** url, adapter, fence, ok, at, node ('' any) -> 1 if the fence was current and the node's */
  finishUnload: `
local url, name, fence, at = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[6])
local res = endchange(url, name, fence, 'unloading', ARGV[7])
if not res then return 0 end
if ARGV[5] == '1' then
  gone(url, name)
  -- The room it made is for its adapter until that load begins (or the unload's TTL passes); a
  -- trim's (a name starting with NUL, never an adapter's) makes room for no one.
  if res['for'] and res['for'] ~= '' and string.byte(res['for'], 1) ~= 0 and res.ttl then
    redis.call('HSET', P .. 'made:' .. url, res['for'], now_ms() + res.ttl)
    -- Never shortened: a room made before with a longer TTL (another policy's) is kept to its end.
    if redis.call('PTTL', P .. 'made:' .. url) < res.ttl then redis.call('PEXPIRE', P .. 'made:' .. url, res.ttl) end
  end
elseif res.missed then gone(url, name)
else putres(url, name, {state = 'loaded', since = at, lastUsed = res.lastUsed}) end
changed()
return 1`,

  /** url, adapter, fence, node ('' any) -> 1 if it still grants the node's change */
  holds: `
if othernodes(tonumber(ARGV[4]), ARGV[5]) then return 0 end
local res = getres(ARGV[2], ARGV[3])
local until_ = redis.call('ZSCORE', P .. 'lock-until', ARGV[4])
if res and res.fence == tonumber(ARGV[4]) and until_ and tonumber(until_) > now_ms() then return 1 end
return 0`,
} as const;
