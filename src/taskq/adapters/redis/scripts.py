"""Server-side Lua scripts: each limiter decision is one atomic script run.

Time is passed in microseconds (exact: below 2^53, and formatted with %.0f
so Lua never writes it in exponent form); ``-1`` means "use the Redis server's clock",
so processes with skewed clocks still agree on windows and expiries.
"""

from __future__ import annotations

_NOW = """
local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
"""

# KEYS[1] = window counter prefix; ARGV = now_us, window_us, limit.
# Returns {allowed (1/0), microseconds until the window ends, window start in microseconds}.
# A denied call is not counted, so the counter is the number of permits granted (and refunded
# permits free real room).
ACQUIRE_RATE = (
    _NOW
    + """
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local start = now - (now % window)
local key = KEYS[1] .. ':' .. string.format('%.0f', start)
local left = start + window - now
local granted = tonumber(redis.call('GET', key) or '0')
if granted >= limit then return {0, left, start} end
if redis.call('INCR', key) == 1 then redis.call('PEXPIRE', key, math.ceil(window / 500)) end
return {1, left, start}
"""
)

# KEYS[1] = window counter prefix; ARGV = window start in microseconds.
# Only a live counter above zero is decremented: DECR on a missing key would create one
# with no expiry.
REFUND_RATE = """
local key = KEYS[1] .. ':' .. ARGV[1]
local granted = tonumber(redis.call('GET', key) or '0')
if granted > 0 then redis.call('DECR', key) end
return 1
"""

# KEYS[1] = slots hash of the key, KEYS[2] = holder set, KEYS[3] = registry of slot hashes.
# ARGV = now_us, capacity, holder, token, lease_us, key name.
# A slot field holds "holder|token|expires_us". Returns the slot taken or -1.
RESERVE = (
    _NOW
    + """
local capacity = tonumber(ARGV[2])
local holder = ARGV[3]
local token = ARGV[4]
local lease = tonumber(ARGV[5])
local chosen = -1
for slot = 0, capacity - 1 do
  local v = redis.call('HGET', KEYS[1], tostring(slot))
  if not v then chosen = slot break end
  local expires = tonumber(string.match(v, '|(%d+)$'))
  if expires <= now then chosen = slot break end
end
if chosen < 0 then return -1 end
local value = holder .. '|' .. token .. '|' .. string.format('%.0f', now + lease)
redis.call('HSET', KEYS[1], tostring(chosen), value)
redis.call('SADD', KEYS[2], ARGV[6] .. '|' .. chosen .. '|' .. token)
redis.call('SADD', KEYS[3], KEYS[1])
return chosen
"""
)

# KEYS[1] = slots hash, KEYS[2] = holder set; ARGV = slot, token, key name.
RELEASE = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.find(v, '|' .. ARGV[2] .. '|', 1, true) then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
redis.call('SREM', KEYS[2], ARGV[3] .. '|' .. ARGV[1] .. '|' .. ARGV[2])
return 1
"""

# KEYS[1] = holder set; ARGV = now_us, lease_us, slots-hash prefix. Returns how many extended.
EXTEND = (
    _NOW
    + """
local lease = tonumber(ARGV[2])
local n = 0
for _, member in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local name, slot, token = string.match(member, '^(.*)|(%d+)|([^|]+)$')
  local hash = ARGV[3] .. name
  local v = redis.call('HGET', hash, slot)
  local live = false
  if v and string.find(v, '|' .. token .. '|', 1, true) then
    local expires = tonumber(string.match(v, '|(%d+)$'))
    if expires > now then
      local holder = string.match(v, '^(.*)|[^|]+|%d+$')
      local value = holder .. '|' .. token .. '|' .. string.format('%.0f', now + lease)
      redis.call('HSET', hash, slot, value)
      n = n + 1
      live = true
    end
  end
  if not live then redis.call('SREM', KEYS[1], member) end
end
return n
"""
)

# KEYS[1] = registry of slot hashes; ARGV = now_us. Returns how many expired slots it removed.
SWEEP = (
    _NOW
    + """
local n = 0
for _, hash in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local fields = redis.call('HGETALL', hash)
  for i = 1, #fields, 2 do
    local expires = tonumber(string.match(fields[i + 1], '|(%d+)$'))
    if expires <= now then
      redis.call('HDEL', hash, fields[i])
      n = n + 1
    end
  end
  if redis.call('HLEN', hash) == 0 then redis.call('SREM', KEYS[1], hash) end
end
return n
"""
)
