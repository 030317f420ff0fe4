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
// Per key that is one HMGET and, when the count grew, one HSET (plus a
// PEXPIREAT on the first write): the script holds the arithmetic, so a key
// costs two Redis calls, not four.
//
// A count no larger than the stored one changes nothing, so a retried,
// duplicated or reordered batch never counts twice, and running the script
// again after a partial failure is safe. The key gets its expiry on its
// first write (the seed's EXPIRE after the first INCRBY); a later report
// asking for a later expiry (a sliding tier, see Config.Grace) extends it.
// PEXPIREAT comes last because an expiry already in the past deletes the
// key at once: a write after it would leave a key that never expires.
//
// Lua numbers are doubles, hence MaxOwn = 2^53 - 1; a total above 2^53 (many
// origins near MaxOwn) is rounded, and saturates at 2^62 so that it always
// fits an int64. Numbers are written with %d so that Redis
// never stores "1e+15".
const syncScript = `
local field = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local cur = redis.call('HMGET', key, field, 't', 'x')
  local own = tonumber(ARGV[2 * i])
  local old = tonumber(cur[1] or 0)
  local total = tonumber(cur[2] or 0)
  if own > old then
    total = math.min(total + (own - old), 4611686018427387904)
    local at = ARGV[2 * i + 1]
    if tonumber(at) > tonumber(cur[3] or 0) then
      redis.call('HSET', key, field, ARGV[2 * i], 't', string.format('%d', total), 'x', at)
      redis.call('PEXPIREAT', key, at)
    else
      redis.call('HSET', key, field, ARGV[2 * i], 't', string.format('%d', total))
    end
  end
  out[i] = total
end
return out
`
