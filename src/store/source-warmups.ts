import type { Redis } from 'ioredis';
import type { SourceWarmupRecord } from '../model/service-status.js';
import { evalScript } from '../util/redis-script.js';
import { redisKeys } from '../util/redis-keys.js';

/** What a source's warm-up record is told (the engine's `WarmupEvent`). */
export type SourceWarmupEvent = 'down' | 'up' | 'drop';

/** How long a marked outage is kept after its last failed read: one not told its end lapses then. */
const DOWN_TTL_MS = 24 * 3_600_000;
/** How long a warm-up record is kept after its end (then it is gone, and nothing is held). */
const ENDED_TTL_MS = 60_000;

/**
 * Applies one event to a source's warm-up record atomically (the same transitions as the engine's
 * pure `nextWarmup`): `down` marks an outage unless one is marked; `up` ends a marked outage and
 * starts its warm-up; `drop` does too, or starts a warm-up of its own when no outage is marked and
 * none is under way. KEYS: the record. ARGV: event, now (ms), warm-up (ms), down TTL, ended TTL.
 * Returns the record (JSON), as it is after the event.
 */
const NOTE_WARMUP = `
local raw = redis.call('GET', KEYS[1])
local rec = {}
if raw then rec = cjson.decode(raw) end
local now = tonumber(ARGV[2])
local ms = tonumber(ARGV[3])
local changed = false
if ARGV[1] == 'down' then
  if rec.down == nil then rec.down = now; changed = true end
  if changed then redis.call('SET', KEYS[1], cjson.encode(rec), 'PX', tonumber(ARGV[4])) else redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4])) end
  return cjson.encode(rec)
end
if rec.down ~= nil then
  rec = { since = now, ['until'] = now + ms, reason = 'outage' }
  changed = true
elseif ARGV[1] == 'drop' and (rec['until'] == nil or rec['until'] <= now) then
  rec = { since = now, ['until'] = now + ms, reason = 'drop' }
  changed = true
end
if changed then redis.call('SET', KEYS[1], cjson.encode(rec), 'PX', ms + tonumber(ARGV[5])) end
if raw == nil and not changed then return '{}' end
return cjson.encode(rec)
`;

/**
 * The warm-up of each source cluster, in Redis (`<p>:source-warmup:<cluster>`, JSON), so that
 * every replica of every shard holds removals from a warming source alike, whichever process saw
 * the outage or the drop (see `src/engine/warmup.ts`). One script call per event; a reconcile
 * tells it only when it read the source after failing to, failed to read it, or plans removals.
 */
export class SourceWarmups {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /** Applies `event` at `now` for a cluster whose warm-up is `warmupMs`; answers the record after it. */
  async note(clusterId: string, event: SourceWarmupEvent, now: number, warmupMs: number): Promise<SourceWarmupRecord> {
    const raw = await evalScript(this.redis, NOTE_WARMUP, 1, redisKeys.sourceWarmup(this.prefix, clusterId), event, now, warmupMs, DOWN_TTL_MS, ENDED_TTL_MS);
    return parseRecord(String(raw));
  }

  /** The record as it is (empty: no outage marked, no warm-up). */
  async get(clusterId: string): Promise<SourceWarmupRecord> {
    const raw = await this.redis.get(redisKeys.sourceWarmup(this.prefix, clusterId));
    return raw === null ? {} : parseRecord(raw);
  }
}

/** Reads a stored record, keeping only numbers and known reasons (anything else counts as absent). */
function parseRecord(raw: string): SourceWarmupRecord {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return {};
  }
  if (typeof value !== 'object' || value === null) return {};
  const v = value as Record<string, unknown>;
  const num = (x: unknown): number | undefined => (typeof x === 'number' && Number.isFinite(x) ? x : undefined);
  const out: SourceWarmupRecord = {};
  const down = num(v.down);
  const since = num(v.since);
  const until = num(v.until);
  if (down !== undefined) out.down = down;
  if (since !== undefined && until !== undefined) {
    out.since = since;
    out.until = until;
    out.reason = v.reason === 'outage' ? 'outage' : 'drop';
  }
  return out;
}
