package redisstore

// syncScript folds one origin's cumulative counts into window counters.
//
// Each key is one window of one counter series, a hash:
//
//	"<origin>/<incarnation>"  the largest own count that run reported
//	"t"                       the sum of every run's field, kept in step
//	                          with them, so reading a total is one HGET
//	"x"                       the key's expiry, Unix ms
//
// ARGV[1] is the reporting run's field; ARGV[2i] and ARGV[2i+1] are key i's
// cumulative own count and expiry (Unix ms). The script returns the total of
// each key, in order.
//
// A count no larger than the stored one changes nothing, so a retried,
// duplicated or reordered batch never counts twice, and running the script
// again after a partial failure is safe. The key gets its expiry on its
// first write (the seed's EXPIRE after the first INCRBY); a later report
// asking for a later expiry (a sliding tier, see Config.Grace) extends it.
// PEXPIREAT comes last because an expiry already in the past deletes the
// key at once: a write after it would leave a key that never expires.
//
// Lua numbers are doubles, hence MaxOwn = 2^53 - 1. The delta is formatted
// with %d so that HINCRBY never sees "1e+15".
const syncScript = `
local field = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local cur = redis.call('HMGET', key, field, 'x', 't')
  local own = tonumber(ARGV[2 * i])
  local old = tonumber(cur[1] or 0)
  if own > old then
    redis.call('HSET', key, field, ARGV[2 * i])
    out[i] = redis.call('HINCRBY', key, 't', string.format('%d', own - old))
    local at = ARGV[2 * i + 1]
    if tonumber(at) > tonumber(cur[2] or 0) then
      redis.call('HSET', key, 'x', at)
      redis.call('PEXPIREAT', key, at)
    end
  else
    out[i] = tonumber(cur[3] or 0)
  end
end
return out
`
