import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { RegistryAdapter } from '../model/adapter.js';
import {
  isUnreached,
  problemsText,
  type GuardState,
  type Problem,
  type ServiceStatus,
  type SkippedCounts,
  type SourceWarmupRecord,
  type TaskProblem,
  type WarmupHold,
} from '../model/service-status.js';
import {
  DEFAULT_MASS_DELETION_MIN_COPIES,
  DEFAULT_MASS_DELETION_PERCENT,
  DEFAULT_MASS_DELETION_WINDOW_MS,
  DEFAULT_MAX_INSTANCES,
  MARK_TASK,
  MAX_HELD_ADDRESSES,
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
import { WriteRefusedError } from '../model/write-refused-error.js';
import type { AdapterPool } from './adapter-pool.js';
import { emptySourceGuard, heldDrop, heldShare, instanceLimitGuard, massDeletionGuard, type MassDeletionVerdict } from './guards.js';
import type { HeartbeatScheduler } from './heartbeat-scheduler.js';
import type { LiveSets } from './live-sets.js';
import { NOOP_OBSERVER, type EngineObserver, type ReconcileObservation, type TaskEventKind } from './observer.js';
import type { SourceAddresses } from './source-addresses.js';
import { diff, transform, type SkipReason, type SyncPlan, type TransformResult } from './transform.js';
import { sharpDrop, WARMUP_DROP_INSTANCES, warmupGuard, type WarmupEvent, type WarmupVerdict } from './warmup.js';
import { mapService, metadataFilter } from '../model/task-rules.js';

/** The store operations the engine uses. */
export interface EngineStore {
  getTask(id: string): Promise<TaskSpec | undefined>;
  getCluster(id: string): Promise<ClusterSpec | undefined>;
  listTasks(): Promise<TaskSpec[]>;
  tasksUsingCluster(clusterId: string): Promise<TaskSpec[]>;
  putServiceStatus(taskId: string, status: ServiceStatus): Promise<void>;
  listServiceStatus(taskId: string): Promise<ServiceStatus[]>;
  getServiceStatus(taskId: string, service: ServiceKey): Promise<ServiceStatus | undefined>;
  deleteServiceStatus(taskId: string, service: ServiceKey): Promise<void>;
  /** Sets (or clears, with null) what stops or limits the whole task. */
  setTaskError(taskId: string, problem: TaskProblem | null): Promise<void>;
  /** Takes (reads and clears) an operator's release of a held mass deletion. */
  takeRelease(taskId: string, service: ServiceKey): Promise<boolean>;
  /** What the guards remember of a service between reads (empty when nothing). */
  getGuard(taskId: string, service: ServiceKey): Promise<GuardState>;
  /** Replaces what the guards remember of a service; an empty state forgets it. */
  putGuard(taskId: string, service: ServiceKey, state: GuardState): Promise<void>;
}

/**
 * What one reconcile did. `requeueAfterMs` asks the queue runner for another reconcile of the
 * same service sync that much later (a hold waiting for its confirming read).
 */
export type ReconcileOutcome = (
  | { kind: 'synced'; upserts: number; removes: number; conflicts: number }
  | { kind: 'held'; reason: string }
  | { kind: 'refused'; reason: string }
  | { kind: 'inactive' }
) & { requeueAfterMs?: number };

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
  /**
   * A drop to zero source instances, and a held mass deletion with `confirm: read`, are applied
   * only when a read this long after the first one still agrees. Default 3 s.
   */
  confirmEmptyMs?: number;
  /** The shard of a service sync key (default: 0). */
  shardOf?: (key: string) => number;
  /** Whether this process leads a shard, i.e. beats its copies (default: yes). */
  leads?: (shard: number) => boolean;
  /**
   * Where the live copies are recorded for the other replicas (several processes): for the shard's
   * leader, which beats them, or on connection-bound destinations for every replica, which publishes them.
   */
  liveSets?: LiveSets;
  /**
   * Told of every set this process published for a service sync on a connection-bound destination
   * (by `apply` with `desired`, or `publish`), so that the process withdraws it again with its shard
   * or its task (see `SetPublisher.note`).
   */
  published?: ((key: string, shard: number, destination: RegistryAdapter, target: ServiceKey) => void) | undefined;
  /** The CMDB's labels of an IP, stamped on copies per the task's `labels` options; none when absent. */
  cmdb?: { labelsOf(ip: string): Readonly<Record<string, string>> } | undefined;
  /** Records which addresses each service sync read from its source (for CMDB changes). */
  sourceAddresses?: SourceAddresses | undefined;
  /**
   * Whether the service sync still belongs to its task (a `*` task's source still lists its
   * service, as confirmed in Redis). One that no longer does is forgotten once its copies are
   * gone. Default: always.
   */
  stillListed?: (key: string) => Promise<boolean>;
  /** Told about every reconcile and every event worth an operator's eye (metrics, the task event log). */
  observer?: EngineObserver | undefined;
  /**
   * Where source clusters' warm-ups are kept for every process (Redis: `SourceWarmups`), and how
   * long a cluster's warm-up lasts (ms, from its kind's `warmupSeconds`; 0: none). Without both,
   * sources never warm up (see `./warmup.ts`).
   */
  warmups?: SourceWarmupMarks | undefined;
  warmupOf?: ((spec: ClusterSpec) => number) | undefined;
}

/** The source warm-up records every process shares (see `SourceWarmups` in the store). */
export interface SourceWarmupMarks {
  /** Applies `event` at `now` to a cluster's record (warm-up `warmupMs`); answers the record after it. */
  note(clusterId: string, event: WarmupEvent, now: number, warmupMs: number, dropThreshold: number): Promise<SourceWarmupRecord>;
}

/** One reconcile under way: its service sync, its task as it runs here, and where copies go. */
interface Run {
  key: string;
  taskId: string;
  service: ServiceKey;
  task: TaskSpec;
  target: ServiceKey;
  /** When the change this reconcile stands for was seen (ms), for the lag. */
  since: number;
  /**
   * The status as the previous reconcile left it, by whichever replica: read only where a phase
   * needs it (a guard, a failure), so that a reconcile with nothing to guard reads nothing more.
   */
  previous: () => Promise<ServiceStatus | undefined>;
  /** What the guards remember (read only where a guard needs it, like {@link previous}). */
  guard: () => Promise<GuardState>;
  /** What the guards remember after this run, when a guard changed it; written with the status. */
  nextGuard: GuardState | undefined;
  /** How many instances the source read listed, once it was read. */
  sourceCount?: number;
  /** The source's warm-up record, when this run told it already (a read after a failed one). */
  warmup?: SourceWarmupRecord;
  /** A child logger made on first use (its bindings cost). */
  log: () => Logger;
}

/** The two sides of a run, with the source read and the destination read under way. */
interface Reads {
  source: RegistryAdapter;
  destination: RegistryAdapter;
  /** Whether copies live with this process's connection to the destination (see `RegistryAdapter.connectionBound`). */
  bound: boolean;
  sourceInstances: Instance[];
  /** Read at the same time as the source; awaited only once the guards let the run go on. */
  destinationRead: Promise<Instance[]>;
}

/** The transform and diff of a run, and what the guards decided about it. */
interface Planned {
  plan: SyncPlan;
  deletion: MassDeletionVerdict | undefined;
  /** Source instances not copied, by reason. */
  skipped: SkippedCounts;
  /** The removals a held deletion, or the source's warm-up, holds back. */
  held: Instance[];
  /** The removals the source's warm-up holds back, when it does. */
  warmup: WarmupHold | undefined;
  /** When the warm-up holds removals: a reconcile is due once it ends. */
  warmupRequeueMs?: number;
}

/** Thrown by a phase after it recorded its problem in the status; the reconcile rejects with `cause`. */
class PhaseFailure extends Error {
  override readonly name = 'PhaseFailure';
}

/**
 * Reconciles one service sync in named phases: read both sides, guard (instance limit, empty
 * source, mass deletion), plan (the pure transform and diff), apply, keep alive (retain, beats,
 * live sets), record. Reads fresh state every time (level-triggered), so a lost or duplicated
 * trigger cannot make it wrong. The guards decide from the service's status in Redis, so every
 * replica that runs the next reconcile decides the same.
 *
 * Never makes things worse during an outage: a failed read of either side writes nothing and
 * deletes nothing (the reconcile rejects and the queue retries it), and removals the guards hold
 * stay held until confirmed; meanwhile copies stay and beat. The outcome is data: the queue runner
 * owns retries, requeues, metrics and logging.
 */
export class Reconciler {
  private readonly inFlight = new Map<string, Set<Promise<unknown>>>();
  private readonly confirmEmptyMs: number;
  private readonly log: Logger;
  private readonly observer: EngineObserver;
  /**
   * Source clusters this process failed to read and has not read since: the first read that goes
   * through tells their warm-up record that the outage is over (whichever process tells first).
   */
  private readonly unreachedSources = new Set<string>();

  constructor(private readonly opts: ReconcilerOptions) {
    this.confirmEmptyMs = opts.confirmEmptyMs ?? 3_000;
    this.log = opts.logger.child({ component: 'reconciler' });
    this.observer = opts.observer ?? NOOP_OBSERVER;
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
    const bound = await connectionBound(destination);
    const owned = (await destination.listInstances(target)).filter((i) => i.metadata[MARK_TASK] === task.id);
    if (!bound) {
      if (owned.length > 0) await destination.apply(target, { upsert: [], remove: owned });
      return owned.length;
    }
    // This process's share goes here; the other replicas withdraw theirs as the task stops there.
    if (owned.length > 0) await destination.apply(target, { upsert: [], remove: owned, desired: { owner: key, instances: [] } });
    else await destination.publish?.(target, key, []);
    this.opts.published?.(key, this.opts.shardOf?.(key) ?? 0, destination, target);
    return owned.length;
  }

  private async run(key: string, since: number, note: RunNote): Promise<ReconcileOutcome> {
    const { taskId, service } = parseServiceSyncKey(key);
    const task = this.opts.activeTask(taskId);
    if (!task || task.state !== 'running') {
      this.opts.heartbeats.clear(key);
      return { kind: 'inactive' };
    }
    const { store } = this.opts;
    let child: Logger | undefined;
    const run: Run = {
      key,
      taskId,
      service,
      task,
      target: mapService(service, task.options.mapping),
      since,
      previous: once(() => store.getServiceStatus(taskId, service).catch(() => undefined)),
      guard: once(() => store.getGuard(taskId, service).catch(() => ({}))),
      nextGuard: undefined,
      log: () => (child ??= this.log.child({ task: taskId, service: serviceKeyString(service) })),
    };
    try {
      const reads = await this.read(run);
      const stop = await this.guardSource(run, reads);
      if (stop) return stop;
      const destinationInstances = await this.awaitDestination(run, reads);
      const planned = await this.plan(run, reads, destinationInstances);
      const applied = await this.apply(run, reads, planned.plan);
      const live = await this.keepAlive(run, reads, planned.plan, applied);
      return await this.record(run, reads, planned, live, note);
    } catch (err) {
      if (err instanceof RefusedRun) return { kind: 'refused', reason: err.message };
      if (err instanceof PhaseFailure) throw err.cause;
      throw err;
    }
  }

  /**
   * Phase 1, read: both adapters and both sides at once (a reconcile waits for the slower read, not
   * for one after the other). The destination read is awaited only once the guards let the run go
   * on; its failure is reported only then. Each side's failure names that side: a destination that
   * cannot be built is not a source that cannot be read.
   */
  private async read(run: Run): Promise<Reads> {
    const { task } = run;
    const [source, destination] = await Promise.all([
      this.opts.adapters.get(task.source).catch((err: unknown) => err as Error),
      this.opts.adapters.get(task.destination).catch((err: unknown) => err as Error),
    ]);
    if (source instanceof Error) {
      return this.fail(run, { code: 'cluster_unavailable', side: 'source', cluster: task.source, message: `cannot use source ${task.source}: ${messageOf(source)}` }, source);
    }
    if (destination instanceof Error) {
      const message = `cannot use destination ${task.destination}: ${messageOf(destination)}`;
      return this.fail(run, { code: 'cluster_unavailable', side: 'destination', cluster: task.destination, message }, destination);
    }
    const destinationRead = destination.listInstances(run.target);
    destinationRead.catch(() => undefined);
    let sourceInstances: Instance[];
    try {
      sourceInstances = await source.listInstances(run.service);
    } catch (err) {
      return this.fail(run, { code: 'source_unreadable', side: 'source', cluster: task.source, message: `cannot read source ${task.source}: ${messageOf(err)}` }, err);
    }
    run.sourceCount = sourceInstances.length;
    await this.sourceReadAgain(run);
    let bound: boolean;
    try {
      bound = await connectionBound(destination);
    } catch (err) {
      return this.fail(run, { code: 'destination_unreadable', side: 'destination', cluster: task.destination, message: `cannot read destination ${task.destination}: ${messageOf(err)}` }, err);
    }
    return { source, destination, bound, sourceInstances, destinationRead };
  }

  /**
   * Phase 2, the source's guards: a service over `maxInstances` is refused; a source that suddenly
   * lists nothing is held until a read `confirmEmptyMs` after the first empty one (by any replica:
   * the time is kept in the status) still lists nothing. Answers the outcome when the run stops here.
   */
  private async guardSource(run: Run, reads: Reads): Promise<ReconcileOutcome | undefined> {
    const { task } = run;
    const count = reads.sourceInstances.length;
    const maxInstances = task.options.maxInstances ?? DEFAULT_MAX_INSTANCES;
    const refusal = instanceLimitGuard(count, maxInstances, task.source);
    if (refusal) {
      run.log().warn({ instances: count, maxInstances }, 'service over the instance limit; not synced');
      await this.recordProblem(run, { code: 'over_instance_limit', side: 'source', cluster: task.source, message: refusal.reason });
      return { kind: 'refused', reason: refusal.reason };
    }
    if (count > 0) return undefined;
    const [previous, guard] = await Promise.all([run.previous(), run.guard()]);
    const known = previous?.sourceInstances ?? 0;
    const empty = emptySourceGuard(count, known, firstEmptyRead(guard, previous), Date.now(), this.confirmEmptyMs);
    if (empty.verdict === 'hold') {
      const reason = `source ${task.source} suddenly lists no instances (had ${known}); holding the copies until a read ${this.confirmEmptyMs} ms later confirms it`;
      run.log().warn({ known }, 'source dropped to zero instances; holding');
      const problem: Problem = { code: 'empty_source_held', side: 'source', cluster: task.source, message: reason };
      const first = guard.emptySince !== empty.emptySince;
      await Promise.all([
        first ? this.opts.store.putGuard(run.taskId, run.service, { ...guard, emptySince: empty.emptySince }) : undefined,
        // A registry that restarted empty shows empty services first: its other services' removals wait from now.
        first ? this.noteWarmup(run, { kind: 'drop', service: serviceKeyString(run.service), lost: known }).catch((err: unknown) => run.log().warn({ err }, 'cannot record the source warm-up')) : undefined,
        this.recordProblem(run, problem, 'held'),
      ]);
      return { kind: 'held', reason, requeueAfterMs: empty.requeueAfterMs + 10 };
    }
    if (empty.confirmed) run.log().info({ known }, 'drop to zero confirmed');
    if (guard.emptySince !== undefined) run.nextGuard = withoutEmptySince(guard);
    return undefined;
  }

  /**
   * The destination read started in phase 1; a failure is recorded as the destination's, and the
   * copies of instances the source no longer lists are not registered again by the beats meanwhile.
   */
  private async awaitDestination(run: Run, reads: Reads): Promise<Instance[]> {
    try {
      return await reads.destinationRead;
    } catch (err) {
      const { destination } = run.task;
      this.opts.heartbeats.listedInSource(run.key, new Set(reads.sourceInstances.map((i) => `${i.ip}:${i.port}`)));
      return this.fail(run, { code: 'destination_unreadable', side: 'destination', cluster: destination, message: `cannot read destination ${destination}: ${messageOf(err)}` }, err);
    }
  }

  /**
   * Whether a reconcile of `key` would write nothing now: both sides read (the source as this
   * process reads it, from its subscription where it holds one; the destination afresh), the
   * copies the task wants there compared with those it owns there. Writes and records nothing, so
   * it runs outside the queue (a full sync's verify); any failure answers false, for a reconcile to
   * deal with. A task that does not run here answers true (nothing to check).
   */
  async inSync(key: string): Promise<boolean> {
    const { taskId, service } = parseServiceSyncKey(key);
    const task = this.opts.activeTask(taskId);
    if (!task || task.state !== 'running') return true;
    try {
      const [source, destination] = await Promise.all([this.opts.adapters.get(task.source), this.opts.adapters.get(task.destination)]);
      const [sourceInstances, destinationInstances] = await Promise.all([source.listInstances(service), destination.listInstances(mapService(service, task.options.mapping))]);
      const { desired } = await this.desired(task, sourceInstances, destination);
      const plan = diff(desired, destinationInstances, taskId);
      return plan.upsert.length === 0 && plan.remove.length === 0;
    } catch (err) {
      this.log.debug({ err, key }, 'cannot check a service sync; reconciling it');
      return false;
    }
  }

  /** The copies `task` wants in its destination for these source instances (the pure transform), and what it leaves out. */
  private async desired(task: TaskSpec, sourceInstances: readonly Instance[], destination: RegistryAdapter): Promise<TransformResult> {
    const destinationSpec = this.opts.adapters.spec(task.destination) ?? (await this.opts.store.getCluster(task.destination));
    const sourceSpec = this.opts.adapters.spec(task.source) ?? (await this.opts.store.getCluster(task.source));
    const aliases = destinationSpec?.options.aliases;
    const cmdb = this.opts.cmdb;
    return transform(sourceInstances, {
      taskId: task.id,
      sourceClusterId: task.source,
      destinationClusterId: task.destination,
      destinationAliases: [...(Array.isArray(aliases) ? aliases.map(String) : []), ...(destination.foreignNames ?? [])],
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
  }

  /**
   * Phase 3, plan: the pure transform (ring filter, marks, labels, metadata rules) and diff, then
   * the mass-deletion guard, which may hold the plan's removals (new and changed copies still go out).
   */
  private async plan(run: Run, reads: Reads, destinationInstances: Instance[]): Promise<Planned> {
    const { task, taskId } = run;
    const { desired, skipped } = await this.desired(task, reads.sourceInstances, reads.destination);
    this.opts.sourceAddresses?.set(run.key, reads.sourceInstances.map((i) => i.ip));
    const plan = diff(desired, destinationInstances, taskId);
    const owned = destinationInstances.filter((i) => i.metadata[MARK_TASK] === taskId).length;
    const warming = await this.guardWarmup(run, reads, plan.remove.length);
    // While the source warms up, the mass-deletion guard is not asked: nothing is removed to count.
    const deletion = warming?.verdict === 'hold' ? undefined : await this.guardRemovals(run, plan.remove.length, owned);
    let held: Instance[] = [];
    if (deletion?.verdict === 'hold' || warming?.verdict === 'hold') {
      held = plan.remove;
      plan.unchanged.push(...plan.remove);
      plan.remove = [];
    }
    const warmup: WarmupHold | undefined =
      warming?.verdict === 'hold'
        ? { cluster: task.source, reason: warming.reason, since: new Date(warming.since).toISOString(), until: new Date(warming.until).toISOString(), removes: held.length }
        : undefined;
    return {
      plan,
      deletion,
      skipped: skippedCounts(skipped, plan.conflicts.length),
      held,
      warmup,
      ...(warming?.verdict === 'hold' ? { warmupRequeueMs: warming.requeueAfterMs } : {}),
    };
  }

  /**
   * The source's warm-up (see `./warmup.ts`): a run that would remove copies asks the source's
   * record, telling it of a sharp drop this read shows (fewer than half of the instances the
   * previous read found), and holds the removals while the warm-up lasts. Undefined when there is
   * nothing to hold, or the source does not warm up.
   */
  private async guardWarmup(run: Run, reads: Reads, removes: number): Promise<WarmupVerdict | undefined> {
    if (removes === 0 || !this.opts.warmups) return undefined;
    const warmupMs = await this.warmupMs(run);
    if (warmupMs <= 0) return undefined;
    const previous = await run.previous();
    const known = previous?.sourceInstances ?? 0;
    const read = reads.sourceInstances.length;
    const event: WarmupEvent = sharpDrop(read, known) ? { kind: 'drop', service: serviceKeyString(run.service), lost: known - read } : { kind: 'up' };
    let record: SourceWarmupRecord;
    try {
      record = event.kind === 'up' && run.warmup ? run.warmup : await this.noteWarmup(run, event, warmupMs);
    } catch (err) {
      // Without the record (Redis), the removals cannot be judged: nothing is written, and the queue retries.
      run.log().warn({ err }, 'cannot read the source warm-up; retrying');
      throw err;
    }
    const verdict = warmupGuard(record, Date.now(), warmupMs);
    if (verdict.verdict === 'hold') {
      const since = new Date(verdict.since).toISOString();
      if (previous?.warmup?.since !== since) {
        const message = warmupNote(run.task.source, verdict, removes);
        run.log().warn({ removes, reason: verdict.reason, until: new Date(verdict.until).toISOString() }, 'source warming up; holding removals');
        this.emit('held', run.taskId, run.service, message);
      }
    }
    return verdict;
  }

  /** The source cluster's warm-up, ms (0: none, or no way to tell). */
  private async warmupMs(run: Run): Promise<number> {
    const { warmupOf } = this.opts;
    if (!warmupOf) return 0;
    const spec = this.opts.adapters.spec(run.task.source) ?? (await this.opts.store.getCluster(run.task.source).catch(() => undefined));
    return spec ? warmupOf(spec) : 0;
  }

  /** Tells the source's warm-up record of `event` (with the cluster's warm-up, unless given); answers the record after it. */
  private async noteWarmup(run: Run, event: WarmupEvent, warmupMs?: number): Promise<SourceWarmupRecord> {
    const warmups = this.opts.warmups;
    const ms = warmupMs ?? (await this.warmupMs(run));
    if (!warmups || ms <= 0) return {};
    const record = await warmups.note(run.task.source, event, Date.now(), ms, WARMUP_DROP_INSTANCES);
    if (event.kind !== 'down') run.warmup = record;
    return record;
  }

  /**
   * The source was read: if this process failed to read it before, its outage is over, and the
   * warm-up record is told (which starts the warm-up, unless another process told it first). A
   * record that cannot be told now is told by the next read.
   */
  private async sourceReadAgain(run: Run): Promise<void> {
    const cluster = run.task.source;
    if (!this.unreachedSources.has(cluster)) return;
    try {
      await this.noteWarmup(run, { kind: 'up' });
      this.unreachedSources.delete(cluster);
    } catch (err) {
      run.log().warn({ err }, 'cannot record the end of the source outage; the next read does');
    }
  }

  /** The source could not be reached or read: its warm-up record marks an outage (once per outage and process). */
  private async sourceUnreached(run: Run): Promise<void> {
    const cluster = run.task.source;
    if (this.unreachedSources.has(cluster)) return;
    try {
      const ms = await this.warmupMs(run);
      if (ms <= 0 || !this.opts.warmups) return;
      await this.noteWarmup(run, { kind: 'down' }, ms);
      this.unreachedSources.add(cluster);
    } catch (err) {
      run.log().warn({ err }, 'cannot record the source outage; the next failed read does');
    }
  }

  /**
   * The mass-deletion guard (see {@link massDeletionGuard}): judged against the most copies of the
   * last `massDeletionWindowMs`, confirmed by a later read (`read`) or by an operator's release.
   * Undefined when there is nothing to judge (no removal, and no window to keep).
   */
  private async guardRemovals(run: Run, removes: number, owned: number): Promise<MassDeletionVerdict | undefined> {
    const { task } = run;
    if (removes === 0) return undefined;
    const [previous, guard] = await Promise.all([run.previous(), run.nextGuard ?? run.guard()]);
    const window = guard.copies;
    const settings = {
      percent: task.options.massDeletionPercent ?? DEFAULT_MASS_DELETION_PERCENT,
      minCopies: task.options.massDeletionMinCopies ?? DEFAULT_MASS_DELETION_MIN_COPIES,
      windowMs: task.options.massDeletionWindowMs ?? DEFAULT_MASS_DELETION_WINDOW_MS,
      confirmMs: this.confirmEmptyMs,
      confirm: task.options.massDeletionConfirm ?? 'read',
    };
    const held = previous?.held ?? undefined;
    const judge = (released: boolean) => massDeletionGuard({ removes, copies: owned, released, held }, window, Date.now(), settings);
    let verdict = judge(false);
    run.nextGuard = { ...guard, copies: verdict.copies };
    // A release is taken only when it is needed: one given for a deletion that went anyway lapses.
    if (verdict.verdict === 'hold' && (await this.opts.store.takeRelease(task.id, run.service))) {
      verdict = judge(true);
      run.nextGuard = { ...guard, copies: verdict.copies };
    }
    if (verdict.verdict === 'proceed' && verdict.applied === 'released') {
      run.log().warn({ removes, copies: owned }, 'mass deletion released by an operator; applying');
      this.emit('released', task.id, run.service, `mass deletion released by an operator: removing ${removes} of ${owned} copies`);
    } else if (verdict.verdict === 'proceed' && verdict.applied === 'confirmed') {
      run.log().warn({ removes, copies: owned, heldMs: verdict.heldMs }, 'mass deletion confirmed by a later read; applying');
      this.emit('released', task.id, run.service, `mass deletion confirmed by a read ${verdict.heldMs} ms later: removing ${removes} of ${owned} copies`);
    } else if (verdict.verdict === 'hold' && verdict.first) {
      run.log().warn({ removes, copies: owned, peak: verdict.held.peak, confirm: settings.confirm }, 'holding a mass deletion');
      this.emit('held', task.id, run.service, heldNote(task.id, verdict.held, settings));
    }
    return verdict;
  }

  /**
   * Phase 4, apply: writes the plan; a refusal for good is recorded and ends the run as `refused`.
   * A connection-bound destination also gets every copy the service sync wants there (`desired`:
   * the upserts and the unchanged, removals a guard holds among them), which replaces the set this
   * process publishes for it. Answers whether anything was written.
   */
  private async apply(run: Run, reads: Reads, plan: SyncPlan): Promise<boolean> {
    if (plan.upsert.length === 0 && plan.remove.length === 0) return false;
    const { destination } = reads;
    const cluster = run.task.destination;
    // What goes is no longer beaten from now: a beat answered "unknown" by a copy just removed would register it again.
    this.opts.heartbeats.forget(run.key, destination, run.target, plan.remove);
    try {
      const desired = reads.bound ? { desired: { owner: run.key, instances: [...plan.upsert, ...plan.unchanged] } } : {};
      await destination.apply(run.target, { upsert: plan.upsert, remove: plan.remove, ...desired });
    } catch (err) {
      const refused = err instanceof WriteRefusedError;
      const problem: Problem = withCause({ code: refused ? 'write_refused' : 'destination_unwritable', side: 'destination', cluster, message: `cannot write destination ${cluster}: ${messageOf(err)}` }, err);
      if (isUnreached(problem)) this.reached(run, cluster, false, problem.message);
      await this.recordProblem(run, problem);
      // Refused for good: the status says why, and the next full sync tries again; retrying now cannot succeed.
      throw refused ? new RefusedRun(messageOf(err)) : new PhaseFailure(problem.message, { cause: err });
    }
    if (this.log.isLevelEnabled('debug')) run.log().debug({ upserts: plan.upsert.length, removes: plan.remove.length }, 'applied');
    return true;
  }

  /**
   * Phase 5, keep alive: the shard's leader takes unchanged copies into its session (`retain`) and
   * beats the live ones; every replica records the live set for the leader (the record is sent
   * with the status, one round trip). On a connection-bound destination nothing beats: this process
   * publishes the live set (its adapter sends nothing when it holds that set already), and the record
   * tells every replica, each of which publishes it too. Answers the live copies and the pending record.
   */
  private async keepAlive(run: Run, reads: Reads, plan: SyncPlan, applied: boolean): Promise<Live> {
    const { key, taskId } = run;
    const { destination } = reads;
    const live = [...plan.upsert, ...plan.unchanged];
    const shard = this.opts.shardOf?.(key) ?? 0;
    const leading = this.opts.leads?.(shard) ?? true;
    const failed = (err: unknown): Promise<never> => {
      const cluster = run.task.destination;
      const problem: Problem = { code: 'destination_unwritable', side: 'destination', cluster, message: `cannot write destination ${cluster}: ${messageOf(err)}` };
      return this.fail(run, problem, err);
    };
    if (reads.bound) {
      this.opts.heartbeats.clear(key);
      // A task paused meanwhile keeps nothing here (its other replicas withdraw as it stops there).
      const keep = this.opts.activeTask(taskId) !== undefined;
      try {
        if (!applied || !keep) await destination.publish?.(run.target, key, keep ? live.filter((i) => i.ephemeral) : []);
      } catch (err) {
        return failed(err);
      }
      this.opts.published?.(key, shard, destination, run.target);
    } else {
      if (leading && destination.retain && plan.unchanged.length > 0) {
        try {
          await destination.retain(run.target, plan.unchanged);
        } catch (err) {
          return failed(err);
        }
      }
      if (leading && this.opts.activeTask(taskId) !== undefined) this.opts.heartbeats.set(key, destination, run.target, live, plan.upsert);
      else this.opts.heartbeats.clear(key);
    }
    // A lost record is written again by the next reconcile (nothing marks it written meanwhile).
    const recorded = this.opts.liveSets?.put(key, shard, live, reads.bound || !leading).catch((err: unknown) => run.log().warn({ err }, 'cannot record the live copies'));
    return { instances: live, shard, recorded: recorded ?? Promise.resolve() };
  }

  /**
   * Phase 6, record: the status with its problems (held removals, address conflicts, skipped source
   * entries) and what the guards remember, or, for a service gone from a `*` task's source whose
   * copies are gone too, forgetting the service sync.
   */
  private async record(run: Run, reads: Reads, planned: Planned, live: Live, note: RunNote): Promise<ReconcileOutcome> {
    const { task, taskId, service } = run;
    const { plan, deletion } = planned;
    const synced: ReconcileOutcome = { kind: 'synced', upserts: plan.upsert.length, removes: plan.remove.length, conflicts: plan.conflicts.length };
    if (reads.sourceInstances.length === 0 && live.instances.length === 0 && (await this.opts.stillListed?.(run.key)) === false) {
      await this.forgetService(run, live, plan.remove.length);
      return synced;
    }
    const problems = this.planProblems(run, reads, planned);
    // The run read both sides and wrote what it had to: both were reached.
    this.reached(run, task.source, true);
    this.reached(run, task.destination, true);
    const lagMs = Math.max(0, Date.now() - run.since);
    const held = deletion?.verdict === 'hold' ? { ...deletion.held, addresses: planned.held.slice(0, MAX_HELD_ADDRESSES).map(instanceId).sort() } : null;
    const warmup = planned.warmup ?? null;
    const guard = run.nextGuard === undefined ? undefined : this.opts.store.putGuard(taskId, service, run.nextGuard);
    const status = this.opts.store.putServiceStatus(taskId, {
      service,
      sourceInstances: reads.sourceInstances.length,
      destinationInstances: live.instances.length,
      lastSyncAt: new Date().toISOString(),
      lagMs,
      lastError: problemsText(problems),
      problems,
      sourceDigest: instancesDigest(reads.sourceInstances),
      held,
      ...(warmup ? { warmup } : {}),
      ...(Object.keys(planned.skipped).length > 0 ? { skipped: planned.skipped } : {}),
    });
    await Promise.all([live.recorded, status, guard]);
    note.lagMs = lagMs;
    if (plan.upsert.length > 0 || plan.remove.length > 0) {
      this.emit(
        'reconciled',
        taskId,
        service,
        `${count(plan.upsert.length, 'copy', 'copies')} written to and ${plan.remove.length} removed from ${task.destination}; ${count(live.instances.length, 'copy', 'copies')} there, ${count(reads.sourceInstances.length, 'source instance', 'source instances')} (lag ${lagMs} ms)`,
      );
    }
    // Held removals are applied by a reconcile when the hold ends, not at the next full sync.
    const requeues = [deletion?.verdict === 'hold' ? deletion.requeueAfterMs : undefined, planned.warmupRequeueMs].filter((ms): ms is number => ms !== undefined);
    return requeues.length > 0 ? { ...synced, requeueAfterMs: Math.min(...requeues) } : synced;
  }

  /** The problems of a run that went through: held removals, address conflicts, skipped source entries. */
  private planProblems(run: Run, reads: Reads, planned: Planned): Problem[] {
    const { task } = run;
    const problems: Problem[] = [];
    const { plan, deletion } = planned;
    if (planned.warmup) {
      problems.push({ code: 'source_warming_up', side: 'source', cluster: task.source, message: warmupNote(task.source, planned.warmup, planned.warmup.removes) });
    }
    if (deletion?.verdict === 'hold') {
      problems.push({ code: 'mass_deletion_held', side: 'destination', cluster: task.destination, message: heldNote(task.id, deletion.held, { confirmMs: this.confirmEmptyMs, windowMs: task.options.massDeletionWindowMs ?? DEFAULT_MASS_DELETION_WINDOW_MS }) });
    }
    if (plan.conflicts.length > 0) {
      run.log().warn({ conflicts: plan.conflicts.length }, 'address conflicts in destination');
      const shown = plan.conflicts.slice(0, 5).map(instanceId).join(', ');
      const message = `${plan.conflicts.length} instance(s) not written: their address is taken in ${task.destination} by an instance this task does not own (${shown})`;
      problems.push({ code: 'address_conflict', side: 'destination', cluster: task.destination, message });
    }
    for (const issue of reads.source.readIssues?.(run.service) ?? []) {
      problems.push({ code: 'source_skipped', side: 'source', cluster: task.source, message: `skipped in source ${task.source}: ${issue}` });
    }
    return problems;
  }

  /** The service left a `*` task's source and its copies are gone: forget the service sync. */
  private async forgetService(run: Run, live: Live, removed: number): Promise<void> {
    const { key, taskId, service, task } = run;
    await live.recorded;
    this.opts.heartbeats.clear(key);
    await this.opts.liveSets?.remove(key, live.shard);
    await Promise.all([this.opts.store.deleteServiceStatus(taskId, service), this.opts.store.putGuard(taskId, service, {})]);
    this.opts.sourceAddresses?.delete(key);
    run.log().info('service gone from the source; service sync forgotten');
    this.emit('removed', taskId, service, `service gone from source ${task.source}; ${removed} copies removed from ${task.destination} and the service sync forgotten`);
  }

  /** Records a phase's problem and stops the run with it (the reconcile rejects with `cause`). */
  private async fail(run: Run, problem: Problem, cause: unknown): Promise<never> {
    if (isUnreached(problem)) this.reached(run, problem.cluster, false, problem.message);
    const outage = isUnreached(problem) && problem.side === 'source' && problem.cluster === run.task.source;
    await Promise.all([this.recordProblem(run, withCause(problem, cause)), outage ? this.sourceUnreached(run) : undefined]);
    throw new PhaseFailure(problem.message, { cause });
  }

  /**
   * A run that read instances and then failed still ends a wait for a confirming empty read: a
   * later empty read starts anew. (A run that goes through ends it through its status' `lastSyncAt`.)
   */
  private async forgetEmptyRead(run: Run): Promise<void> {
    if ((run.sourceCount ?? 0) === 0 || run.nextGuard !== undefined) return;
    const guard = await run.guard();
    if (guard.emptySince !== undefined) await this.opts.store.putGuard(run.taskId, run.service, withoutEmptySince(guard)).catch(() => undefined);
  }

  /** Tells the observer of an event worth an operator's eye; an observer that throws never fails the reconcile. */
  /** Tells the observer that this run reached a cluster, or could not; an observer that throws never fails the reconcile. */
  private reached(run: Run, clusterId: string, reached: boolean, reason?: string): void {
    try {
      this.observer.clusterReached?.(clusterId, reached, { taskId: run.taskId, key: run.key, reason });
    } catch (err) {
      this.log.warn({ err }, 'a cluster observer threw');
    }
  }

  private emit(kind: TaskEventKind, taskId: string, service: ServiceKey, message: string): void {
    try {
      this.observer.event?.({ kind, taskId, service: serviceKeyString(service), message });
    } catch (err) {
      this.log.warn({ err }, 'a task event observer threw');
    }
  }

  /**
   * Records a problem in the service's status, keeping what the previous reconcile recorded (counts,
   * a held deletion), and tells the observer as a `kind` event when the status did not already say
   * the same (a failure retried with backoff, or met again at every full sync, is one event, not one
   * per attempt). What the guards remember is left as it is.
   */
  private async recordProblem(run: Run, problem: Problem, kind: TaskEventKind = 'error'): Promise<void> {
    const { taskId, service } = run;
    const [previous] = await Promise.all([run.previous(), this.forgetEmptyRead(run)]);
    if (previous?.lastError !== problem.message) this.emit(kind, taskId, service, problem.message);
    await this.opts.store
      .putServiceStatus(taskId, {
        service,
        sourceInstances: previous?.sourceInstances ?? 0,
        destinationInstances: previous?.destinationInstances ?? 0,
        lastSyncAt: previous?.lastSyncAt ?? null,
        lagMs: previous?.lagMs ?? null,
        lastError: problem.message,
        problems: [problem],
        sourceDigest: previous?.sourceDigest,
        // A failed read does not confirm nor forget a held deletion, nor a warm-up's hold.
        held: previous?.held ?? null,
        ...(previous?.warmup ? { warmup: previous.warmup } : {}),
      })
      .catch((err: unknown) => this.log.warn({ err }, 'cannot record status'));
  }
}

/** A write the destination refuses for good: the run ends as `refused` (see {@link Reconciler}). */
class RefusedRun extends Error {
  override readonly name = 'RefusedRun';
}

/** The live copies of a run, the shard that beats them, and their pending record in Redis. */
interface Live {
  instances: Instance[];
  shard: number;
  recorded: Promise<unknown>;
}

/** What a reconcile tells its caller besides the outcome (for the observer). */
interface RunNote {
  /** Lag of the status written, ms (only when one was written after a sync). */
  lagMs?: number;
}

/** The status line of a held mass deletion: how much would go, within which window, and what releases it. */
function heldNote(taskId: string, held: HeldDeletion, settings: { confirmMs: number; windowMs: number }): string {
  const share = heldShare(held);
  const peak = held.peak ?? held.copies;
  const what =
    peak > held.copies
      ? `${held.removes} of ${held.copies} copies would be removed, ${heldDrop(held)} of ${peak} within ${Math.round(settings.windowMs / 1000)} s (${share}%)`
      : `${held.removes} of ${held.copies} copies (${share}%) would be removed`;
  return (
    `holding a mass deletion: ${what}; ` +
    (held.confirm === 'read' ? `applied if a read ${settings.confirmMs} ms later still plans it, or ` : '') +
    `released by POST /api/v1/tasks/${taskId}/release`
  );
}

/** The status line of removals held by a source's warm-up: why, how many, and until when. */
function warmupNote(sourceId: string, hold: { reason: WarmupHold['reason']; until: number | string }, removes: number): string {
  const why = hold.reason === 'outage' ? 'after an outage' : 'after a sharp drop of its instances';
  const until = typeof hold.until === 'number' ? new Date(hold.until).toISOString() : hold.until;
  return `source ${sourceId} is warming up ${why}: ${count(removes, 'removal', 'removals')} held until ${until} (additions and updates go through)`;
}

/** `1 copy`, `2 copies`. */
function count(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * Whether copies written through `adapter` live with this process's connection (see
 * `RegistryAdapter.connectionBound`); false for adapters that do not say.
 */
export async function connectionBound(adapter: RegistryAdapter): Promise<boolean> {
  return (await adapter.connectionBound?.()) ?? false;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A function that calls `load` the first time only, and answers its promise every time. */
function once<T>(load: () => Promise<T>): () => Promise<T> {
  let loaded: Promise<T> | undefined;
  return () => (loaded ??= load());
}

/**
 * When the source was first read empty, if that read still stands: a reconcile that went through
 * after it (the status' `lastSyncAt`) read instances again, and a later empty read starts anew.
 */
function firstEmptyRead(guard: GuardState, previous: ServiceStatus | undefined): number | undefined {
  if (guard.emptySince === undefined) return undefined;
  const lastSync = previous?.lastSyncAt ? Date.parse(previous.lastSyncAt) : Number.NEGATIVE_INFINITY;
  return lastSync > guard.emptySince ? undefined : guard.emptySince;
}

function withoutEmptySince(guard: GuardState): GuardState {
  const { emptySince: _emptySince, ...rest } = guard;
  return rest;
}

/** The problem with the registry error's stable `code` (`nacos-auth-failed`, `kubernetes-timeout`) as its cause, where the error has one. */
function withCause(problem: Problem, err: unknown): Problem {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.length <= 64 && problem.cause === undefined ? { ...problem, cause: code } : problem;
}

/** The transform's skips and the plan's conflicts as counts by reason, leaving out reasons that did not happen. */
function skippedCounts(skipped: ReadonlyArray<{ reason: SkipReason }>, conflicts: number): SkippedCounts {
  const names: Record<SkipReason, keyof SkippedCounts> = { cycle: 'marked', 'foreign-copy': 'foreign', unhealthy: 'unhealthy', disabled: 'disabled' };
  const out: SkippedCounts = {};
  for (const { reason } of skipped) out[names[reason]] = (out[names[reason]] ?? 0) + 1;
  if (conflicts > 0) out.conflicting = conflicts;
  return out;
}
