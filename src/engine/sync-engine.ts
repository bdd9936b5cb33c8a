import type { Logger } from 'pino';
import type { Unsubscribe } from '../model/adapter.js';
import {
  DEFAULT_FULL_SYNC_MS,
  serviceKeyString,
  serviceSyncKey,
  type ServiceKey,
  type TaskSpec,
} from '../model/types.js';
import type { ReconcileJobData } from '../queue/shard-queue.js';
import type { AdapterPool } from './adapter-pool.js';
import type { TaskControl } from './control.js';
import type { HeartbeatScheduler } from './heartbeat-scheduler.js';
import type { EngineStore, Reconciler } from './reconciler.js';

/** Where reconcile requests go (the shard queue). */
export interface ReconcileSink {
  enqueue(key: string, reason: ReconcileJobData['reason'], delayMs?: number): Promise<void>;
  /** Many keys at once (batched where the queue can); the engine falls back to `enqueue` per key. */
  enqueueMany?(keys: readonly string[], reason: ReconcileJobData['reason']): Promise<void>;
}

interface ActiveTask {
  task: TaskSpec;
  services: Map<string, { service: ServiceKey; unwatch: Unsubscribe }>;
  timer: NodeJS.Timeout;
  /** For `*` tasks on registries that can tell: stops the watch of the service list. */
  unwatchServices?: Unsubscribe;
}

export interface SyncEngineOptions {
  store: EngineStore;
  adapters: AdapterPool;
  queue: ReconcileSink;
  heartbeats: HeartbeatScheduler;
  reconciler: Reconciler;
  logger: Logger;
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
 */
export class SyncEngine implements TaskControl {
  private readonly active = new Map<string, ActiveTask>();
  private readonly log: Logger;
  private stopped = false;

  constructor(private readonly opts: SyncEngineOptions) {
    this.log = opts.logger.child({ component: 'engine' });
  }

  /** The task, when it runs here (the reconciler reads it from here rather than from the store). */
  activeTask(taskId: string): TaskSpec | undefined {
    return this.active.get(taskId)?.task;
  }

  /** Starts every running task and asks for a first reconcile of each service sync. */
  async start(): Promise<void> {
    this.opts.heartbeats.start();
    const tasks = await this.opts.store.listTasks();
    for (const task of tasks) {
      for (const status of await this.opts.store.listServiceStatus(task.id)) {
        this.opts.reconciler.rememberSourceCount(serviceSyncKey({ taskId: task.id, service: status.service }), status.sourceInstances);
      }
      if (task.state === 'running') await this.activate(task);
    }
    this.log.info({ tasks: tasks.length, running: this.active.size }, 'engine started');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const taskId of [...this.active.keys()]) this.deactivate(taskId);
    this.opts.heartbeats.stop();
  }

  async taskChanged(taskId: string): Promise<void> {
    this.deactivate(taskId);
    const task = await this.opts.store.getTask(taskId);
    if (task?.state === 'running') await this.activate(task);
  }

  async resync(taskId: string): Promise<void> {
    const active = this.active.get(taskId);
    if (active) await this.fullSync(active);
  }

  async removeTask(taskId: string): Promise<void> {
    const task = await this.opts.store.getTask(taskId);
    const known = new Map<string, ServiceKey>();
    for (const [key, s] of this.active.get(taskId)?.services ?? []) known.set(key, s.service);
    this.deactivate(taskId);
    await this.opts.reconciler.drain(taskId);
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
      removed += await this.opts.reconciler.removeCopies(task, service, key);
      await this.opts.store.deleteServiceStatus(taskId, service);
    }
    this.opts.reconciler.forget(taskKeyPrefix(taskId));
    this.log.info({ task: taskId, removed }, 'task removed with its copies');
  }

  async clusterChanged(clusterId: string): Promise<void> {
    const affected = (await this.opts.store.tasksUsingCluster(clusterId)).map((t) => t.id);
    for (const id of affected) this.deactivate(id);
    await this.opts.adapters.invalidate(clusterId);
    for (const id of affected) await this.taskChanged(id);
  }

  private async activate(task: TaskSpec): Promise<void> {
    if (this.stopped) return;
    const interval = task.options.fullSyncIntervalMs ?? DEFAULT_FULL_SYNC_MS;
    const active: ActiveTask = {
      task,
      services: new Map(),
      timer: setInterval(() => void this.fullSync(active).catch((err: unknown) => this.log.warn({ err, task: task.id }, 'full sync failed')), interval),
    };
    active.timer.unref();
    this.active.set(task.id, active);
    try {
      await this.expand(active);
      await this.opts.store.setTaskError(task.id, null);
    } catch (err) {
      const message = `cannot start: ${err instanceof Error ? err.message : String(err)}`;
      this.log.warn({ err, task: task.id }, 'task cannot start yet; retrying at the next full sync');
      await this.opts.store.setTaskError(task.id, message);
    }
    await this.enqueueAll([...active.services.keys()], 'start');
  }

  /** Makes the watched services match the task (one service, or every service for `*`); answers the keys added. */
  private async expand(active: ActiveTask): Promise<string[]> {
    const { task } = active;
    const source = await this.opts.adapters.get(task.source);
    const scope = { namespace: task.namespace, group: task.group };
    const services: ServiceKey[] = task.service === '*' ? await source.listServices(scope) : [{ ...scope, name: task.service }];
    if (this.active.get(task.id) !== active) return [];
    if (task.service === '*' && !active.unwatchServices && source.watchServices) {
      // Services appearing in the source are picked up at once, not at the next full sync.
      active.unwatchServices = source.watchServices(scope, () => {
        void this.expand(active)
          .then((added) => this.enqueueAll(added, 'start'))
          .catch((err: unknown) => this.log.warn({ err, task: task.id }, 'service list refresh failed'));
      });
    }
    const added: string[] = [];
    for (const service of services) {
      const key = serviceSyncKey({ taskId: task.id, service });
      if (active.services.has(key)) continue;
      const unwatch = source.watch(service, () => {
        void this.opts.queue.enqueue(key, 'change').catch((err: unknown) => this.log.warn({ err, key }, 'cannot enqueue change'));
      });
      active.services.set(key, { service, unwatch });
      added.push(key);
      this.log.debug({ task: task.id, service: serviceKeyString(service) }, 'watching');
    }
    return added;
  }

  private async fullSync(active: ActiveTask): Promise<void> {
    if (this.active.get(active.task.id) !== active) return;
    try {
      await this.expand(active);
      await this.opts.store.setTaskError(active.task.id, null);
    } catch (err) {
      await this.opts.store.setTaskError(active.task.id, `cannot list services: ${err instanceof Error ? err.message : String(err)}`);
    }
    await this.enqueueAll([...active.services.keys()], 'full');
  }

  private async enqueueAll(keys: readonly string[], reason: ReconcileJobData['reason']): Promise<void> {
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
    active.unwatchServices?.();
    for (const { unwatch } of active.services.values()) unwatch();
    this.opts.heartbeats.clearPrefix(taskKeyPrefix(taskId));
  }
}
