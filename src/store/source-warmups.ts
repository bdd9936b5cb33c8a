import type { Redis } from 'ioredis';
import type { SourceWarmupRecord } from '../model/service-status.js';
import { evalScript } from '../util/redis-script.js';
import { redisKeys } from '../util/redis-keys.js';

/** What a source's warm-up record is told (the engine's `WarmupEvent`). */
export type SourceWarmupEvent = { kind: 'down' } | { kind: 'up' } | { kind: 'drop'; service: string; lost: number };

/** How long a marked outage is kept after its last failed read: one not told its end lapses then. */
const DOWN_TTL_MS = 24 * 3_600_000;
/** How long a warm-up record is kept after its end (then it is gone, and nothing is held). */
const ENDED_TTL_MS = 60_000;

/**
 * Applies one event to a source's warm-up record atomically (the same transitions as the engine's
 * pure `nextWarmup`): `down` marks an outage unless one is marked; `up` ends a marked outage and
 * starts its warm-up; `drop` does too, or, with no warm-up under way, counts the service's lost
 * instances (its largest drop within the warm-up's time) and starts a warm-up once the count passes
 * the threshold. KEYS: the record. ARGV: event, now (ms), warm-up (ms), down TTL, ended TTL,
 * service, lost, threshold. Returns the record (JSON), as it is after the event.
 */
const NOTE_WARMUP = `
local raw = redis.call('GET', KEYS[1])
local rec = {}
if raw then rec = cjson.decode(raw) end
local now = tonumber(ARGV[2])
local ms = tonumber(ARGV[3])
if ARGV[1] == 'down' then
  if rec.down == nil then
    rec.down = now
    redis.call('SET', KEYS[1], cjson.encode(rec), 'PX', tonumber(ARGV[4]))
  else
    redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
  end
  return cjson.encode(rec)
end
if rec.down ~= nil then
  rec = { since = now, ['until'] = now + ms, reason = 'outage' }
  redis.call('SET', KEYS[1], cjson.encode(rec), 'PX', ms + tonumber(ARGV[5]))
  return cjson.encode(rec)
end
if ARGV[1] == 'up' or (rec['until'] ~= nil and rec['until'] > now) then
  return raw or '{}'
end
local drops = {}
if type(rec.drops) == 'table' then
  for service, d in pairs(rec.drops) do
    if d[1] <= now and now - d[1] < ms then drops[service] = d end
  end
end
local lost = tonumber(ARGV[7])
local before = drops[ARGV[6]]
if before ~= nil and before[2] > lost then lost = before[2] end
drops[ARGV[6]] = { now, lost }
local total = 0
for _, d in pairs(drops) do total = total + d[2] end
if total > tonumber(ARGV[8]) then
  rec = { since = now, ['until'] = now + ms, reason = 'drop' }
  redis.call('SET', KEYS[1], cjson.encode(rec), 'PX', ms + tonumber(ARGV[5]))
else
  rec = { drops = drops }
  redis.call('SET', KEYS[1], cjson.encode(rec), 'PX', ms)
end
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

  /**
   * Applies `event` at `now` for a cluster whose warm-up is `warmupMs`, counting drops towards
   * `dropThreshold` lost instances; answers the record after it.
   */
  async note(clusterId: string, event: SourceWarmupEvent, now: number, warmupMs: number, dropThreshold: number): Promise<SourceWarmupRecord> {
    const [service, lost] = event.kind === 'drop' ? [event.service, event.lost] : ['', 0];
    const key = redisKeys.sourceWarmup(this.prefix, clusterId);
    const raw = await evalScript(this.redis, NOTE_WARMUP, 1, key, event.kind, now, warmupMs, DOWN_TTL_MS, ENDED_TTL_MS, service, lost, dropThreshold);
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
  if (typeof v.drops === 'object' && v.drops !== null && !Array.isArray(v.drops)) {
    const drops: Record<string, [number, number]> = {};
    for (const [service, d] of Object.entries(v.drops as Record<string, unknown>)) {
      if (Array.isArray(d) && num(d[0]) !== undefined && num(d[1]) !== undefined) drops[service] = [d[0] as number, d[1] as number];
    }
    out.drops = drops;
  }
  return out;
}
