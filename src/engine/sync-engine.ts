import type { Logger } from 'pino';
import type { RegistryAdapter, ServicesChange, Unsubscribe } from '../model/adapter.js';
import {
  DEFAULT_FULL_SYNC_MS,
  DEFAULT_VERIFY_INTERVAL_MS,
  DEFAULT_MAX_SERVICES,
  compareServiceKeys,
  instancesDigest,
  parseServiceSyncKey,
  serviceKeyString,
  serviceSyncKey,
  type Instance,
  type ServiceKey,
  type TaskSpec,
} from '../model/types.js';
import type { ReconcileReason } from '../model/reconcile-reason.js';
import type { ServiceStatus, TaskProblem } from '../model/service-status.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { filterYielding, sliceClock, sortYielding } from '../util/yielding.js';
import { ANY, mapService, serviceFilter } from '../model/task-rules.js';
import type { AdapterPool } from './adapter-pool.js';
import type { TaskControl } from './control.js';
import { dueForFullSync, FULL_SYNC_LIST_EVERY, FULL_SYNC_REREAD_EVERY, verifyRound } from './full-sync-filter.js';
import type { HeartbeatScheduler } from './heartbeat-scheduler.js';
import type { LiveSets } from './live-sets.js';
import type { SetPublisher } from './set-publisher.js';
import type { SourceAddresses } from './source-addresses.js';
import { connectionBound, Reconciler, type EngineStore, type ReconcilerOptions } from './reconciler.js';

/**
 * Since when the service syncs of `*` tasks have been missing from their source's list, kept where
 * every worker sees the same (Redis: `MissingServices` in the store).
 */
export interface MissingServiceMarks {
  /** Records a listing: clears the marks of `present` keys, marks `absent` ones; answers each absent one's mark (ms). */
  note(taskId: string, present: ReadonlySet<string>, absent: readonly string[], now: number): Promise<Map<string, number>>;
  /** Since when a service sync has been missing (ms), or undefined when it is listed. */
  since(taskId: string, key: string): Promise<number | undefined>;
  /** Forgets every mark of a task. */
  clear(taskId: string): Promise<void>;
}

/** Where reconcile requests go (the shard queue). */
export interface ReconcileSink {
  enqueue(key: string, reason: ReconcileReason, delayMs?: number): Promise<void>;
  /** Many keys at once (batched where the queue can); the engine falls back to `enqueue` per key. */
  enqueueMany?(keys: readonly string[], reason: ReconcileReason): Promise<void>;
  /** Jobs waiting, delayed or running in a shard; a full sync paces its slices by it (see {@link FULL_SYNC_SLICE}). */
  depth?(shard: number): Promise<number>;
}

/** The engine's store; a store that reads many statuses at once serves a full sync's slices with one read each. */
export type SyncEngineStore = EngineStore & {
  /** The statuses of `services` of a task, in order (undefined where there is none): one round trip. */
  getServiceStatuses?(taskId: string, services: readonly ServiceKey[]): Promise<Array<ServiceStatus | undefined>>;
};

/**
 * Service syncs a full sync takes at a time: their statuses are read at once (one round trip) and
 * those due are queued in one batch. The next slice waits until the queues the last one went to
 * hold at most {@link FULL_SYNC_PACE_DEPTH} jobs each on average, so that a full sync of 100,000
 * services never queues them all at once: it goes as fast as the workers reconcile, with a slice
 * or two waiting for them (they never run dry while the walk looks at the depth).
 */
export const FULL_SYNC_SLICE = 500;
/** Jobs per shard the queues of a slice may still hold, on average, when the next slice of a full sync goes out. */
export const FULL_SYNC_PACE_DEPTH = FULL_SYNC_SLICE;
/** How often a full sync waiting for room in the queues looks at their depth. */
const FULL_SYNC_PACE_POLL_MS = 200;
/** A slice waits at most this long for room (a queue that does not drain, a stuck destination): it goes anyway. */
const FULL_SYNC_PACE_MAX_WAIT_MS = 10_000;

interface ServiceSync {
  service: ServiceKey;
  shard: number;
  /** Set while this process leads the shard and watches the source. */
  unwatch: Unsubscribe | undefined;
  /**
   * The source digest (as the source's feed gave it) that a full sync last found recorded by the
   * service's status, with no problem: while the feed still gives it, the next full syncs need not
   * read the status again (see {@link dueForFullSync}).
   */
  confirmed: string | undefined;
}

interface ActiveTask {
  task: TaskSpec;
  services: Map<string, ServiceSync>;
  timer: NodeJS.Timeout;
  /** For `*` tasks on registries that can tell: stops the watch of the service list. */
  unwatchServices?: Unsubscribe;
  /** The pending re-list that confirms or clears the marks of missing services. */
  recheck?: NodeJS.Timeout | undefined;
  /** What the last expansion could not do (services over the limit, clashing names); shown as the task's error. */
  problem: TaskProblem | null;
  /** The expansion under way, and the one that follows it: at most one runs and one waits (see {@link SyncEngine.expansion}). */
  expanding?: Promise<string[]> | undefined;
  nextExpansion?: Promise<string[]> | undefined;
  /** The full sync walking the task's service syncs (one at a time; see {@link SyncEngine.fullSync}). */
  fullSyncRun?: FullSyncRun | undefined;
  /** Whether an expansion of the task has succeeded since it started here. */
  expanded?: boolean;
  /** Periodic full syncs that asked {@link SyncEngine.listKeptByPush} (every tenth lists anyway). */
  walks?: number;
}

interface FullSyncRun {
  /** Settles once the first slice is queued (or the full sync ended before one). */
  started: Promise<void>;
  /** A resync asked for while this one walks runs after it; resolves once that one started. */
  after?: { started: Promise<void>; resolve: () => void };
}

export interface SyncEngineOptions {
  store: SyncEngineStore;
  adapters: AdapterPool;
  queue: ReconcileSink;
  heartbeats: HeartbeatScheduler;
  logger: Logger;
  /** What the engine's {@link Reconciler} needs besides what the engine shares with it. */
  reconcile?: Pick<ReconcilerOptions, 'cmdb' | 'observer' | 'warmups' | 'warmupOf'>;
  /** The shard of a service sync key; default: everything is shard 0. */
  shardOf?: (key: string) => number;
  /**
   * Whether this process leads a shard (owns its source watches, beats and full syncs). Default: it
   * leads every shard (a single process). The node calls {@link SyncEngine.leadShard} and
   * {@link SyncEngine.unleadShard} as leadership comes and goes.
   */
  leads?: (shard: number) => boolean;
  /**
   * Whether every reconcile of a shard runs in this process (it is the shard's only live replica):
   * then a watch's first read is the reconcile queued with it, and the watch need not poll soon.
   * Default: yes (a single process).
   */
  readsHere?: (shard: number) => boolean;
  /** Where reconciles record what to beat (several processes); removed tasks are cleared from it. */
  liveSets?: LiveSets;
  /**
   * Publishes the live sets of connection-bound destinations from this process (every replica of a
   * shard does); told when tasks start, change, stop or move to a new adapter.
   */
  sets?: SetPublisher | undefined;
  /** Which addresses each service sync read from its source (the reconciler records them). */
  sourceAddresses?: SourceAddresses;
  /** Since when `*` tasks' services have been missing from their source (shared by every worker). */
  missing: MissingServiceMarks;
  /**
   * A service a `*` task's source stops listing is dropped only when a list this much later still
   * misses it (a source glitch must not remove copies); the reconcile's guards wait as long for
   * their confirming reads (`ReconcilerOptions.confirmEmptyMs`). Default 3000 ms.
   */
  confirmMs?: number;
}

/** Prefix of every service sync key of a task (see `serviceSyncKey`). */
export function taskKeyPrefix(taskId: string): string {
  return `${encodeURIComponent(taskId)}|`;
}

/**
 * Runs the tasks of this process: expands each running task into service syncs, watches their
 * sources (one watch per service, on the cluster's shared adapter), turns every change into a
 * reconcile request, and asks for a full reconcile of every service each `fullSyncIntervalMs`.
 * It is also the {@link TaskControl} the REST API drives.
 *
 * With shards, every worker knows every running task, but watches, beats and full-syncs only the
 * service syncs of the shards it leads; reconciles of any shard it serves run here too (they need
 * the task, which {@link activeTask} answers from memory).
 */
export class SyncEngine implements TaskControl {
  /** Runs the reconciles of this process's shard workers, with the tasks as this engine runs them. */
  readonly reconciler: Reconciler;
  private readonly active = new Map<string, ActiveTask>();
  private readonly log: Logger;
  private readonly shardOf: (key: string) => number;
  private readonly leads: (shard: number) => boolean;
  private stopped = false;

  constructor(private readonly opts: SyncEngineOptions) {
    this.log = opts.logger.child({ component: 'engine' });
    this.shardOf = opts.shardOf ?? (() => 0);
    this.leads = opts.leads ?? (() => true);
    const { store, adapters, heartbeats, logger, liveSets, sourceAddresses } = opts;
    this.reconciler = new Reconciler({
      store,
      adapters,
      heartbeats,
      logger,
      shardOf: this.shardOf,
      leads: this.leads,
      ...(liveSets ? { liveSets } : {}),
      ...(opts.sets ? { published: opts.sets.note.bind(opts.sets) } : {}),
      sourceAddresses,
      ...opts.reconcile,
      confirmEmptyMs: this.confirmMs(),
      activeTask: (taskId) => this.activeTask(taskId),
      stillListed: (key) => this.stillListed(key),
    });
  }

  /**
   * This process now leads `shard`: watch its service syncs and reconcile each of them in the
   * background. A watch's first poll finds what changed while nobody watched (see
   * {@link checkFirstRead}), and that is reconciled first. Where the source pushes its lists and
   * the destination keeps copies with every replica's connection, nothing is reconciled besides:
   * the copies stay published by every replica (see `SetPublisher`), a first read that differs from
   * the last status is reconciled at once, and a change no first read told of (a watch joining a
   * subscription already made) is found by the next full sync, which compares the pushed lists
   * with the statuses. A shard of 30,000 service syncs is taken over without 30,000 reconciles.
   */
  async leadShard(shard: number): Promise<void> {
    const started: string[] = [];
    for (const active of [...this.active.values()]) {
      let source: RegistryAdapter;
      let fed: boolean;
      try {
        source = await this.opts.adapters.get(active.task.source);
        fed = source.cachedDigest !== undefined && (await connectionBound(await this.opts.adapters.get(active.task.destination)));
      } catch (err) {
        this.log.warn({ err, task: active.task.id, shard }, 'cannot watch the source yet; retrying at the next full sync');
        continue;
      }
      // A task of 100,000 services: the walk gives the event loop back every few milliseconds.
      const clock = sliceClock();
      for (const [key, sync] of [...active.services]) {
        const pause = clock.pause();
        if (pause) await pause;
        if (this.active.get(active.task.id) !== active || !this.leads(shard)) break;
        if (sync.shard !== shard || sync.unwatch || active.services.get(key) !== sync) continue;
        this.watchService(source, active, key, sync);
        if (!fed) started.push(key);
      }
    }
    await this.startSyncs(started);
  }

  /**
   * Beats `instances` for service sync `key` if this process leads its shard and runs its task (a
   * reconcile elsewhere, or a new leadership, said so).
   */
  async restoreBeats(key: string, instances: readonly Instance[]): Promise<void> {
    const { taskId, service } = parseServiceSyncKey(key);
    const active = this.active.get(taskId);
    if (!active || !this.leads(this.shardOf(key))) return;
    const destination = await this.opts.adapters.get(active.task.destination);
    // Connection-bound copies are published by every replica (see SetPublisher), never beaten.
    const bound = await connectionBound(destination);
    if (this.active.get(taskId) !== active || !this.leads(this.shardOf(key))) return;
    if (bound) this.opts.heartbeats.clear(key);
    else this.opts.heartbeats.set(key, destination, mapService(service, active.task.options.mapping), instances);
  }

  /** Another process removes the task: stop it here and let reconciles under way finish. */
  async stopTask(taskId: string): Promise<void> {
    this.deactivate(taskId);
    await this.reconciler.drain(taskId);
    await this.opts.sets?.refresh(taskKeyPrefix(taskId), true);
    this.reconciler.forget(taskKeyPrefix(taskId));
  }

  /**
   * The removal another process stopped the task for has ended without this process being told
   * (its sender died mid-way): runs the task again if the store still holds it as running.
   */
  async resumeIfStopped(taskId: string): Promise<void> {
    if (this.active.has(taskId)) return;
    const task = await this.opts.store.getTask(taskId);
    if (task?.state !== 'running' || this.active.has(taskId)) return;
    this.log.warn({ task: taskId }, 'a removal of the task ended without word; running the task again');
    await this.taskChanged(taskId);
  }

  /** This process no longer leads `shard`: stop its watches and beats at once. */
  unleadShard(shard: number): void {
    for (const active of this.active.values()) {
      for (const [key, sync] of active.services) {
        if (sync.shard !== shard) continue;
        sync.unwatch?.();
        sync.unwatch = undefined;
        this.opts.heartbeats.clear(key);
      }
    }
  }

  /**
   * Whether service sync `key` belongs to its running task: false once the source's list has
   * missed its service for `confirmMs` (by the marks every worker shares, whatever this process
   * listed; only tasks whose services come from a list have marks), or when the task does not run here.
   */
  async stillListed(key: string): Promise<boolean> {
    const { taskId } = parseServiceSyncKey(key);
    if (!this.active.has(taskId)) return false;
    const since = await this.opts.missing.since(taskId, key);
    return since === undefined || Date.now() - since < this.confirmMs();
  }

  /** The task, when it runs here (the reconciler reads it from here rather than from the store). */
  activeTask(taskId: string): TaskSpec | undefined {
    return this.active.get(taskId)?.task;
  }

  /** Starts every running task and asks for a first reconcile of each service sync. */
  async start(): Promise<void> {
    this.opts.heartbeats.start();
    const tasks = await this.opts.store.listTasks();
    for (const task of tasks) if (task.state === 'running') await this.activate(task);
    this.log.info({ tasks: tasks.length, running: this.active.size }, 'engine started');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // Connection-bound sets stay published until the connections close: the other replicas hold them too.
    this.opts.sets?.stop();
    for (const taskId of [...this.active.keys()]) this.deactivate(taskId);
    this.opts.heartbeats.stop();
  }

  /**
   * A task was created, changed, paused or resumed, or a command that stopped it failed: runs it
   * from the stored spec, or stops it. A running task beats at once the copies its last reconciles
   * recorded (in the shards this process leads), as a new shard leader does, rather than only once
   * a reconcile succeeds again (which waits for a destination that was down).
   */
  async taskChanged(taskId: string): Promise<void> {
    await this.restart(taskId);
    await this.takeOverCopies(taskId, false);
    await this.opts.sets?.refresh(taskKeyPrefix(taskId));
  }

  /**
   * Asked for: every service is reconciled, whatever the feeds say. Answers once the first slice is
   * queued; the rest follows at the pace of the queues (a full sync under way finishes first).
   */
  async resync(taskId: string): Promise<void> {
    const active = this.active.get(taskId);
    if (active) await this.fullSync(active, true);
  }

  async removeTask(taskId: string): Promise<void> {
    const task = await this.opts.store.getTask(taskId);
    const known = new Map<string, ServiceKey>();
    for (const [key, s] of this.active.get(taskId)?.services ?? []) known.set(key, s.service);
    this.deactivate(taskId);
    await this.reconciler.drain(taskId);
    if (!task) return;
    for (const status of await this.opts.store.listServiceStatus(taskId)) {
      known.set(serviceSyncKey({ taskId, service: status.service }), status.service);
    }
    if (task.service !== '*') {
      const service = { namespace: task.namespace, group: task.group, name: task.service };
      known.set(serviceSyncKey({ taskId, service }), service);
    }
    let removed = 0;
    for (const [key, service] of known) {
      removed += await this.reconciler.removeCopies(task, service, key);
      await this.opts.store.deleteServiceStatus(taskId, service);
      await this.opts.liveSets?.remove(key, this.shardOf(key));
    }
    await this.opts.missing.clear(taskId);
    await this.opts.sets?.refresh(taskKeyPrefix(taskId), true);
    this.reconciler.forget(taskKeyPrefix(taskId));
    this.log.info({ task: taskId, removed }, 'task removed with its copies');
  }

  /**
   * The CMDB labels of `ips` changed: reconcile the service syncs of running tasks whose source
   * lists any of them (as far as this process has seen), so that their copies carry the new labels.
   * Other processes do the same for the service syncs they have seen; the queue merges duplicates.
   */
  async labelsChanged(ips: readonly string[]): Promise<number> {
    const keys = (this.opts.sourceAddresses?.keysOf(ips) ?? []).filter((key) => this.active.has(parseServiceSyncKey(key).taskId));
    if (keys.length === 0) return 0;
    this.log.info({ ips: ips.length, serviceSyncs: keys.length }, 'CMDB labels changed; re-labelling the copies of the affected service syncs');
    await this.enqueueAll(keys, 'change');
    return keys.length;
  }

  /**
   * A cluster's settings changed: its tasks move onto a new adapter before the old one closes. They
   * watch through the new one at once, and the copies this process keeps alive there (those of the
   * shards it leads) are taken over by the new adapter first: beaten through it and retained in its
   * session, so that copies bound to the old connection (ZooKeeper's ephemeral nodes) never vanish.
   */
  async clusterChanged(clusterId: string): Promise<void> {
    const affected = await this.opts.store.tasksUsingCluster(clusterId);
    await this.opts.adapters.invalidate(clusterId, async () => {
      for (const task of affected) {
        await this.restart(task.id);
        await this.takeOverCopies(task.id, task.destination === clusterId);
        // Connection-bound sets are published through the new adapter before the old one closes.
        await this.opts.sets?.refresh(taskKeyPrefix(task.id));
      }
    });
  }

  /** Stops the task here, then runs it from its stored spec if that says running. */
  private async restart(taskId: string): Promise<void> {
    this.deactivate(taskId);
    const task = await this.opts.store.getTask(taskId);
    if (task?.state === 'running') await this.activate(task);
  }

  /**
   * Beats, through the destination's current adapter, the copies of the task's service syncs in
   * the shards this process leads, as their last reconcile recorded them; with `retain`, first has
   * the adapter take them into its own session. A failure is logged: the next reconcile repairs it.
   */
  private async takeOverCopies(taskId: string, retain: boolean): Promise<void> {
    const active = this.active.get(taskId);
    const liveSets = this.opts.liveSets;
    if (!active || !liveSets) return;
    const destination = await this.opts.adapters.get(active.task.destination).catch(() => undefined);
    const led = [...active.services].filter(([, sync]) => this.leads(sync.shard));
    // Connection-bound copies are published by every replica (see SetPublisher), never beaten nor retained.
    if (!destination || led.length === 0 || (await connectionBound(destination).catch(() => false))) return;
    const sets = await Promise.all(led.map(([key, sync]) => liveSets.get(key, sync.shard).catch(() => [])));
    for (const [i, [key, sync]] of led.entries()) {
      const instances = sets[i] ?? [];
      // A reconcile that ran since the task started set fresher beats (and retained) already.
      if (instances.length === 0 || this.opts.heartbeats.instancesOf(key).length > 0) continue;
      const target = mapService(sync.service, active.task.options.mapping);
      try {
        if (retain) await destination.retain?.(target, instances);
      } catch (err) {
        this.log.warn({ err, key }, 'cannot take the copies over onto the new adapter; the next reconcile does');
      }
      if (this.active.get(taskId) !== active || !this.leads(sync.shard) || this.opts.heartbeats.instancesOf(key).length > 0) continue;
      this.opts.heartbeats.set(key, destination, target, instances);
    }
  }

  private async activate(task: TaskSpec): Promise<void> {
    if (this.stopped) return;
    const interval = task.options.fullSyncIntervalMs ?? DEFAULT_FULL_SYNC_MS;
    const active: ActiveTask = {
      task,
      services: new Map(),
      timer: setInterval(() => void this.fullSync(active), interval),
      problem: null,
    };
    active.timer.unref();
    this.active.set(task.id, active);
    try {
      await this.expansion(active);
    } catch (err) {
      const message = `cannot start: ${err instanceof Error ? err.message : String(err)}`;
      this.log.warn({ err, task: task.id }, 'task cannot start yet; retrying at the next full sync');
      await this.opts.store.setTaskError(task.id, err instanceof SourceListError ? { code: 'source_unlisted', cluster: task.source, message } : { code: 'task_unstartable', message });
    }
  }

  /** The service syncs of a task in the shards this process leads. */
  private ledKeys(active: ActiveTask): string[] {
    const keys: string[] = [];
    for (const [key, sync] of active.services) if (this.leads(sync.shard)) keys.push(key);
    return keys;
  }

  /** Reconciles service syncs this process just started watching (in the background: changes go first). */
  private async startSyncs(keys: readonly string[]): Promise<void> {
    await this.enqueueAll(keys, 'start');
  }

  /**
   * A watch's first read, with nothing read in this process before (the service's reconciles may
   * run in other processes, and this one may have just taken the shard over): reconcile only if
   * the source differs from what the last reconcile read. A service sync never reconciled yet is
   * queued as a start (behind changes, merged into the start its expansion queued), not as a
   * change: a cold sync of 100,000 services neither jumps ahead of real changes nor pays a second
   * queue call per service to move its start to the front.
   */
  private async checkFirstRead(key: string, instances: readonly Instance[]): Promise<void> {
    const { taskId, service } = parseServiceSyncKey(key);
    const status = await this.opts.store.getServiceStatus(taskId, service).catch(() => undefined);
    if (status?.sourceDigest !== undefined && status.sourceDigest === instancesDigest(instances)) return;
    await this.opts.queue.enqueue(key, status === undefined ? 'start' : 'change');
  }

  private watchService(source: RegistryAdapter, active: ActiveTask, key: string, sync: ServiceSync): void {
    const readFollows = this.opts.readsHere?.(sync.shard) ?? true;
    sync.unwatch = source.watch(
      sync.service,
      (event) => {
        const queued = event?.firstRead ? this.checkFirstRead(key, event.firstRead) : this.opts.queue.enqueue(key, 'change');
        void queued.catch((err: unknown) => this.log.warn({ err, key }, 'cannot enqueue change'));
      },
      { readFollows },
    );
    this.log.debug({ task: active.task.id, service: serviceKeyString(sync.service) }, 'watching');
  }

  /**
   * Runs {@link expand} with what follows it (the task's error set, the new service syncs queued):
   * at most one expansion of a task runs at a time and at most one more waits; every call made while
   * one runs shares the waiting one, which lists the source afresh once the running one ended. So a
   * burst of list changes (a source that tells of every new service) costs two expansions, not one
   * each. Answers the keys that started being watched.
   */
  private expansion(active: ActiveTask): Promise<string[]> {
    if (active.nextExpansion) return active.nextExpansion;
    if (active.expanding) {
      const next = active.expanding
        .catch(() => [])
        .then(() => {
          active.nextExpansion = undefined;
          return this.runExpansion(active);
        });
      active.nextExpansion = next;
      return next;
    }
    return this.runExpansion(active);
  }

  private runExpansion(active: ActiveTask): Promise<string[]> {
    const run = (async () => {
      const added = await this.expand(active);
      if (this.active.get(active.task.id) !== active) return [];
      active.expanded = true;
      await this.opts.store.setTaskError(active.task.id, active.problem);
      await this.startSyncs(added);
      return added;
    })().finally(() => {
      if (active.expanding === run) active.expanding = undefined;
    });
    active.expanding = run;
    return run;
  }

  /**
   * Makes the known services match the task (one service, or those its name stands for in the
   * source (`RegistryAdapter.expandService`), or every service for `*` that its
   * include and exclude patterns let through, in every group and namespace for `*` there) and
   * watches those in led shards; answers the keys that started being watched. Services beyond
   * `maxServices`, and services whose mapped name another one already takes, are left out and named
   * in {@link ActiveTask.problem}. A service the source stopped listing is dropped once a list
   * `confirmMs` later still misses it; its last reconcile removes its copies. Every loop over the
   * listed services gives the event loop back every few milliseconds (100,000 services never stall
   * the process); run it through {@link expansion}, which keeps two from interleaving.
   */
  private async expand(active: ActiveTask): Promise<string[]> {
    const { task } = active;
    const keep = serviceFilter(task.options);
    const source = await fromSource(() => this.opts.adapters.get(task.source));
    const scope = { namespace: task.namespace, group: task.group };
    const wildcard = task.service === ANY;
    const named = { ...scope, name: task.service };
    // A name standing for several services (a bare Dubbo interface) is synced like a `*` task
    // restricted to them; a task renaming its service copies that one service.
    const fansOut = !wildcard && source.expandService !== undefined && !Object.hasOwn(task.options.mapping?.rename ?? {}, task.service);
    const listed = wildcard
      ? await sortYielding(await filterYielding(await fromSource(() => source.listServices(scope)), (s) => keep(s.name)), compareServiceKeys)
      : fansOut
        ? await sortYielding((await fromSource(async () => source.expandService?.(named))) ?? [], compareServiceKeys)
        : [named];
    if (this.active.get(task.id) !== active) return [];
    if (wildcard && !active.unwatchServices && source.watchServices) {
      // Services appearing in the source are picked up at once, not at the next full sync.
      active.unwatchServices = source.watchServices(scope, (change) => this.servicesChanged(active, change));
    }
    if (fansOut && !active.unwatchServices && source.watchExpansion) active.unwatchServices = source.watchExpansion(named, () => this.refreshServices(active));
    const problems: string[] = [];
    const clashing = new Set<string>();
    for (const [target, sources] of await clashesYielding(listed, task.options.mapping)) {
      for (const s of sources.slice(1)) clashing.add(serviceKeyString(s));
      problems.push(`${sources.map(serviceKeyString).join(' and ')} would all be copied to ${target}; only the first is synced`);
    }
    if (this.active.get(task.id) !== active) return [];
    const maxServices = task.options.maxServices ?? DEFAULT_MAX_SERVICES;
    let over = 0;
    const added: string[] = [];
    const present = new Set<string>();
    const clock = sliceClock();
    for (const service of listed) {
      const wait = clock.pause();
      if (wait) {
        await wait;
        // Stopped meanwhile: what was watched so far was unwatched with the task.
        if (this.active.get(task.id) !== active) return [];
      }
      const key = serviceSyncKey({ taskId: task.id, service });
      if (clashing.size > 0 && clashing.has(serviceKeyString(service))) continue;
      present.add(key);
      let sync = active.services.get(key);
      if (!sync) {
        if (active.services.size >= maxServices) {
          over += 1;
          continue;
        }
        sync = { service, shard: this.shardOf(key), unwatch: undefined, confirmed: undefined };
        active.services.set(key, sync);
      }
      if (sync.unwatch || !this.leads(sync.shard)) continue;
      this.watchService(source, active, key, sync);
      added.push(key);
    }
    if (over > 0) problems.push(`${over} service(s) not synced: the task is at its maxServices (${maxServices})`);
    active.problem = problems.length > 0 ? { code: 'services_left_out', cluster: task.source, message: problems.join('; ') } : null;
    if (wildcard || fansOut) await this.dropMissing(active, present);
    return added;
  }

  /**
   * Forgets the service syncs whose service has been missing from the source's list for
   * `confirmMs` (since the first list that missed it, by any worker: the marks are shared); their
   * reconcile removes the copies. Lists again once the earliest unconfirmed mark is due.
   */
  private async dropMissing(active: ActiveTask, present: ReadonlySet<string>): Promise<void> {
    const absent = await filterYielding([...active.services.keys()], (key) => !present.has(key));
    const now = Date.now();
    const marks = await this.opts.missing.note(active.task.id, present, absent, now);
    if (this.active.get(active.task.id) !== active) return;
    const confirmMs = this.confirmMs();
    const gone: string[] = [];
    let due: number | undefined;
    for (const key of absent) {
      const sync = active.services.get(key);
      if (!sync) continue;
      const age = now - (marks.get(key) ?? now);
      if (age < confirmMs) {
        due = Math.min(due ?? confirmMs, confirmMs - age);
        continue;
      }
      sync.unwatch?.();
      active.services.delete(key);
      if (this.leads(sync.shard)) gone.push(key);
    }
    if (due !== undefined && active.recheck === undefined) {
      active.recheck = setTimeout(() => {
        active.recheck = undefined;
        this.refreshServices(active);
      }, due + 10);
      active.recheck.unref();
    }
    if (gone.length === 0) return;
    this.log.info({ task: active.task.id, services: gone.length }, 'services gone from the source; removing their copies');
    void this.enqueueAll(gone, 'change').catch((err: unknown) => this.log.warn({ err, task: active.task.id }, 'cannot queue the removal of copies; the next full sync does it'));
  }

  private confirmMs(): number {
    return this.opts.confirmMs ?? 3000;
  }

  /**
   * The source's list of a `*` task's scope changed (`RegistryAdapter.watchServices`): services it
   * says were added, and nothing else, are started without a listing (see {@link startAdded});
   * anything else, or a change it does not name, lists the scope again.
   */
  private servicesChanged(active: ActiveTask, change: ServicesChange | undefined): void {
    if (this.active.get(active.task.id) !== active) return;
    // A removal is dropped only once a second listing confirms it (see dropMissing).
    if (change === undefined || change.removed.length > 0) {
      this.refreshServices(active);
      return;
    }
    if (change.added.length === 0) return;
    void this.startAdded(active, change.added).catch((err: unknown) => {
      this.log.warn({ err, task: active.task.id }, 'cannot start the services the source added; listing it');
      this.refreshServices(active);
    });
  }

  /**
   * Starts services the source says were added to a `*` task's scope as {@link expand} starts the
   * new services of a listing (known, watched in a led shard, queued), but without listing the
   * scope: at 100,000 services an expansion takes about a second, which a new service need not wait
   * for. Expands instead where the answer needs the whole list or the last expansion's outcome (see
   * {@link startsWithoutListing}). Runs after an expansion under way (its listing may predate the
   * change); clears the services' missing marks, as a listing that finds them does; checks and
   * watches each service with no await in between, so that no expansion watches it as well.
   */
  private async startAdded(active: ActiveTask, added: readonly ServiceKey[]): Promise<void> {
    if (active.expanding) await active.expanding.catch(() => []);
    const { task } = active;
    if (this.active.get(task.id) !== active) return;
    if (!this.startsWithoutListing(active, 0)) {
      this.refreshServices(active);
      return;
    }
    const keep = serviceFilter(task.options);
    const services = new Map<string, ServiceKey>();
    for (const service of added) if (keep(service.name)) services.set(serviceSyncKey({ taskId: task.id, service }), service);
    if (services.size === 0) return;
    const source = await this.opts.adapters.get(task.source);
    await this.opts.missing.note(task.id, new Set(services.keys()), [], Date.now());
    if (this.active.get(task.id) !== active) return;
    // No await from here to the last watch.
    const fresh = [...services].filter(([key]) => !active.services.has(key));
    if (!this.startsWithoutListing(active, fresh.length)) {
      this.refreshServices(active);
      return;
    }
    const started: string[] = [];
    for (const [key, service] of fresh) {
      const sync: ServiceSync = { service, shard: this.shardOf(key), unwatch: undefined, confirmed: undefined };
      active.services.set(key, sync);
      if (!this.leads(sync.shard)) continue;
      this.watchService(source, active, key, sync);
      started.push(key);
    }
    await this.startSyncs(started);
  }

  /**
   * Whether `fresh` more services of a `*` task can start without an expansion: the task was
   * expanded here, maps no names (clashes need the whole list), stays within `maxServices` (which
   * services are left out is the listing's order), and its last expansion left nothing out (only an
   * expansion clears {@link ActiveTask.problem}).
   */
  private startsWithoutListing(active: ActiveTask, fresh: number): boolean {
    const { task } = active;
    const maxServices = task.options.maxServices ?? DEFAULT_MAX_SERVICES;
    return active.expanded === true && task.options.mapping === undefined && active.problem === null && active.services.size + fresh <= maxServices;
  }

  /** Lists a `*` task's services again (the source's list changed, or a missing service is due for a recheck); coalesced (see {@link expansion}). */
  private refreshServices(active: ActiveTask): void {
    if (this.active.get(active.task.id) !== active) return;
    void this.expansion(active).catch((err: unknown) => this.log.warn({ err, task: active.task.id }, 'service list refresh failed'));
  }

  /**
   * A full sync: lists the source again (picking up new services and dropping confirmed missing
   * ones), then walks the service syncs of the led shards in slices of {@link FULL_SYNC_SLICE}
   * (each slice's statuses read at once, its due keys queued in one batch, paced by the queues'
   * depth). One full sync of a task walks at a time: a periodic one due meanwhile is dropped, a
   * resync runs after it (several merged into one). Settles once the first slice is queued.
   */
  private fullSync(active: ActiveTask, everything = false): Promise<void> {
    if (this.active.get(active.task.id) !== active) return Promise.resolve();
    const running = active.fullSyncRun;
    if (running) {
      // The periodic one finds the walk still under way: it is that walk.
      if (!everything) return Promise.resolve();
      if (!running.after) {
        let resolve: () => void = () => {};
        const started = new Promise<void>((r) => (resolve = r));
        running.after = { started, resolve };
      }
      return running.after.started;
    }
    let markStarted: () => void = () => {};
    const run: FullSyncRun = { started: new Promise<void>((resolve) => (markStarted = resolve)) };
    active.fullSyncRun = run;
    void this.walkFullSync(active, everything, markStarted)
      .catch((err: unknown) => this.log.warn({ err, task: active.task.id }, 'full sync failed'))
      .finally(() => {
        markStarted();
        if (active.fullSyncRun === run) active.fullSyncRun = undefined;
        const after = run.after;
        if (after) void this.fullSync(active, true).then(after.resolve);
      });
    return run.started;
  }

  private async walkFullSync(active: ActiveTask, everything: boolean, started: () => void): Promise<void> {
    let added: string[] = [];
    try {
      if (!(await this.listKeptByPush(active, everything))) added = await this.expansion(active);
    } catch (err) {
      const message = `cannot list services: ${err instanceof Error ? err.message : String(err)}`;
      await this.opts.store.setTaskError(active.task.id, err instanceof SourceListError ? { code: 'source_unlisted', cluster: active.task.source, message } : { code: 'task_unstartable', message });
    }
    if (this.active.get(active.task.id) !== active) return;
    const fresh = new Set(added);
    const keys = await filterYielding(this.ledKeys(active), (k) => !fresh.has(k));
    if (keys.length === 0) return;
    const due = everything ? undefined : await this.fullSyncFilter(active);
    let shards = new Set<number>();
    for (let at = 0; at < keys.length; at += FULL_SYNC_SLICE) {
      if (at > 0) await this.paceFullSync(active, shards);
      if (this.active.get(active.task.id) !== active) return;
      // Services dropped and shards given up since the walk began are left out.
      const slice = keys.slice(at, at + FULL_SYNC_SLICE).filter((key) => {
        const sync = active.services.get(key);
        return sync !== undefined && this.leads(sync.shard);
      });
      const queued = due ? await due(slice) : slice;
      shards = new Set(queued.map((key) => active.services.get(key)?.shard ?? this.shardOf(key)));
      await this.enqueueAll(queued, 'full');
      started();
    }
  }

  /**
   * Whether this full sync can skip listing the source: a `*` task whose source keeps the scope's
   * list whole by push (`RegistryAdapter.servicesPushed`), watched here since an expansion that
   * worked, so every service that came or went has already been expanded. A resync and every
   * {@link FULL_SYNC_LIST_EVERY}-th full sync list anyway. At 100,000 services a listing is
   * about a second of a worker's CPU, so this is most of a quiet task's cost.
   */
  private async listKeptByPush(active: ActiveTask, everything: boolean): Promise<boolean> {
    const { task } = active;
    if (everything || task.service !== ANY || !active.expanded || !active.unwatchServices) return false;
    active.walks = (active.walks ?? 0) + 1;
    if (active.walks % FULL_SYNC_LIST_EVERY === 0) return false;
    try {
      const source = await this.opts.adapters.get(task.source);
      return source.servicesPushed?.({ namespace: task.namespace, group: task.group }) ?? false;
    } catch {
      return false;
    }
  }

  /**
   * Waits (polling the queues' depth) until the shards the last slice went to hold at most
   * {@link FULL_SYNC_PACE_DEPTH} jobs each on average, or {@link FULL_SYNC_PACE_MAX_WAIT_MS};
   * without a depth to ask (a queue that cannot tell), the next slice follows after a turn of the
   * event loop.
   */
  private async paceFullSync(active: ActiveTask, shards: ReadonlySet<number>): Promise<void> {
    const { queue } = this.opts;
    await sleep(0);
    if (!queue.depth || shards.size === 0) return;
    const until = Date.now() + FULL_SYNC_PACE_MAX_WAIT_MS;
    for (;;) {
      let depth = 0;
      try {
        for (const depths of await Promise.all([...shards].map((shard) => queue.depth?.(shard) ?? 0))) depth += depths;
      } catch {
        return;
      }
      if (depth <= FULL_SYNC_PACE_DEPTH * shards.size || Date.now() >= until || this.active.get(active.task.id) !== active) return;
      await sleep(FULL_SYNC_PACE_POLL_MS);
    }
  }

  /**
   * Which keys of a slice of a full sync need a reconcile (see {@link dueForFullSync}): all, unless
   * the feeds vouch for some. The service syncs of the current round of the task's
   * `verifyIntervalMs` are checked against the destination (see {@link verifyRound}).
   */
  private async fullSyncFilter(active: ActiveTask): Promise<((slice: string[]) => Promise<string[]>) | undefined> {
    const { task } = active;
    // The round comes from the clock, not from this process's count: a new leader of a shard goes on where the last one was.
    const interval = task.options.fullSyncIntervalMs ?? DEFAULT_FULL_SYNC_MS;
    const rounds = Math.max(1, Math.round((task.options.verifyIntervalMs ?? DEFAULT_VERIFY_INTERVAL_MS) / interval));
    const tick = Math.floor(Date.now() / interval);
    const round = tick % rounds;
    const { store } = this.opts;
    try {
      const [source, destination] = await Promise.all([this.opts.adapters.get(task.source), this.opts.adapters.get(task.destination)]);
      if (!source.cachedDigest) return undefined;
      const destinationBound = (await destination.connectionBound?.()) ?? false;
      if (!destinationBound) return undefined;
      const statuses = store.getServiceStatuses
        ? (taskId: string, services: readonly ServiceKey[]) => (store.getServiceStatuses as NonNullable<SyncEngineStore['getServiceStatuses']>).call(store, taskId, services)
        : (taskId: string, services: readonly ServiceKey[]) => Promise.all(services.map((s) => store.getServiceStatus(taskId, s)));
      return async (slice) => {
        try {
          const { due, skipped, verified } = await dueForFullSync({
            taskId: task.id,
            keys: slice,
            serviceOf: (key) => active.services.get(key)?.service,
            confirmed: (key) => active.services.get(key)?.confirmed,
            confirm: (key, digest) => {
              const sync = active.services.get(key);
              if (sync) sync.confirmed = digest;
            },
            rereads: (key) => verifyRound(key, FULL_SYNC_REREAD_EVERY) === tick % FULL_SYNC_REREAD_EVERY,
            source,
            destinationBound,
            verifies: (key) => verifyRound(key, rounds) === round,
            inSync: (key) => this.reconciler.inSync(key),
            statuses,
          });
          if (skipped > 0) this.log.debug({ task: task.id, due: due.length, skipped, verified }, 'full sync: services whose pushed source is unchanged left out');
          return due;
        } catch (err) {
          this.log.debug({ err, task: task.id }, 'full sync filter unavailable; reconciling every service of the slice');
          return slice;
        }
      };
    } catch (err) {
      this.log.debug({ err, task: task.id }, 'full sync filter unavailable; reconciling every service');
      return undefined;
    }
  }

  private async enqueueAll(keys: readonly string[], reason: ReconcileReason): Promise<void> {
    if (keys.length === 0) return;
    const { queue } = this.opts;
    if (queue.enqueueMany) await queue.enqueueMany(keys, reason);
    else await Promise.all(keys.map((key) => queue.enqueue(key, reason)));
  }

  private deactivate(taskId: string): void {
    const active = this.active.get(taskId);
    if (!active) return;
    this.active.delete(taskId);
    clearInterval(active.timer);
    clearTimeout(active.recheck);
    active.unwatchServices?.();
    for (const { unwatch } of active.services.values()) unwatch?.();
    this.opts.heartbeats.clearPrefix(taskKeyPrefix(taskId));
  }
}

/**
 * `mappingClashes` (task-rules) giving the event loop back every few milliseconds: the mapped
 * names that several listed services would take, with those services in list order.
 */
async function clashesYielding(services: readonly ServiceKey[], mapping: TaskSpec['options']['mapping']): Promise<Map<string, ServiceKey[]>> {
  const byTarget = new Map<string, ServiceKey[]>();
  if (mapping === undefined) return byTarget;
  const clock = sliceClock();
  for (const service of services) {
    const target = serviceKeyString(mapService(service, mapping));
    const list = byTarget.get(target);
    if (list) list.push(service);
    else byTarget.set(target, [service]);
    const wait = clock.pause();
    if (wait) await wait;
  }
  for (const [target, list] of byTarget) if (list.length < 2) byTarget.delete(target);
  return byTarget;
}

/** A failure to get a task's services from its source (its adapter, or the list itself). */
class SourceListError extends Error {
  override readonly name = 'SourceListError';
}

/** Runs a call to a task's source; its failure becomes a {@link SourceListError} with the same message. */
async function fromSource<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw new SourceListError(err instanceof Error ? err.message : String(err), { cause: err });
  }
}
