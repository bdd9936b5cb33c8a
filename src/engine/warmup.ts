import type { SourceWarmupRecord, WarmupReason } from '../model/service-status.js';

/**
 * The source warm-up as pure decisions. A registry that comes back after an outage, or restarts
 * empty, refills as its clients renew, re-register or reconnect (Eureka within a renew interval,
 * Nacos by beats and reconnects, ZooKeeper session by session): a read right after it is partial,
 * and believing it would remove copies of instances that are merely not back yet. So, like
 * Eureka's self-preservation and consul-k8s's initial sync, removals from a source cluster wait
 * for a warm-up after
 * - an outage: a reconcile could not reach or read the cluster; the warm-up starts when it is read
 *   again (whichever process reads it first), and lasts the cluster's warm-up;
 * - a drop: reads of the cluster's services found fewer than half of the instances their previous
 *   reads found (none included), and more than {@link WARMUP_DROP_INSTANCES} instances went so
 *   within one warm-up's time, counted across services (a registry that restarted empty shows
 *   every service empty or nearly; one small service scaling down does not count). The warm-up
 *   then starts for the whole cluster, so that services refilling less sharply are covered too.
 * Additions and updates go through at once; only removals wait. The record is kept in Redis per
 * source cluster (see `SourceWarmups`), so every replica of every shard decides the same. No clock,
 * store or logger here: the reconciler passes `now` and the record.
 *
 * Deliberately left out: extending a warm-up by a drop met during it (a source that keeps dropping
 * would then hold removals for ever; an outage during it does start a new one), and watching the
 * registries' own connection events (each kind would report them differently; a failed read and a
 * drop are what every kind shows).
 */

/** More instances than this, gone in sharp drops within a warm-up's time, start a warm-up (the mass-deletion guard's `minCopies` default). */
export const WARMUP_DROP_INSTANCES = 4;

/** What happened that a source's warm-up record must know: a failed read, a read that went through, one that dropped sharply. */
export type WarmupEvent = { kind: 'down' } | { kind: 'up' } | { kind: 'drop'; service: string; lost: number };

/** Whether a read of `read` instances after one of `known` is a sharp drop: fewer than half of them (none included). */
export function sharpDrop(read: number, known: number): boolean {
  return known > 0 && read * 2 < known;
}

/**
 * The record after `event` at `now`, with the cluster's warm-up `warmupMs`: a failed read marks the
 * start of an outage (unless one is marked); a read that goes through ends a marked outage and
 * starts its warm-up; a sharp drop does too, or, with no outage marked and no warm-up under way,
 * is counted (per service, its largest within the last `warmupMs`), and starts a warm-up once the
 * count passes {@link WARMUP_DROP_INSTANCES}. The Redis script of `SourceWarmups` does the same,
 * atomically.
 */
export function nextWarmup(record: SourceWarmupRecord, event: WarmupEvent, now: number, warmupMs: number): SourceWarmupRecord {
  if (event.kind === 'down') return record.down === undefined ? { ...record, down: now } : record;
  if (record.down !== undefined) return { since: now, until: now + warmupMs, reason: 'outage' };
  if (event.kind === 'up' || (record.until !== undefined && record.until > now)) return record;
  const drops: Record<string, [number, number]> = {};
  for (const [service, [at, lost]] of Object.entries(record.drops ?? {})) if (at <= now && now - at < warmupMs) drops[service] = [at, lost];
  drops[event.service] = [now, Math.max(event.lost, drops[event.service]?.[1] ?? 0)];
  const lost = Object.values(drops).reduce((sum, [, n]) => sum + n, 0);
  if (lost > WARMUP_DROP_INSTANCES) return { since: now, until: now + warmupMs, reason: 'drop' };
  return { drops };
}

/** What {@link warmupGuard} decided: removals proceed, or wait until `until` (ms), with a reconcile due then. */
export type WarmupVerdict = { verdict: 'proceed' } | { verdict: 'hold'; reason: WarmupReason; since: number; until: number; requeueAfterMs: number };

/**
 * Whether a read's removals wait for the source's warm-up: while the record's warm-up lasts, but no
 * longer than the cluster's warm-up now is from its start (a warm-up shortened, or turned off with
 * 0, applies at once) nor from `now` (a start recorded by a clock ahead of this one). A record still
 * marking an outage (a read went through, but the record was not told) holds as a warm-up from now.
 */
export function warmupGuard(record: SourceWarmupRecord, now: number, warmupMs: number): WarmupVerdict {
  if (warmupMs <= 0) return { verdict: 'proceed' };
  const started = record.down !== undefined ? { since: now, until: now + warmupMs, reason: 'outage' as const } : record;
  if (started.since === undefined || started.until === undefined) return { verdict: 'proceed' };
  const since = Math.min(started.since, now);
  const until = Math.min(started.until, since + warmupMs, now + warmupMs);
  if (until <= now) return { verdict: 'proceed' };
  return { verdict: 'hold', reason: started.reason ?? 'drop', since, until, requeueAfterMs: until - now + 10 };
}
