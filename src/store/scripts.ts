/**
 * Lua scripts for the writes that depend on what is already stored. Redis runs a script
 * atomically, so a record and its indexes can never disagree, even with several API processes
 * and the CLI writing at once. (WATCH/MULTI would need a connection per caller: EXEC on a shared
 * connection silently drops another caller's WATCH.) Unconditional writes use MULTI instead.
 *
 * The scripts never decode JSON: records are built, encoded and checked in TypeScript, and the
 * scripts only compare and move strings.
 */

/**
 * Writes a task record and its indexes, unless the stored record is the new one already.
 *
 * KEYS: task record, task id set, selector -> id hash, id -> selector hash.
 * ARGV: id, mode (`create` | `put` | `replace`), expected record (for `replace`), new record, selector.
 *
 * Returns `exists` (create, id taken), `changed` (replace, record differs from the expected one or
 * is gone), `duplicate` (another task owns the selector), `unchanged` (the record is the new one:
 * nothing written), `created` or `replaced`.
 */
export const WRITE_TASK = `
local current = redis.call('GET', KEYS[1])
if ARGV[2] == 'create' then
  if current then return 'exists' end
elseif ARGV[2] == 'replace' then
  if current ~= ARGV[3] then return 'changed' end
end
if current == ARGV[4] then return 'unchanged' end
local owner = redis.call('HGET', KEYS[3], ARGV[5])
if owner and owner ~= ARGV[1] then return 'duplicate' end
local previous = redis.call('HGET', KEYS[4], ARGV[1])
if previous and previous ~= ARGV[5] and redis.call('HGET', KEYS[3], previous) == ARGV[1] then
  redis.call('HDEL', KEYS[3], previous)
end
redis.call('SET', KEYS[1], ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[5], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[5])
if current then return 'replaced' end
return 'created'
`;

/**
 * Creates several tasks, all or none: every id must be free and every selector unowned (the
 * caller has made them distinct among themselves), checked and written in one step.
 *
 * KEYS: task id set, selector -> id hash, id -> selector hash, then the record key of each task.
 * ARGV: for each task, its id, record and selector.
 *
 * Returns `ok`, or `{position, 'exists' | 'duplicate'}` for the first task in the way (1-based),
 * having written nothing.
 */
export const CREATE_TASKS = `
local n = #KEYS - 3
for i = 1, n do
  if redis.call('EXISTS', KEYS[3 + i]) == 1 then return {i, 'exists'} end
  if redis.call('HEXISTS', KEYS[2], ARGV[3 * i]) == 1 then return {i, 'duplicate'} end
end
for i = 1, n do
  local id, record, selector = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  redis.call('SET', KEYS[3 + i], record)
  redis.call('SADD', KEYS[1], id)
  redis.call('HSET', KEYS[2], selector, id)
  redis.call('HSET', KEYS[3], id, selector)
end
return 'ok'
`;

/**
 * Writes a cluster record and its index entry, unless the stored record is the new one already,
 * so that creating, replacing and "nothing to do" are decided in one step.
 *
 * KEYS: cluster record, cluster id set. ARGV: id, record.
 * Returns `unchanged` (nothing written), `created` or `replaced`.
 */
export const PUT_CLUSTER = `
local current = redis.call('GET', KEYS[1])
if current == ARGV[2] then
  redis.call('SADD', KEYS[2], ARGV[1])
  return 'unchanged'
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
if current then return 'replaced' end
return 'created'
`;

/**
 * Deletes a task record, its indexes, its service statuses, what its guards remember and its task error.
 *
 * KEYS: task record, task id set, selector -> id hash, id -> selector hash, status hash, error key, guard hash.
 * ARGV: id. Returns 1 when the record existed, else 0.
 */
export const DELETE_TASK = `
local existed = redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
local selector = redis.call('HGET', KEYS[4], ARGV[1])
if selector then
  if redis.call('HGET', KEYS[3], selector) == ARGV[1] then redis.call('HDEL', KEYS[3], selector) end
  redis.call('HDEL', KEYS[4], ARGV[1])
end
redis.call('DEL', KEYS[5], KEYS[6], KEYS[7])
return existed
`;

/**
 * Sets many fields of a task's status hash at once (ARGV: field, value, field, value, ...; a field
 * named twice takes its last value), only while the task exists: the statuses of one task written
 * in one event-loop turn go out as one script. Returns 1 when written, 0 when the task is gone.
 *
 * KEYS: task record, status hash.
 */
export const PUT_STATUSES_IF_TASK = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], unpack(ARGV))
return 1
`;

/**
 * Sets one field of a task's status hash, only while the task exists, so that a reconcile that
 * finishes after the task was deleted cannot leave status behind.
 *
 * KEYS: task record, status hash. ARGV: field, value. Returns 1 when written, 0 when the task is gone.
 */
export const PUT_STATUS_IF_TASK = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
`;

/**
 * Sets (ARGV[1] = `set`, message in ARGV[2]) or clears (`clear`) a task's error, setting only
 * while the task exists. KEYS: task record, error key. Returns 1 when the task exists, else 0.
 */
export const SET_ERROR_IF_TASK = `
if ARGV[1] == 'clear' then
  redis.call('DEL', KEYS[2])
  return redis.call('EXISTS', KEYS[1])
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
`;

/**
 * Replaces a cluster record only if it is still the one read (re-encrypting its secrets must not
 * undo a write made meanwhile).
 *
 * KEYS: cluster record. ARGV: expected record, new record. Returns 1 when written, 0 when the
 * record changed or is gone.
 */
export const REPLACE_CLUSTER_IF = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`;
