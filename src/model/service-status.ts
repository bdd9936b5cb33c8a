import type { HeldDeletion, ServiceKey } from './types.js';

/**
 * What stopped or limited the last reconcile of a service, by cause. Stable strings: the dashboard
 * and the cluster reachability view read these, never the message text.
 * - `cluster_unavailable`: the cluster is unknown, of a kind this build lacks, or its adapter
 *   cannot be built from its settings;
 * - `source_unreadable`, `destination_unreadable`, `destination_unwritable`: a registry call failed;
 * - `write_refused`: the destination refuses the write for good (an object regsync does not own is
 *   in the way); retried at the next full sync, not at once;
 * - `over_instance_limit`: the source lists more instances than the task's `maxInstances`;
 * - `empty_source_held`: the source suddenly lists nothing; the copies are kept until confirmed;
 * - `mass_deletion_held`: too many copies would go within the guard's window (see `held`);
 * - `source_warming_up`: the source is warming up after an outage or a sharp drop; its removals
 *   wait until the warm-up ends (see `warmup`), additions and updates go through;
 * - `address_conflict`: some copies were not written: their address belongs to another owner;
 * - `source_skipped`: the source had entries it could not read as instances (each named).
 */
export type ProblemCode =
  | 'cluster_unavailable'
  | 'source_unreadable'
  | 'destination_unreadable'
  | 'destination_unwritable'
  | 'write_refused'
  | 'over_instance_limit'
  | 'empty_source_held'
  | 'mass_deletion_held'
  | 'source_warming_up'
  | 'address_conflict'
  | 'source_skipped';

/** Every {@link ProblemCode}, for schemas and documentation. */
export const PROBLEM_CODES: readonly ProblemCode[] = [
  'cluster_unavailable',
  'source_unreadable',
  'destination_unreadable',
  'destination_unwritable',
  'write_refused',
  'over_instance_limit',
  'empty_source_held',
  'mass_deletion_held',
  'source_warming_up',
  'address_conflict',
  'source_skipped',
];

/** One problem of a service sync: its cause, which side and cluster it concerns, and a line for a human. */
export interface Problem {
  code: ProblemCode;
  side: 'source' | 'destination';
  cluster: string;
  message: string;
  /** The stable code of the registry error behind it (`nacos-auth-failed`, `kubernetes-timeout`), where it had one. */
  cause?: string | undefined;
}

/**
 * Why a cluster could not be reached, from a problem that says it was not ({@link isUnreached}):
 * `auth_failed` (credentials refused: the cause names auth, or the registry answered 401/403),
 * `not_connected` (the adapter has no usable connection or cache yet: closed, not ready),
 * `unreachable` (no answer: refused, reset, timed out), else `error`.
 */
export type ReachFailure = 'auth_failed' | 'not_connected' | 'unreachable' | 'error';

export function reachFailureOf(problem: Problem): ReachFailure {
  const cause = problem.cause ?? '';
  if (/auth/.test(cause) || /\b(?:401|403)\b|unauthori[sz]ed|forbidden|wrong password|authentication/i.test(problem.message)) return 'auth_failed';
  if (/-(?:not-ready|closed)$/.test(cause)) return 'not_connected';
  if (/-(?:unreachable|unavailable|timeout)$/.test(cause)) return 'unreachable';
  return 'error';
}

/**
 * What stops or limits a whole task, by cause:
 * - `source_unlisted`: the source's services (or its adapter) could not be had; the task starts
 *   or re-lists at its next full sync;
 * - `services_left_out`: some services are not synced (over `maxServices`, or mapped onto a name
 *   another one takes);
 * - `task_unstartable`: the task itself cannot run as stored (a rule that cannot be compiled).
 */
export type TaskProblemCode = 'source_unlisted' | 'services_left_out' | 'task_unstartable';

/** The task-level problem: its cause, the cluster it concerns when one does, and a line for a human. */
export interface TaskProblem {
  code: TaskProblemCode;
  cluster?: string | undefined;
  message: string;
}

/** Problem codes that mean a cluster could not be reached (read, written, or even connected to). */
const UNREACHED: ReadonlySet<ProblemCode> = new Set(['cluster_unavailable', 'source_unreadable', 'destination_unreadable', 'destination_unwritable']);

/** Whether a problem says that its cluster could not be reached. */
export function isUnreached(problem: Problem): boolean {
  return UNREACHED.has(problem.code);
}

/** The one-line text of a list of problems (the status' `lastError`); null when there are none. */
export function problemsText(problems: readonly Problem[]): string | null {
  return problems.length === 0 ? null : problems.map((p) => p.message).join('; ');
}

/**
 * What the engine last saw of one service of a task: instance counts on both sides, when the last
 * reconcile finished, how far behind the destination was, and what went wrong. The one status
 * type: the engine writes it, the store keeps it, the API shows it.
 *
 * Deliberately left out: history. Only the latest state is kept; trends belong to metrics.
 */
export interface ServiceStatus {
  service: ServiceKey;
  /** Instances the source held at the last reconcile that read it. */
  sourceInstances: number;
  /** Instances of this task the destination held after the last reconcile. */
  destinationInstances: number;
  /** ISO-8601 time of the last successful reconcile; null before the first one. */
  lastSyncAt: string | null;
  /** Time from the source change to the destination write of the last reconcile; null when unknown. */
  lagMs: number | null;
  /** The text of {@link problems}; null once a reconcile succeeds without any. */
  lastError: string | null;
  /** What the last reconcile reported, by cause; absent in records written before it existed. */
  problems?: Problem[] | undefined;
  /**
   * Digest of the source instances the last reconcile read (`instancesDigest`); a new shard leader
   * compares its own first read with it to find the services that changed while nobody watched.
   * Absent in records written before it existed.
   */
  sourceDigest?: string | undefined;
  /** A mass deletion held back until confirmed; null or absent: none. */
  held?: HeldDeletion | null | undefined;
  /** Removals held back while the source warms up (see {@link WarmupHold}); null or absent: none. */
  warmup?: WarmupHold | null | undefined;
  /**
   * Why source instances have no copy, by reason, counting only reasons that apply (absent: all
   * were copied): the gap between `sourceInstances` and `destinationInstances`, explained.
   */
  skipped?: SkippedCounts | undefined;
}

/**
 * Source instances the last reconcile did not copy, by reason: `marked` (the instance already
 * passed through the destination: a loop), `foreign` (a copy another sync tool made), `unhealthy`,
 * `disabled`, `conflicting` (its address is taken in the destination by an instance the task does
 * not own).
 */
export interface SkippedCounts {
  marked?: number | undefined;
  foreign?: number | undefined;
  unhealthy?: number | undefined;
  disabled?: number | undefined;
  conflicting?: number | undefined;
}

/**
 * What the reconcile's guards remember of a service between reads, kept in Redis beside the
 * service's status so that whichever replica reads next decides the same (see `src/engine/guards.ts`).
 */
export interface GuardState {
  /** When a read first found the source empty after it had listed instances (ms since the epoch). */
  emptySince?: number | undefined;
  /**
   * Copy counts met by reconciles within the mass-deletion window, oldest first, as `[ms, copies]`
   * pairs with decreasing counts (a sliding maximum: the first entry is the most copies within
   * the window). Empty or absent: no removal within the window.
   */
  copies?: Array<[number, number]> | undefined;
}

/**
 * Why a source cluster is warming up: `outage` (a reconcile could not reach or read it; the warm-up
 * starts when it is read again), `drop` (a read of a service found fewer than half of the instances
 * the previous read found: a registry refilling after a restart).
 */
export type WarmupReason = 'outage' | 'drop';

/**
 * What Redis holds of one source cluster's warm-up (`<p>:source-warmup:<cluster>`), the same for
 * every replica of every shard: since when it has been unreachable (`down`, while no read
 * succeeded since), or the warm-up that started when it came back or dropped (ms since the epoch).
 */
export interface SourceWarmupRecord {
  /** The first failed read of an outage not yet over (no read succeeded since). */
  down?: number | undefined;
  /** When the warm-up started, and when it ends as it was started (the cluster's warm-up then). */
  since?: number | undefined;
  until?: number | undefined;
  reason?: WarmupReason | undefined;
  /**
   * Sharp drops counted towards a warm-up not yet started: by source service (`namespace/group/name`),
   * when its latest drop was read and the most instances it lost within the warm-up's time.
   */
  drops?: Record<string, [number, number]> | undefined;
}

/** Removals of a service sync held while its source warms up, as its status shows them. */
export interface WarmupHold {
  /** The source cluster warming up. */
  cluster: string;
  reason: WarmupReason;
  /** When the warm-up started and when it ends (ISO times): the held removals are applied then. */
  since: string;
  until: string;
  /** Copies the reconcile would have removed. */
  removes: number;
}
