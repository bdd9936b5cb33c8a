import type { ClusterSpec, TaskSpec } from '../model/index.js';
import type { GuardState, ServiceStatus } from '../model/service-status.js';
import { StoreError } from './store-error.js';

/**
 * Shape checks for what comes back from Redis. They are deliberately shallow: they catch a record
 * that is not ours (hand edits, another program, a truncated value) so that it fails loudly at the
 * store, naming its key, instead of as an `undefined` deep in the engine. They do not repeat the
 * API's input rules (id patterns, endpoint syntax).
 */

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isOptionalString(v: unknown): boolean {
  return v === undefined || typeof v === 'string';
}

function isStringRecord(v: unknown): v is Record<string, string> {
  return isObject(v) && Object.values(v).every((x) => typeof x === 'string');
}

function isNullableNumber(v: unknown): boolean {
  return v === null || (typeof v === 'number' && Number.isFinite(v));
}

function isNullableString(v: unknown): boolean {
  return v === null || typeof v === 'string';
}

/** Whether a parsed value has the shape of a {@link ClusterSpec}. */
export function isClusterSpec(v: unknown): v is ClusterSpec {
  return (
    isObject(v) &&
    typeof v.id === 'string' &&
    // Any name: a kind this build does not serve is reported by the adapter pool, not hidden.
    typeof v.kind === 'string' &&
    Array.isArray(v.endpoints) &&
    v.endpoints.every((e) => typeof e === 'string') &&
    isOptionalString(v.namespace) &&
    isOptionalString(v.username) &&
    isOptionalString(v.password) &&
    isStringRecord(v.labels) &&
    isObject(v.options)
  );
}

/** Whether a parsed value has the shape of a {@link TaskSpec}. */
export function isTaskSpec(v: unknown): v is TaskSpec {
  return (
    isObject(v) &&
    typeof v.id === 'string' &&
    typeof v.source === 'string' &&
    typeof v.destination === 'string' &&
    typeof v.service === 'string' &&
    typeof v.group === 'string' &&
    typeof v.namespace === 'string' &&
    isObject(v.options) &&
    (v.options.fullSyncIntervalMs === undefined || typeof v.options.fullSyncIntervalMs === 'number') &&
    (v.options.verifyIntervalMs === undefined || typeof v.options.verifyIntervalMs === 'number') &&
    (v.options.labels === undefined || (Array.isArray(v.options.labels) && v.options.labels.every((l) => typeof l === 'string'))) &&
    (v.options.labelsOverride === undefined || typeof v.options.labelsOverride === 'boolean') &&
    (v.state === 'running' || v.state === 'paused') &&
    typeof v.createdAt === 'string'
  );
}

/** Whether a parsed value has the shape of a {@link ServiceStatus}. */
/** What the guards remember: an optional time and an optional list of `[ms, copies]` pairs. */
export function isGuardState(v: unknown): v is GuardState {
  return (
    isObject(v) &&
    (v.emptySince === undefined || typeof v.emptySince === 'number') &&
    (v.copies === undefined || (Array.isArray(v.copies) && v.copies.every((e) => Array.isArray(e) && e.length === 2 && e.every((n) => typeof n === 'number'))))
  );
}

export function isServiceStatus(v: unknown): v is ServiceStatus {
  return (
    isObject(v) &&
    isObject(v.service) &&
    typeof v.service.namespace === 'string' &&
    typeof v.service.group === 'string' &&
    typeof v.service.name === 'string' &&
    typeof v.sourceInstances === 'number' &&
    typeof v.destinationInstances === 'number' &&
    isNullableString(v.lastSyncAt) &&
    isNullableNumber(v.lagMs) &&
    isNullableString(v.lastError) &&
    (v.sourceDigest === undefined || typeof v.sourceDigest === 'string') &&
    (v.problems === undefined || (Array.isArray(v.problems) && v.problems.every((p) => isObject(p) && typeof p.code === 'string' && typeof p.message === 'string'))) &&
    (v.held === undefined || v.held === null || (isObject(v.held) && typeof v.held.removes === 'number' && typeof v.held.since === 'string')) &&
    (v.warmup === undefined || v.warmup === null || (isObject(v.warmup) && typeof v.warmup.until === 'string' && typeof v.warmup.removes === 'number'))
  );
}

/**
 * Parses one stored JSON value and checks its shape; throws a `corrupt_record` {@link StoreError}
 * naming `key` otherwise. `what` names the record kind in the message.
 */
export function parseRecord<T>(key: string, raw: string, what: string, check: (v: unknown) => v is T): T {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    throw new StoreError('corrupt_record', key, `${key} does not hold valid JSON (expected a ${what})`, {
      cause: error,
    });
  }
  if (!check(value)) throw new StoreError('corrupt_record', key, `${key} does not hold a valid ${what}`);
  return value;
}

/** Code-point order: the same on every machine and locale, unlike `localeCompare`. */
export function compareStrings(a: string, b: string): number {
  if (a < b) return -1;
  return a > b ? 1 : 0;
}
