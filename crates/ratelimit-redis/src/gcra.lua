-- One request against one bucket, by the generic cell rate algorithm (GCRA), atomically.
--
-- The bucket is one number under KEYS[1]: its theoretical arrival time (TAT), the moment at
-- which it would be full again, in microseconds. A bucket that is absent, or whose TAT has
-- passed, is full. A request is allowed when taking one token leaves the TAT at most
-- burst * interval ahead of now; then the TAT moves one interval on.
--
-- ARGV[1]: the interval between two tokens, in microseconds (1e6 / requests per second)
-- ARGV[2]: the burst, the bucket's capacity in tokens
-- ARGV[3]: how long the key lives after a request that took a token, in milliseconds (the
--          policy's refill time: by then the bucket is full, and forgetting it changes nothing)
-- ARGV[4]: now in microseconds, or "" for the server's clock (one clock for every replica)
--
-- Answers {allowed (1 or 0), whole tokens left, nanoseconds until the next token when refused}.

local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local now
if ARGV[4] == '' then
  -- Redis before 5 replicates scripts by their text unless told otherwise, and then refuses a
  -- write after reading the clock; later versions always replicate the effects.
  if redis.replicate_commands then
    redis.replicate_commands()
  end
  local time = redis.call('TIME')
  -- Seconds since 2025-01-01 rather than 1970: smaller numbers keep more fractional digits.
  now = (tonumber(time[1]) - 1735689600) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[4])
end

local capacity = burst * interval
-- How far the TAT is ahead of now: the tokens missing from the bucket, as time.
local backlog = 0
local stored = tonumber(redis.call('GET', KEYS[1]))
if stored ~= nil and stored > now then
  backlog = stored - now
end
local after = backlog + interval
-- Arithmetic in doubles: a request that lands within a billionth of a token of the boundary
-- counts as on it.
local slack = interval * 1e-9

if after > capacity + slack then
  local wait = math.ceil((after - capacity) * 1000)
  if wait < 1 then
    wait = 1
  end
  return {0, 0, math.min(wait, 1e15)}
end

redis.call('SET', KEYS[1], string.format('%.17g', now + after), 'PX', ttl)
local remaining = math.floor((capacity - after) / interval + 1e-9)
if remaining < 0 then
  remaining = 0
end
return {1, math.min(remaining, burst), 0}
