import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { RegistryAdapter } from '../model/adapter.js';
import {
  DEFAULT_MASS_DELETION_MIN_COPIES,
  DEFAULT_MASS_DELETION_PERCENT,
  DEFAULT_MAX_INSTANCES,
  MARK_TASK,
  instanceId,
  instancesDigest,
  parseServiceSyncKey,
  serviceKeyString,
  type ClusterSpec,
  type HeldDeletion,
  type Instance,
  type ServiceKey,
  type TaskSpec,
} from '../model/types.js';
import type { AdapterPool } from './adapter-pool.js';
import type { HeartbeatScheduler } from './heartbeat-scheduler.js';
import type { LiveSets } from './live-sets.js';
import { NOOP_OBSERVER, type EngineObserver, type ReconcileObservation, type TaskEventKind } from './observer.js';
import type { SourceAddresses } from './source-addresses.js';
import { diff, transform } from './transform.js';
import { mapService, metadataFilter } from '../model/task-rules.js';

/** Status of one service sync, as the API shows it. */
export interface ServiceSyncStatus {
  service: ServiceKey;
  sourceInstances: number;
  destinationInstances: number;
  lastSyncAt: string | null;
  lagMs: number | null;
  lastError: string | null;
  /** Digest of the source instances the last reconcile read (see `instancesDigest`). */
  sourceDigest?: string | undefined;
  /** A mass deletion the guard holds back (see the task option `massDeletionPercent`). */
  held?: HeldDeletion | null | undefined;
}


/** The store operations the engine uses. */
export interface EngineStore {
  getTask(id: string): Promise<TaskSpec | undefined>;
  getCluster(id: string): Promise<ClusterSpec | undefined>;
  listTasks(): Promise<TaskSpec[]>;
  tasksUsingCluster(clusterId: string): Promise<TaskSpec[]>;
  putServiceStatus(taskId: string, status: ServiceSyncStatus): Promise<void>;
  listServiceStatus(taskId: string): Promise<ServiceSyncStatus[]>;
  getServiceStatus(taskId: string, service: ServiceKey): Promise<ServiceSyncStatus | undefined>;
  deleteServiceStatus(taskId: string, service: ServiceKey): Promise<void>;
  setTaskError(taskId: string, message: string | null): Promise<void>;
  /** Takes (reads and clears) an operator's release of a held mass deletion. */
  takeRelease(taskId: string, service: ServiceKey): Promise<boolean>;
}

/** What one reconcile did. */
export type ReconcileOutcome =
  | { kind: 'synced'; upserts: number; removes: number; conflicts: number }
  | { kind: 'held'; reason: string }
  | { kind: 'refused'; reason: string }
  | { kind: 'inactive' };

export interface ReconcilerOptions {
  store: EngineStore;
  adapters: AdapterPool;
  heartbeats: HeartbeatScheduler;
  logger: Logger;
  /**
   * The task as this process runs it, or undefined when it does not run here (paused, deleted,
   * unknown). The engine keeps it current (the API tells it of every change), so a reconcile needs
   * no store read to learn it. Asked again before beats start, so a task paused meanwhile never beats.
   */
  activeTask: (taskId: string) => TaskSpec | undefined;
  /** Asks for another reconcile of `key` after `delayMs` (used to confirm a drop to empty). */
  requeue: (key: string, delayMs: number) => Promise<void>;
  /** A drop to zero source instances is applied only when still empty this long after first seen. Default 3 s. */
  confirmEmptyMs?: number;
  /** The shard of a service sync key (default: 0). */
  shardOf?: (key: string) => number;
  /** Whether this process leads a shard, i.e. beats its copies (default: yes). */
  leads?: (shard: number) => boolean;
  /** Where the copies to beat are recorded for the shard's leader (several processes). */
  liveSets?: LiveSets;
  /** The CMDB's labels of an IP, stamped on copies per the task's `labels` options; none when absent. */
  cmdb?: { labelsOf(ip: string): Readonly<Record<string, string>> } | undefined;
  /** Records which addresses each service sync read from its source (for CMDB changes). */
  sourceAddresses?: SourceAddresses | undefined;
  /**
   * Whether the service sync still belongs to its task (its service is still listed by a `*` task's
   * source). One that no longer does is forgotten once its copies are gone. Default: always.
   */
  stillListed?: (key: string) => boolean;
  /** Told about every reconcile and every event worth an operator's eye (metrics, the task event log). */
  observer?: EngineObserver | undefined;
}

/**
 * Reconciles one service sync: read the source, compute the copies, read what the destination
 * holds, write the difference, keep the ephemeral copies beating, record the status. Reads fresh
 * state every time (level-triggered), so a lost or duplicated trigger cannot make it wrong.
 *
 * Never makes things worse during an outage: a failed read of either side writes nothing and
 * deletes nothing (the job fails and is retried), and a source that suddenly lists nothing is
 * believed only when a second read `confirmEmptyMs` later agrees; meanwhile copies stay and beat.
 */
export class Reconciler {
  private readonly knownSourceCounts = new Map<string, number>();
  private readonly emptySince = new Map<string, number>();
  private readonly inFlight = new Map<string, Set<Promise<unknown>>>();
  private readonly confirmEmptyMs: number;
  private readonly log: Logger;
  private readonly observer: EngineObserver;

  constructor(private readonly opts: ReconcilerOptions) {
    this.confirmEmptyMs = opts.confirmEmptyMs ?? 3_000;
    this.log = opts.logger.child({ component: 'reconciler' });
    this.observer = opts.observer ?? NOOP_OBSERVER;
  }

  /** Seeds the last known source size of a service sync (from stored status after a restart). */
  rememberSourceCount(key: string, count: number): void {
    this.knownSourceCounts.set(key, count);
  }

  /** Runs one reconcile; rejects when a registry could not be read or written (the caller retries). */
  reconcile(key: string, since: number = Date.now()): Promise<ReconcileOutcome> {
    const { taskId } = parseServiceSyncKey(key);
    const started = performance.now();
    const note: RunNote = {};
    const run = this.run(key, since, note);
    const observe = (result: ReconcileObservation['result']) =>
      this.observer.reconciled?.({ taskId, result, durationMs: performance.now() - started, lagMs: note.lagMs });
    run
      .then(
        (outcome) => observe(outcome.kind),
        () => observe('failed'),
      )
      .catch((err: unknown) => this.log.warn({ err }, 'a reconcile observer threw'));
    let set = this.inFlight.get(taskId);
    if (!set) {
      set = new Set();
      this.inFlight.set(taskId, set);
    }
    set.add(run);
    const done = () => {
      set.delete(run);
      if (set.size === 0 && this.inFlight.get(taskId) === set) this.inFlight.delete(taskId);
    };
    run.then(done, done);
    return run;
  }

  /** Resolves once no reconcile of the task runs in this process. */
  async drain(taskId: string): Promise<void> {
    for (;;) {
      const set = this.inFlight.get(taskId);
      if (!set || set.size === 0) return;
      await Promise.allSettled([...set]);
    }
  }

  /** Forgets per-service memory of a task (after it was removed). */
  forget(taskPrefix: string): void {
    for (const key of [...this.knownSourceCounts.keys()]) if (key.startsWith(taskPrefix)) this.knownSourceCounts.delete(key);
    for (const key of [...this.emptySince.keys()]) if (key.startsWith(taskPrefix)) this.emptySince.delete(key);
    this.opts.sourceAddresses?.forget(taskPrefix);
  }

  /**
   * Removes every copy the task wrote into one destination service and stops their beats; used when
   * a task is deleted.
   */
  async removeCopies(task: TaskSpec, service: ServiceKey, key: string): Promise<number> {
    this.opts.heartbeats.clear(key);
    const destination = await this.opts.adapters.get(task.destination);
    const target = mapService(service, task.options.mapping);
    const owned = (await destination.listInstances(target)).filter((i) => i.metadata[MARK_TASK] === task.id);
    if (owned.length > 0) await destination.apply(target, { upsert: [], remove: owned });
    return owned.length;
  }

  private async run(key: string, since: number, note: RunNote): Promise<ReconcileOutcome> {
    const { taskId, service } = parseServiceSyncKey(key);
    const { store, heartbeats } = this.opts;
    const task = this.opts.activeTask(taskId);
    if (!task || task.state !== 'running') {
      heartbeats.clear(key);
      return { kind: 'inactive' };
    }
    // A child logger costs (its bindings are serialized and redacted): made only when something is logged.
    let child: Logger | undefined;
    const log = (): Logger => (child ??= this.log.child({ task: taskId, service: serviceKeyString(service) }));
    let source: RegistryAdapter;
    let destination: RegistryAdapter;
    let sourceInstances: Instance[];
    let destinationInstances: Instance[];
    const target = mapService(service, task.options.mapping);
    let destinationRead: Promise<Instance[]>;
    try {
      source = await this.opts.adapters.get(task.source);
      destination = await this.opts.adapters.get(task.destination);
      // Both sides are read at once: a reconcile waits for the slower read, not for one after the
      // other. A destination read that turns out not to be needed (the source read failed, or
      // holds the reconcile back) is dropped; its failure is reported only when it is used.
      destinationRead = destination.listInstances(target);
      destinationRead.catch(() => undefined);
      sourceInstances = await source.listInstances(service);
    } catch (err) {
      await this.recordError(taskId, service, `cannot read source ${task.source}: ${messageOf(err)}`);
      throw err;
    }

    const maxInstances = task.options.maxInstances ?? DEFAULT_MAX_INSTANCES;
    if (sourceInstances.length > maxInstances) {
      const reason = `source ${task.source} lists ${sourceInstances.length} instances, more than the task's maxInstances (${maxInstances}); the copies are left as they are`;
      log().warn({ instances: sourceInstances.length, maxInstances }, 'service over the instance limit; not synced');
      await this.recordError(taskId, service, reason);
      return { kind: 'refused', reason };
    }

    const known = this.knownSourceCounts.get(key) ?? 0;
    if (sourceInstances.length === 0 && known > 0) {
      const first = this.emptySince.get(key);
      const now = Date.now();
      if (first === undefined || now - first < this.confirmEmptyMs) {
        if (first === undefined) this.emptySince.set(key, now);
        const wait = first === undefined ? this.confirmEmptyMs : this.confirmEmptyMs - (now - first);
        const reason = `source ${task.source} suddenly lists no instances (had ${known}); holding the copies until a read ${this.confirmEmptyMs} ms later confirms it`;
        log().warn({ known }, 'source dropped to zero instances; holding');
        await this.recordError(taskId, service, reason, 'held');
        await this.opts.requeue(key, wait + 10);
        return { kind: 'held', reason };
      }
      log().info({ known }, 'drop to zero confirmed');
    }
    this.emptySince.delete(key);

    try {
      destinationInstances = await destinationRead;
    } catch (err) {
      await this.recordError(taskId, service, `cannot read destination ${task.destination}: ${messageOf(err)}`);
      throw err;
    }

    const destinationSpec = this.opts.adapters.spec(task.destination) ?? (await store.getCluster(task.destination));
    const sourceSpec = this.opts.adapters.spec(task.source) ?? (await store.getCluster(task.source));
    const aliases = destinationSpec?.options.aliases;
    const cmdb = this.opts.cmdb;
    const { desired } = transform(sourceInstances, {
      taskId,
      sourceClusterId: task.source,
      destinationClusterId: task.destination,
      destinationAliases: Array.isArray(aliases) ? aliases.map(String) : [],
      // Nothing to stamp without a CMDB or cluster labels: copies keep the source's metadata as it is.
      labels:
        cmdb || Object.keys(sourceSpec?.labels ?? {}).length > 0
          ? {
              cluster: sourceSpec?.labels ?? {},
              cmdb: cmdb ? (ip) => cmdb.labelsOf(ip) : undefined,
              names: task.options.labels,
              override: task.options.labelsOverride ?? false,
            }
          : undefined,
      metadataKeys: metadataFilter(task.options.mapping),
    });
    this.opts.sourceAddresses?.set(key, sourceInstances.map((i) => i.ip));
    const plan = diff(desired, destinationInstances, taskId);
    const owned = destinationInstances.filter((i) => i.metadata[MARK_TASK] === taskId).length;
    const guard = await this.massDeletionGuard(key, task, service, plan.remove.length, owned, log);
    if (guard.kind === 'hold') {
      // Nothing is removed; the rest of the plan (new and changed copies) still goes out.
      plan.unchanged.push(...plan.remove);
      plan.remove = [];
    }
    if (plan.upsert.length > 0 || plan.remove.length > 0) {
      try {
        await destination.apply(target, { upsert: plan.upsert, remove: plan.remove });
      } catch (err) {
        await this.recordError(taskId, service, `cannot write destination ${task.destination}: ${messageOf(err)}`);
        // Refused for good (an object regsync does not own is in the way): the status says why, and
        // the next full sync tries again; retrying the same plan now cannot succeed.
        if ((err as { retryable?: unknown } | null)?.retryable === false) return { kind: 'refused', reason: messageOf(err) };
        throw err;
      }
      if (this.log.isLevelEnabled('debug')) log().debug({ upserts: plan.upsert.length, removes: plan.remove.length }, 'applied');
    }
    const live = [...plan.upsert, ...plan.unchanged];
    const shard = this.opts.shardOf?.(key) ?? 0;
    const leading = this.opts.leads?.(shard) ?? true;
    if (leading && destination.retain && plan.unchanged.length > 0) {
      try {
        await destination.retain(target, plan.unchanged);
      } catch (err) {
        await this.recordError(taskId, service, `cannot write destination ${task.destination}: ${messageOf(err)}`);
        throw err;
      }
    }
    if (leading && this.opts.activeTask(taskId) !== undefined) heartbeats.set(key, destination, target, live, plan.upsert);
    else heartbeats.clear(key);
    // A lost record is written again by the next reconcile (nothing marks it written meanwhile).
    // Sent together with the status below (one round trip on the auto-pipelined store connection).
    const recorded = this.opts.liveSets?.put(key, shard, live, !leading).catch((err: unknown) => log().warn({ err }, 'cannot record the copies to beat'));
    this.knownSourceCounts.set(key, sourceInstances.length);

    if (sourceInstances.length === 0 && live.length === 0 && this.opts.stillListed?.(key) === false) {
      // The service left a `*` task's source and its copies are gone: forget the service sync.
      await recorded;
      heartbeats.clear(key);
      await this.opts.liveSets?.remove(key, shard);
      await store.deleteServiceStatus(taskId, service);
      this.knownSourceCounts.delete(key);
      this.opts.sourceAddresses?.delete(key);
      log().info('service gone from the source; service sync forgotten');
      this.emit('removed', taskId, service, `service gone from source ${task.source}; ${plan.remove.length} copies removed from ${task.destination} and the service sync forgotten`);
      return { kind: 'synced', upserts: plan.upsert.length, removes: plan.remove.length, conflicts: plan.conflicts.length };
    }

    const issues = source.readIssues?.(service) ?? [];
    const conflictNote =
      plan.conflicts.length > 0
        ? `${plan.conflicts.length} instance(s) not written: their address is taken in ${task.destination} by an instance this task does not own (${plan.conflicts
            .slice(0, 5)
            .map(instanceId)
            .join(', ')})`
        : null;
    if (conflictNote) log().warn({ conflicts: plan.conflicts.length }, 'address conflicts in destination');
    const lagMs = Math.max(0, Date.now() - since);
    const status = store.putServiceStatus(taskId, {
      service,
      sourceInstances: sourceInstances.length,
      destinationInstances: live.length,
      lastSyncAt: new Date().toISOString(),
      lagMs,
      lastError:
        [guard.kind === 'hold' ? guard.note : null, conflictNote, ...issues.map((i) => `skipped in source ${task.source}: ${i}`)].filter((n) => n !== null).join('; ') ||
        null,
      sourceDigest: instancesDigest(sourceInstances),
      held: guard.kind === 'hold' ? guard.held : null,
    });
    await Promise.all([recorded, status]);
    note.lagMs = lagMs;
    if (plan.upsert.length > 0 || plan.remove.length > 0) {
      this.emit(
        'reconciled',
        taskId,
        service,
        `${count(plan.upsert.length, 'copy', 'copies')} written to and ${plan.remove.length} removed from ${task.destination}; ${count(live.length, 'copy', 'copies')} there, ${count(sourceInstances.length, 'source instance', 'source instances')} (lag ${lagMs} ms)`,
      );
    }
    return { kind: 'synced', upserts: plan.upsert.length, removes: plan.remove.length, conflicts: plan.conflicts.length };
  }

  /**
   * The mass-deletion guard: a plan removing more than `massDeletionPercent` of the task's copies of
   * a service (which has more than `massDeletionMinCopies`) is held until confirmed, by a read at
   * least the confirmation delay after it was first held that still plans it (`read`), or by an
   * operator's release (always possible; the only way with `operator`). The time it was first held
   * is kept in the status, so the confirming read may run in any process.
   */
  private async massDeletionGuard(
    key: string,
    task: TaskSpec,
    service: ServiceKey,
    removes: number,
    owned: number,
    log: () => Logger,
  ): Promise<{ kind: 'apply' } | { kind: 'hold'; held: HeldDeletion; note: string }> {
    const percent = task.options.massDeletionPercent ?? DEFAULT_MASS_DELETION_PERCENT;
    const minCopies = task.options.massDeletionMinCopies ?? DEFAULT_MASS_DELETION_MIN_COPIES;
    if (removes === 0 || percent >= 100 || owned <= minCopies || removes * 100 <= owned * percent) return { kind: 'apply' };
    const { store } = this.opts;
    const confirm = task.options.massDeletionConfirm ?? 'read';
    if (await store.takeRelease(task.id, service)) {
      log().warn({ removes, copies: owned }, 'mass deletion released by an operator; applying');
      this.emit('released', task.id, service, `mass deletion released by an operator: removing ${removes} of ${owned} copies`);
      return { kind: 'apply' };
    }
    const previous = (await store.getServiceStatus(task.id, service).catch(() => undefined))?.held ?? undefined;
    const since = previous?.since ?? new Date().toISOString();
    if (confirm === 'read') {
      const age = Date.now() - Date.parse(since);
      if (previous !== undefined && age >= this.confirmEmptyMs) {
        log().warn({ removes, copies: owned, heldMs: age }, 'mass deletion confirmed by a later read; applying');
        this.emit('released', task.id, service, `mass deletion confirmed by a read ${age} ms later: removing ${removes} of ${owned} copies`);
        return { kind: 'apply' };
      }
      await this.opts.requeue(key, Math.max(0, this.confirmEmptyMs - (previous === undefined ? 0 : age)) + 10);
    }
    const share = Math.round((removes * 100) / owned);
    const note =
      `holding a mass deletion: ${removes} of ${owned} copies (${share}%) would be removed; ` +
      (confirm === 'read' ? `applied if a read ${this.confirmEmptyMs} ms later still plans it, or ` : '') +
      `released by POST /api/v1/tasks/${task.id}/release`;
    if (previous === undefined) {
      log().warn({ removes, copies: owned, confirm }, 'holding a mass deletion');
      this.emit('held', task.id, service, note);
    }
    return { kind: 'hold', held: { removes, copies: owned, since, confirm }, note };
  }

  /** Tells the observer of an event worth an operator's eye; an observer that throws never fails the reconcile. */
  private emit(kind: TaskEventKind, taskId: string, service: ServiceKey, message: string): void {
    try {
      this.observer.event?.({ kind, taskId, service: serviceKeyString(service), message });
    } catch (err) {
      this.log.warn({ err }, 'a task event observer threw');
    }
  }

  /**
   * Records a problem in the service's status, and tells the observer as a `kind` event when the
   * status did not already say the same (a failure retried with backoff, or met again at every full
   * sync, is one event, not one per attempt).
   */
  private async recordError(taskId: string, service: ServiceKey, message: string, kind: TaskEventKind = 'error'): Promise<void> {
    const previous = await this.opts.store.getServiceStatus(taskId, service).catch(() => undefined);
    if (previous?.lastError !== message) this.emit(kind, taskId, service, message);
    await this.opts.store
      .putServiceStatus(taskId, {
        service,
        sourceInstances: previous?.sourceInstances ?? 0,
        destinationInstances: previous?.destinationInstances ?? 0,
        lastSyncAt: previous?.lastSyncAt ?? null,
        lagMs: previous?.lagMs ?? null,
        lastError: message,
        sourceDigest: previous?.sourceDigest,
        // A failed read does not confirm nor forget a held deletion.
        held: previous?.held ?? null,
      })
      .catch((err: unknown) => this.log.warn({ err }, 'cannot record status'));
  }
}

/** What a reconcile tells its caller besides the outcome (for the observer). */
interface RunNote {
  /** Lag of the status written, ms (only when one was written after a sync). */
  lagMs?: number;
}

/** `1 copy`, `2 copies`. */
function count(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
