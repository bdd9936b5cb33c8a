/**
 * How one reconcile ended, as metrics count it: the kinds of `ReconcileOutcome`, plus `failed`
 * for a reconcile that rejected (a registry could not be read or written; the job is retried).
 */
export type ReconcileResult = 'synced' | 'held' | 'refused' | 'inactive' | 'failed';

/** What a destination answered to one heartbeat: `failed` when the beat itself threw. */
export type BeatResultKind = 'ok' | 'unknown' | 'failed';

/**
 * What a {@link TaskEvent} tells:
 * - `reconciled`: a reconcile wrote copies or removed some (never a reconcile that changed nothing);
 * - `held`: the mass-deletion guard, the empty-source guard or a source's warm-up started holding removals;
 * - `released`: a held mass deletion was applied (an operator's release or a confirming read);
 * - `error`: a reconcile failed or was refused with a new reason (the same reason again is not repeated);
 * - `removed`: a service left a `*` task's source and its service sync was forgotten;
 * - `task`: a task was created, changed, paused, resumed, resynced or had its copies removed (REST API);
 * - `cluster`: a cluster a task uses was created, changed or deleted (REST API).
 */
export type TaskEventKind = 'reconciled' | 'held' | 'released' | 'error' | 'removed' | 'task' | 'cluster';

/** An event as the engine or the API reports it (see {@link TaskEvent} for the stored form). */
export interface TaskEventInput {
  kind: TaskEventKind;
  /** The task it concerns; absent only for a change of a cluster no task uses. */
  taskId?: string | undefined;
  /** `namespace/group/name` of the source service, for events of one service sync. */
  service?: string | undefined;
  /** The cluster, for `cluster` events. */
  clusterId?: string | undefined;
  /** One line for a human. Never a password or token. */
  message: string;
}

/**
 * One stored task event: what the dashboard lists (`GET /api/v1/tasks/:id/events`) and streams
 * (`GET /api/v1/events`). `id` is the Redis stream entry id (`<ms>-<seq>`), increasing: clients may
 * send the last one they saw as `Last-Event-ID` to resume a stream.
 */
export interface TaskEvent extends TaskEventInput {
  id: string;
  /** ISO 8601 time the event was recorded. */
  at: string;
}

/** What {@link EngineObserver.reconciled} is told about one reconcile. */
export interface ReconcileObservation {
  taskId: string;
  result: ReconcileResult;
  /** Wall time of the reconcile, ms. */
  durationMs: number;
  /**
   * From the change seen or job queued to the status written, ms (the status' `lagMs`); only for
   * `synced` reconciles that wrote a status.
   */
  lagMs?: number | undefined;
}

/**
 * Hooks through which the engine reports what it does, so that metrics and the task event log can
 * follow it without the engine knowing either (the engine never imports prom-client or writes
 * events itself). Every method is optional, called synchronously on the engine's path, and must
 * neither throw nor block: an implementation that does I/O starts it and returns.
 *
 * Deliberately left out: service names or instance addresses as separate fields for metrics
 * (only task and cluster ids are meant as labels; a service appears only in an event's text).
 */
export interface EngineObserver {
  /** A reconcile of one service sync ended (every reconcile, including no-ops and failures). */
  reconciled?(observation: ReconcileObservation): void;
  /** One heartbeat to `clusterId` was answered (or failed). */
  beat?(clusterId: string, result: BeatResultKind): void;
  /** Something an operator should see happened to a task (see {@link TaskEventKind}). */
  event?(event: TaskEventInput): void;
  /**
   * A reconcile of `taskId` reached `clusterId` (read or wrote it), or could not (`reason`: the
   * problem's line); the event log turns the changes into `cluster` events, and the recovery of
   * failed service syncs (`ClusterRecovery`) remembers which service sync (`key`) could not reach it.
   */
  clusterReached?(clusterId: string, reached: boolean, detail: { taskId: string; key?: string | undefined; reason?: string | undefined }): void;
}

/** The observer that ignores everything (the default). */
export const NOOP_OBSERVER: EngineObserver = Object.freeze({});

/** One observer telling each of `observers` in turn; one that throws does not stop the others. */
export function combineObservers(...observers: readonly EngineObserver[]): EngineObserver {
  const each = (call: (o: EngineObserver) => void) => {
    for (const o of observers) {
      try {
        call(o);
      } catch {
        // An observer must not break the engine's path; it logs its own problems.
      }
    }
  };
  return {
    reconciled: (observation) => each((o) => o.reconciled?.(observation)),
    beat: (clusterId, result) => each((o) => o.beat?.(clusterId, result)),
    event: (event) => each((o) => o.event?.(event)),
    clusterReached: (clusterId, reached, detail) => each((o) => o.clusterReached?.(clusterId, reached, detail)),
  };
}
