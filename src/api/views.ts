import { createHash } from 'node:crypto';
import { serviceKeyString, type ClusterSpec, type HeldDeletion, type Problem, type SkippedCounts, type TaskSpec, type WarmupHold } from '../model/index.js';
import { mapService } from '../model/task-rules.js';
import type { ServiceStatus } from '../store/index.js';

/** A cluster as the API shows it: the password is never shown, only whether there is one. */
export interface ClusterView {
  id: string;
  kind: ClusterSpec['kind'];
  endpoints: string[];
  namespace?: string;
  username?: string;
  hasPassword: boolean;
  labels: Record<string, string>;
  options: Record<string, unknown>;
}

/** A task's state as shown: `error` is a running task whose last attempt failed somewhere. */
export type TaskViewState = 'running' | 'paused' | 'error';

/** A task as lists and actions show it. */
export interface TaskView {
  id: string;
  source: string;
  destination: string;
  service: string;
  group: string;
  namespace: string;
  options: TaskSpec['options'];
  state: TaskViewState;
  createdAt: string;
}

/** One service's status as shown; `service` is `namespace/group/name`. */
export interface ServiceStatusView {
  service: string;
  sourceInstances: number;
  destinationInstances: number;
  lastSyncAt: string | null;
  lagMs: number | null;
  lastError: string | null;
  /** What the last reconcile reported, by cause (`lastError` is their text); secrets masked. */
  problems: Problem[];
  /** Where the copies go (`namespace/group/name`), when the task maps names. */
  destination?: string;
  /** A mass deletion held back until confirmed (with the copies Release would remove), or null. */
  held: HeldDeletion | null;
  /** Removals held while the source warms up (after an outage or a sharp drop), until when; absent: none. */
  warmup?: WarmupHold;
  /** Why source instances have no copy, by reason (absent: every one was copied). */
  skipped?: SkippedCounts;
}

/** A task with its status, as `GET /api/v1/tasks/:id` shows it. */
export interface TaskDetailView extends TaskView {
  status: { error: string | null; services: ServiceStatusView[] };
}

/** Shows a cluster without its password. */
export function clusterView(spec: ClusterSpec): ClusterView {
  const view: ClusterView = {
    id: spec.id,
    kind: spec.kind,
    endpoints: spec.endpoints,
    hasPassword: spec.password !== undefined,
    labels: spec.labels,
    options: spec.options,
  };
  if (spec.namespace !== undefined) view.namespace = spec.namespace;
  if (spec.username !== undefined) view.username = spec.username;
  return view;
}

/**
 * Shows a task. `failing` says whether the task has a task error or a service whose last reconcile
 * failed; it only matters while the task runs (a paused task is `paused`, whatever it last saw).
 */
export function taskView(spec: TaskSpec, failing: boolean): TaskView {
  return {
    id: spec.id,
    source: spec.source,
    destination: spec.destination,
    service: spec.service,
    group: spec.group,
    namespace: spec.namespace,
    options: spec.options,
    state: spec.state === 'paused' ? 'paused' : failing ? 'error' : 'running',
    createdAt: spec.createdAt,
  };
}

/** Whether a task error or any service status reports a failure. */
export function isFailing(taskError: string | null, statuses: readonly ServiceStatus[]): boolean {
  return taskError !== null || statuses.some((s) => s.lastError !== null);
}

/**
 * Shows a task with its status. Error messages come from the engine, which quotes what registries
 * answered; `secrets` (the passwords of the task's clusters) are masked in them, in case a registry
 * or a client library echoed one.
 */
export function taskDetailView(
  spec: TaskSpec,
  taskError: string | null,
  statuses: readonly ServiceStatus[],
  secrets: readonly string[],
): TaskDetailView {
  return {
    ...taskView(spec, isFailing(taskError, statuses)),
    status: {
      error: taskError === null ? null : maskSecrets(taskError, secrets),
      services: statuses.map((s) => ({
        service: serviceKeyString(s.service),
        sourceInstances: s.sourceInstances,
        destinationInstances: s.destinationInstances,
        lastSyncAt: s.lastSyncAt,
        lagMs: s.lagMs,
        lastError: s.lastError === null ? null : maskSecrets(s.lastError, secrets),
        problems: (s.problems ?? []).map((p) => ({ ...p, message: maskSecrets(p.message, secrets) })),
        ...(spec.options.mapping ? { destination: serviceKeyString(mapService(s.service, spec.options.mapping)) } : {}),
        held: s.held ?? null,
        ...(s.warmup ? { warmup: s.warmup } : {}),
        ...(s.skipped !== undefined ? { skipped: s.skipped } : {}),
      })),
    },
  };
}

/** The mask that replaces a secret in text shown to clients. */
export const SECRET_MASK = '********';

/** Replaces every occurrence of each non-empty secret in `text` with {@link SECRET_MASK}. */
export function maskSecrets(text: string, secrets: readonly (string | undefined)[]): string {
  let masked = text;
  // Longest first, so that a password containing another one is masked whole.
  const sorted = secrets.filter((s): s is string => s !== undefined && s !== '').sort((a, b) => b.length - a.length);
  for (const secret of sorted) masked = masked.split(secret).join(SECRET_MASK);
  return masked;
}

/**
 * The id of a task created without one: `t-` and the first 12 hex digits of the SHA-256 of
 * `source|destination|namespace|group|service`. The same selector always gets the same id, so
 * posting the same task twice answers `task_exists` instead of creating a twin.
 */
export function defaultTaskId(s: Pick<TaskSpec, 'source' | 'destination' | 'namespace' | 'group' | 'service'>): string {
  const digest = createHash('sha256')
    .update([s.source, s.destination, s.namespace, s.group, s.service].join('|'))
    .digest('hex');
  return `t-${digest.slice(0, 12)}`;
}
