/**
 * Lua scripts of the coordination keys. Each runs atomically, and the time-based ones read the clock
 * of Redis (`TIME`), so that workers on hosts with skewed clocks still agree on who is alive. Like the
 * store's scripts they never decode JSON: records are built in TypeScript and only compared as strings.
 */

/** Redis time in milliseconds, as a Lua local `now`. */
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * A worker's heartbeat: scores it in the worker set with its expiry time, rewrites its record with a
 * TTL and prunes expired workers. Publishes on the events channel when the worker was not in the set
 * (a join, or a come-back after expiring) or when it pruned some.
 *
 * KEYS: worker set, worker record. ARGV: worker id, record JSON, ttl ms, events channel.
 * Returns 1 when the worker was added, else 0.
 */
export const HEARTBEAT = `${NOW}
local added = redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
local pruned = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if added == 1 then redis.call('PUBLISH', ARGV[4], 'join ' .. ARGV[1]) end
if pruned > 0 then redis.call('PUBLISH', ARGV[4], 'expired') end
return added
`;

/**
 * Prunes expired workers (publishing `expired` when there were some) and returns the live worker ids.
 * KEYS: worker set. ARGV: events channel.
 */
export const LIVE_WORKERS = `${NOW}
if redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) > 0 then redis.call('PUBLISH', ARGV[1], 'expired') end
return redis.call('ZRANGE', KEYS[1], 0, -1)
`;

/** A worker leaving. KEYS: worker set, worker record. ARGV: worker id, events channel. */
export const LEAVE = `
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[2], 'leave ' .. ARGV[1])
return removed
`;

/**
 * Takes a free lease with a new token. A shard's first token is the Redis time in ms, later
 * ones count up by one, so tokens keep growing even if Redis loses its data (no persistence, failover
 * to a lagging replica), as long as a shard is acquired less than once per millisecond on average.
 * The value is built here so that it carries the new token; it is byte for byte
 * `JSON.stringify({ owner, token })`.
 *
 * Also records when the token was handed out (`<token>:<ms>` at KEYS[3]), for the lease's age.
 *
 * KEYS: lease, token counter, acquisition time. ARGV: JSON-encoded owner, ttl ms. Returns the token,
 * or 0 when held.
 */
export const ACQUIRE_LEASE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
${NOW}
local token
if redis.call('EXISTS', KEYS[2]) == 1 then
  token = redis.call('INCR', KEYS[2])
else
  token = now
  redis.call('SET', KEYS[2], string.format('%d', token))
end
redis.call('SET', KEYS[1], '{"owner":' .. ARGV[1] .. ',"token":' .. string.format('%d', token) .. '}', 'PX', ARGV[2])
redis.call('SET', KEYS[3], string.format('%d', token) .. ':' .. string.format('%d', now))
return token
`;

/**
 * Extends a lease still holding the expected value. When the lease key is gone (it ran out while
 * Redis did not answer its holder, or a failover lost it) and no token was handed out after the
 * holder's (the counter is not past it, or was lost too), the holder takes it back with the same
 * value: nobody else can have led the shard meanwhile, so its leadership goes on without a
 * handover. KEYS: lease, token counter. ARGV: value, ttl ms, token. Returns 1 (extended), 2 (taken
 * back) or 0 (someone else's, or handed out since).
 */
export const RENEW_LEASE = `
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if held then return 0 end
local counter = redis.call('GET', KEYS[2])
if counter and tonumber(counter) > tonumber(ARGV[3]) then return 0 end
if not counter then redis.call('SET', KEYS[2], ARGV[3]) end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 2
`;

/** Deletes a lease still holding the expected value. KEYS: lease. ARGV: value. Returns 1 or 0. */
export const RELEASE_LEASE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`;
