import type { Logger } from 'pino';
import type { RegistryAdapter } from '../model/adapter.js';
import {
  MARK_TASK,
  instanceId,
  instancesDigest,
  parseServiceSyncKey,
  serviceKeyString,
  type ClusterSpec,
  type Instance,
  type ServiceKey,
  type TaskSpec,
} from '../model/types.js';
import type { AdapterPool } from './adapter-pool.js';
import type { HeartbeatScheduler } from './heartbeat-scheduler.js';
import type { LiveSets } from './live-sets.js';
import type { SourceAddresses } from './source-addresses.js';
import { diff, transform } from './transform.js';

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

  constructor(private readonly opts: ReconcilerOptions) {
    this.confirmEmptyMs = opts.confirmEmptyMs ?? 3_000;
    this.log = opts.logger.child({ component: 'reconciler' });
  }

  /** Seeds the last known source size of a service sync (from stored status after a restart). */
  rememberSourceCount(key: string, count: number): void {
    this.knownSourceCounts.set(key, count);
  }

  /** Runs one reconcile; rejects when a registry could not be read or written (the caller retries). */
  reconcile(key: string, since: number = Date.now()): Promise<ReconcileOutcome> {
    const { taskId } = parseServiceSyncKey(key);
    const run = this.run(key, since);
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
    const owned = (await destination.listInstances(service)).filter((i) => i.metadata[MARK_TASK] === task.id);
    if (owned.length > 0) await destination.apply(service, { upsert: [], remove: owned });
    return owned.length;
  }

  private async run(key: string, since: number): Promise<ReconcileOutcome> {
    const { taskId, service } = parseServiceSyncKey(key);
    const { store, heartbeats } = this.opts;
    const task = this.opts.activeTask(taskId);
    if (!task || task.state !== 'running') {
      heartbeats.clear(key);
      return { kind: 'inactive' };
    }
    const log = this.log.child({ task: taskId, service: serviceKeyString(service) });
    let source: RegistryAdapter;
    let destination: RegistryAdapter;
    let sourceInstances: Instance[];
    let destinationInstances: Instance[];
    try {
      source = await this.opts.adapters.get(task.source);
      destination = await this.opts.adapters.get(task.destination);
      sourceInstances = await source.listInstances(service);
    } catch (err) {
      await this.recordError(taskId, service, `cannot read source ${task.source}: ${messageOf(err)}`);
      throw err;
    }

    const known = this.knownSourceCounts.get(key) ?? 0;
    if (sourceInstances.length === 0 && known > 0) {
      const first = this.emptySince.get(key);
      const now = Date.now();
      if (first === undefined || now - first < this.confirmEmptyMs) {
        if (first === undefined) this.emptySince.set(key, now);
        const wait = first === undefined ? this.confirmEmptyMs : this.confirmEmptyMs - (now - first);
        const reason = `source ${task.source} suddenly lists no instances (had ${known}); holding the copies until a read ${this.confirmEmptyMs} ms later confirms it`;
        log.warn({ known }, 'source dropped to zero instances; holding');
        await this.recordError(taskId, service, reason);
        await this.opts.requeue(key, wait + 10);
        return { kind: 'held', reason };
      }
      log.info({ known }, 'drop to zero confirmed');
    }
    this.emptySince.delete(key);

    try {
      destinationInstances = await destination.listInstances(service);
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
      labels: {
        cluster: sourceSpec?.labels ?? {},
        cmdb: cmdb ? (ip) => cmdb.labelsOf(ip) : undefined,
        names: task.options.labels,
        override: task.options.labelsOverride ?? false,
      },
    });
    this.opts.sourceAddresses?.set(key, sourceInstances.map((i) => i.ip));
    const plan = diff(desired, destinationInstances, taskId);
    if (plan.upsert.length > 0 || plan.remove.length > 0) {
      try {
        await destination.apply(service, { upsert: plan.upsert, remove: plan.remove });
      } catch (err) {
        await this.recordError(taskId, service, `cannot write destination ${task.destination}: ${messageOf(err)}`);
        // Refused for good (an object regsync does not own is in the way): the status says why, and
        // the next full sync tries again; retrying the same plan now cannot succeed.
        if ((err as { retryable?: unknown } | null)?.retryable === false) return { kind: 'refused', reason: messageOf(err) };
        throw err;
      }
      log.debug({ upserts: plan.upsert.length, removes: plan.remove.length }, 'applied');
    }
    const live = [...plan.upsert, ...plan.unchanged];
    const shard = this.opts.shardOf?.(key) ?? 0;
    const leading = this.opts.leads?.(shard) ?? true;
    if (leading && destination.retain && plan.unchanged.length > 0) {
      try {
        await destination.retain(service, plan.unchanged);
      } catch (err) {
        await this.recordError(taskId, service, `cannot write destination ${task.destination}: ${messageOf(err)}`);
        throw err;
      }
    }
    if (leading && this.opts.activeTask(taskId) !== undefined) heartbeats.set(key, destination, service, live, plan.upsert);
    else heartbeats.clear(key);
    // A lost record is written again by the next reconcile (nothing marks it written meanwhile).
    await this.opts.liveSets?.put(key, shard, live, !leading).catch((err: unknown) => log.warn({ err }, 'cannot record the copies to beat'));
    this.knownSourceCounts.set(key, sourceInstances.length);

    const issues = source.readIssues?.(service) ?? [];
    const conflictNote =
      plan.conflicts.length > 0
        ? `${plan.conflicts.length} instance(s) not written: their address is taken in ${task.destination} by an instance this task does not own (${plan.conflicts
            .slice(0, 5)
            .map(instanceId)
            .join(', ')})`
        : null;
    if (conflictNote) log.warn({ conflicts: plan.conflicts.length }, 'address conflicts in destination');
    await store.putServiceStatus(taskId, {
      service,
      sourceInstances: sourceInstances.length,
      destinationInstances: live.length,
      lastSyncAt: new Date().toISOString(),
      lagMs: Math.max(0, Date.now() - since),
      lastError: [conflictNote, ...issues.map((i) => `skipped in source ${task.source}: ${i}`)].filter((n) => n !== null).join('; ') || null,
      sourceDigest: instancesDigest(sourceInstances),
    });
    return { kind: 'synced', upserts: plan.upsert.length, removes: plan.remove.length, conflicts: plan.conflicts.length };
  }

  private async recordError(taskId: string, service: ServiceKey, message: string): Promise<void> {
    const previous = (await this.opts.store.listServiceStatus(taskId).catch(() => [])).find(
      (s) => serviceKeyString(s.service) === serviceKeyString(service),
    );
    await this.opts.store
      .putServiceStatus(taskId, {
        service,
        sourceInstances: previous?.sourceInstances ?? 0,
        destinationInstances: previous?.destinationInstances ?? 0,
        lastSyncAt: previous?.lastSyncAt ?? null,
        lagMs: previous?.lagMs ?? null,
        lastError: message,
        sourceDigest: previous?.sourceDigest,
      })
      .catch((err: unknown) => this.log.warn({ err }, 'cannot record status'));
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
