import type { Redis } from 'ioredis';
import { MAX_HELD_ADDRESSES, compareServiceKeys, type ClusterSpec, type HeldDeletion, type ServiceKey, type TaskOptions, type TaskSpec, type TaskState } from '../model/index.js';
import { compareStrings, isClusterSpec, isGuardState, isServiceStatus, isTaskSpec, parseRecord } from './records.js';
import { CREATE_TASKS, DELETE_TASK, PUT_CLUSTER, PUT_STATUS_IF_TASK, PUT_STATUSES_IF_TASK, REPLACE_CLUSTER_IF, SET_ERROR_IF_TASK, WRITE_TASK } from './scripts.js';
import { SecretBox, type SecretPlace } from '../secrets/secret-box.js';
import type { GuardState, ServiceStatus, SkippedCounts, TaskProblem, WarmupHold } from '../model/service-status.js';
import { rememberSecrets } from '../log.js';
import { StoreError } from './store-error.js';
import { evalScript } from '../util/redis-script.js';
import { redisKeys } from '../util/redis-keys.js';

/**
 * What makes two tasks the same work: copying one service (or `*`) of one namespace and group from
 * one cluster to another. The store allows one task per selector, since two tasks writing the same
 * instances into the same destination would keep taking the copies from each other.
 */
export type TaskSelector = Pick<TaskSpec, 'source' | 'destination' | 'namespace' | 'group' | 'service'>;

/** What a create-or-replace did: `unchanged` wrote nothing (the stored record was the same already). */
export type PutResult = 'created' | 'replaced' | 'unchanged';

/**
 * A task as stored, with an opaque version of its record for {@link RegsyncStore.replaceTask}: a
 * write that depends on what was read, such as a replace keeping the creation time, goes through
 * only when the record is still the one read.
 */
export interface VersionedTask {
  spec: TaskSpec;
  version: string;
}

/** How often {@link RegsyncStore.setTaskState} re-reads after losing a race before giving up. */
const MAX_CAS_ATTEMPTS = 20;

/** Statuses of one task written by one script at most (each is two script arguments, well within Lua's stack). */
const STATUS_BATCH_MAX = 256;

/** Status writes waiting for the end of the event-loop turn: per task, field/value pairs and their writers. */
interface StatusBatch {
  byTask: Map<string, { args: string[]; waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> }>;
  timer: NodeJS.Immediate;
}

/**
 * Clusters, tasks and per-service status in Redis: the durable state every regsync process shares.
 * Nothing is cached in memory, so a restarted process (or another replica) sees the same data.
 *
 * Layout, under `prefix` (default `regsync`):
 * - `<p>:cluster:<id>` JSON {@link ClusterSpec}, indexed by the set `<p>:clusters`;
 * - `<p>:task:<id>` JSON {@link TaskSpec}, indexed by the set `<p>:tasks`, and by the hashes
 *   `<p>:task-selectors` (selector -> id) and `<p>:task-selector-of` (id -> selector);
 * - `<p>:task-status:<id>` hash, one JSON {@link ServiceStatus} per service;
 * - `<p>:task-error:<id>` the task-level error message.
 *
 * Records and their indexes change together (MULTI, or a Lua script where the write depends on
 * what is stored). A value that is not the JSON record it should be is reported as a
 * {@link StoreError} naming its key, never skipped.
 *
 * A cluster's secrets (its password) are encrypted on write and decrypted on read by the
 * {@link SecretBox} given (AES-256-GCM envelopes `enc:v1:...`); nothing outside the store sees
 * ciphertext. Without a key they are stored as given. {@link inspectSecrets} and
 * {@link resealSecrets} serve the start-up check and `regsync secrets rotate`.
 *
 * Deliberately left out: referential integrity between tasks and clusters (the API checks that a
 * task's clusters exist and that a deleted cluster is unused, non-atomically), Redis Cluster hash
 * tags, and change notifications (callers tell the engine through `TaskControl`).
 */
export class RegsyncStore {
  /**
   * @param redis a connected client; the store never closes it
   * @param prefix key prefix, so that several installations (or tests) can share one Redis
   * @param secrets encrypts and decrypts cluster secrets; default none (stored as given)
   */
  private statusBatch: StatusBatch | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'regsync',
    private readonly secrets: SecretBox = SecretBox.none,
  ) {}

  // ---- clusters ----

  /**
   * Creates or replaces a cluster, deciding atomically which it was; writes nothing (`unchanged`)
   * when the stored cluster equals `spec` already (same fields, options and labels in any key order).
   */
  async putCluster(spec: ClusterSpec): Promise<PutResult> {
    const stored = this.sealCluster(storedCluster(spec));
    const key = this.clusterKey(stored.id);
    const reply = await evalScript(this.redis, PUT_CLUSTER, 2, key, this.clustersKey(), stored.id, canonicalJson(stored));
    if (reply === 'created' || reply === 'replaced' || reply === 'unchanged') return reply;
    throw new StoreError('unexpected_reply', key, `writing ${key}: unexpected script reply ${JSON.stringify(reply)}`);
  }

  /** Creates a cluster unless one with the same id exists; atomic, so two creators cannot both win. */
  async createCluster(spec: ClusterSpec): Promise<'created' | 'exists'> {
    const stored = this.sealCluster(storedCluster(spec));
    // SET NX decides; the SADD is a no-op when the id is already there (a record always has its index entry).
    const replies = checkExec(
      await this.redis
        .multi()
        .set(this.clusterKey(stored.id), canonicalJson(stored), 'NX')
        .sadd(this.clustersKey(), stored.id)
        .exec(),
    );
    return replies[0] === 'OK' ? 'created' : 'exists';
  }

  /** A cluster by id; undefined when there is none. */
  async getCluster(id: string): Promise<ClusterSpec | undefined> {
    const key = this.clusterKey(id);
    const raw = await this.redis.get(key);
    return raw === null ? undefined : this.parseCluster(key, id, raw);
  }

  /** Every cluster, sorted by id. */
  async listClusters(): Promise<ClusterSpec[]> {
    const ids = (await this.redis.smembers(this.clustersKey())).sort(compareStrings);
    if (ids.length === 0) return [];
    const keys = ids.map((id) => this.clusterKey(id));
    const raws = await this.redis.mget(keys);
    const clusters: ClusterSpec[] = [];
    raws.forEach((raw, i) => {
      // A missing record behind an index entry can only come from a hand-made DEL; it is gone, skip it.
      if (raw !== null) clusters.push(this.parseCluster(keys[i] as string, ids[i] as string, raw));
    });
    return clusters;
  }

  /** Deletes a cluster; false when there was none. Does not look at tasks using it. */
  async deleteCluster(id: string): Promise<boolean> {
    const replies = checkExec(
      await this.redis.multi().del(this.clusterKey(id)).srem(this.clustersKey(), id).exec(),
    );
    return replies[0] === 1;
  }

  // ---- cluster secrets ----

  /**
   * Where every stored secret is and how: in clear, or under which key. Reads the records without
   * decrypting anything, so it answers whatever keys this process has.
   */
  async inspectSecrets(): Promise<StoredSecret[]> {
    const found: StoredSecret[] = [];
    for (const { key, id, raw } of await this.rawClusters()) {
      const spec = parseRecord(key, raw, 'cluster', isClusterSpec);
      for (const [place, value] of secretsOf(id, spec)) found.push({ ...place, keyId: SecretBox.keyIdOf(value) });
    }
    return found;
  }

  /**
   * Writes again, under the current key, every stored secret that is in clear (`clear`) or under
   * another key too (`all`, a rotation). Each record is replaced only if unchanged since read, and
   * read again when it was not, so concurrent writes and rotations are safe; a secret is decrypted
   * with any key of the box. Throws when a secret needs a key the box lacks (nothing is written for
   * that record) or when there is no current key.
   */
  async resealSecrets(scope: 'clear' | 'all'): Promise<{ resealed: SecretPlace[]; untouched: number }> {
    if (this.secrets.keyId === undefined) throw new Error('no current secret key: nothing to encrypt with');
    const stale = (value: string): boolean => (scope === 'all' ? this.secrets.needsReseal(value) : !SecretBox.isSealed(value));
    const resealed: SecretPlace[] = [];
    let untouched = 0;
    for (const { key, id, raw: first } of await this.rawClusters()) {
      let raw: string | null = first;
      for (let attempt = 1; raw !== null; attempt += 1) {
        const all = secretsOf(id, parseRecord(key, raw, 'cluster', isClusterSpec));
        const places = all.filter(([, value]) => stale(value)).map(([place]) => place);
        if (places.length === 0) {
          untouched += all.length;
          break;
        }
        const next = canonicalJson(this.sealCluster(this.parseCluster(key, id, raw)));
        if ((await evalScript(this.redis, REPLACE_CLUSTER_IF, 1, key, raw, next)) === 1) {
          resealed.push(...places);
          untouched += all.length - places.length;
          break;
        }
        if (attempt >= MAX_CAS_ATTEMPTS) throw new StoreError('write_conflict', key, `${key} kept changing; gave up encrypting its secrets after ${MAX_CAS_ATTEMPTS} attempts`);
        raw = await this.redis.get(key);
      }
    }
    return { resealed, untouched };
  }

  // ---- tasks ----

  /**
   * Creates a task atomically. `exists` when the id is taken, or when another task already has the
   * same {@link TaskSelector} (see {@link findTaskBySelector} to tell which).
   */
  async createTask(spec: TaskSpec): Promise<'created' | 'exists'> {
    const reply = await this.writeTask(storedTask(spec), 'create');
    return reply === 'created' ? 'created' : 'exists';
  }

  /**
   * Creates every task of `specs`, or none: `exists` names the first (by position) whose id is
   * taken or whose {@link TaskSelector} another task has. The ids and selectors of `specs` must
   * differ among themselves (the caller checks that; the store would let the last one win).
   */
  async createTasks(specs: readonly TaskSpec[]): Promise<{ result: 'created' } | { result: 'exists'; index: number }> {
    if (specs.length === 0) return { result: 'created' };
    const stored = specs.map(storedTask);
    const keys = [this.tasksKey(), this.selectorsKey(), this.selectorOfKey(), ...stored.map((t) => this.taskKey(t.id))];
    const args = stored.flatMap((t) => [t.id, canonicalJson(t), selectorOf(t)]);
    const reply = await evalScript(this.redis, CREATE_TASKS, keys.length, ...keys, ...args);
    if (reply === 'ok') return { result: 'created' };
    if (Array.isArray(reply) && typeof reply[0] === 'number') return { result: 'exists', index: reply[0] - 1 };
    throw new StoreError('unexpected_reply', this.tasksKey(), `creating tasks: unexpected script reply ${JSON.stringify(reply)}`);
  }

  /**
   * Creates or replaces a task, deciding atomically which it was (`unchanged`: the stored task
   * equals `spec`, nothing written). Rejects with a `duplicate_task` {@link StoreError} when another
   * task already has the same {@link TaskSelector}. Keeps the task's status.
   */
  async putTask(spec: TaskSpec): Promise<PutResult> {
    const stored = storedTask(spec);
    const reply = await this.writeTask(stored, 'put');
    if (reply === 'duplicate') throw duplicateTask(this.selectorsKey(), stored);
    if (reply === 'exists' || reply === 'changed') throw new StoreError('unexpected_reply', this.taskKey(spec.id), `writing task ${spec.id}: ${reply}`);
    return reply;
  }

  /** A task with the version of its record (see {@link replaceTask}); undefined when there is none. */
  async getVersionedTask(id: string): Promise<VersionedTask | undefined> {
    const key = this.taskKey(id);
    const raw = await this.redis.get(key);
    return raw === null ? undefined : { spec: this.parseTask(key, id, raw), version: raw };
  }

  /**
   * Writes `spec` only if the task is still as read: `version` from {@link getVersionedTask}, or
   * undefined for "there is no such task". `changed` when it is not (read again and retry); else as
   * {@link putTask}, including the `duplicate_task` rejection.
   */
  async replaceTask(spec: TaskSpec, version: string | undefined): Promise<PutResult | 'changed'> {
    const stored = storedTask(spec);
    const reply = await this.writeTask(stored, version === undefined ? 'create' : 'replace', version ?? '');
    if (reply === 'duplicate') throw duplicateTask(this.selectorsKey(), stored);
    return reply === 'exists' ? 'changed' : reply;
  }

  /** A task by id; undefined when there is none. */
  async getTask(id: string): Promise<TaskSpec | undefined> {
    const key = this.taskKey(id);
    const raw = await this.redis.get(key);
    return raw === null ? undefined : this.parseTask(key, id, raw);
  }

  /** Every task, sorted by id. */
  async listTasks(): Promise<TaskSpec[]> {
    const ids = (await this.redis.smembers(this.tasksKey())).sort(compareStrings);
    if (ids.length === 0) return [];
    const keys = ids.map((id) => this.taskKey(id));
    const raws = await this.redis.mget(keys);
    const tasks: TaskSpec[] = [];
    raws.forEach((raw, i) => {
      if (raw !== null) tasks.push(this.parseTask(keys[i] as string, ids[i] as string, raw));
    });
    return tasks;
  }

  /** The task that copies this selector, if any. */
  async findTaskBySelector(selector: TaskSelector): Promise<TaskSpec | undefined> {
    const id = await this.redis.hget(this.selectorsKey(), selectorOf(selector));
    return id === null ? undefined : this.getTask(id);
  }

  /** Deletes a task with its service statuses and task error; false when there was none. */
  async deleteTask(id: string): Promise<boolean> {
    this.flushStatuses();
    const reply = await evalScript(
      this.redis,
      DELETE_TASK,
      7,
      this.taskKey(id),
      this.tasksKey(),
      this.selectorsKey(),
      this.selectorOfKey(),
      this.statusKey(id),
      this.errorKey(id),
      this.guardKey(id),
      id,
    );
    return reply === 1;
  }

  /**
   * Tasks whose source or destination is the cluster, sorted by id. Reads every task: task counts
   * are small and this spares an index that could drift.
   */
  async tasksUsingCluster(clusterId: string): Promise<TaskSpec[]> {
    return (await this.listTasks()).filter((t) => t.source === clusterId || t.destination === clusterId);
  }

  /**
   * Sets a task's state and answers the updated task, or undefined when there is no such task.
   * A compare-and-set on the whole record, so a concurrent `putTask` is never overwritten with
   * stale fields.
   */
  async setTaskState(id: string, state: TaskState): Promise<TaskSpec | undefined> {
    const key = this.taskKey(id);
    for (let attempt = 1; attempt <= MAX_CAS_ATTEMPTS; attempt += 1) {
      const raw = await this.redis.get(key);
      if (raw === null) return undefined;
      const current = this.parseTask(key, id, raw);
      if (current.state === state) return current;
      const next = storedTask({ ...current, state });
      const reply = await this.writeTask(next, 'replace', raw);
      if (reply === 'replaced' || reply === 'unchanged') return next;
      if (reply === 'duplicate') throw duplicateTask(this.selectorsKey(), next);
      // 'changed': someone wrote the task meanwhile; read again.
    }
    throw new StoreError('write_conflict', key, `${key} kept changing; gave up setting its state after ${MAX_CAS_ATTEMPTS} attempts`);
  }

  // ---- status ----

  /**
   * Records the status of one service of a task, replacing the previous one. Writes nothing when
   * the task does not exist, so that a reconcile finishing after a delete leaves no orphan status
   * behind. Resolves to nothing (the engine's `EngineStore` contract); read back to tell. Writes
   * made in one turn of the event loop go out together (see {@link flushStatuses}); each resolves
   * once its batch is written.
   */
  putServiceStatus(taskId: string, status: ServiceStatus): Promise<void> {
    const stored = storedStatus(status);
    let batch = this.statusBatch;
    if (!batch) {
      batch = { byTask: new Map(), timer: setImmediate(() => this.flushStatuses()) };
      this.statusBatch = batch;
    }
    let entry = batch.byTask.get(taskId);
    if (!entry) {
      entry = { args: [], waiters: [] };
      batch.byTask.set(taskId, entry);
    }
    entry.args.push(statusField(stored.service), JSON.stringify(stored));
    const written = new Promise<void>((resolve, reject) => entry.waiters.push({ resolve, reject }));
    if (entry.waiters.length >= STATUS_BATCH_MAX) this.flushStatuses();
    return written;
  }

  /**
   * Sends the status writes made since the last turn of the event loop: one script per task
   * (`PUT_STATUSES_IF_TASK`), so that reconciles finishing together cost one write, not one each.
   * Every other use of the status hashes sends them first, so that commands reach Redis in the
   * order they were made (a write then a delete of the same status ends deleted).
   */
  private flushStatuses(): void {
    const batch = this.statusBatch;
    if (!batch) return;
    this.statusBatch = undefined;
    clearImmediate(batch.timer);
    for (const [taskId, { args, waiters }] of batch.byTask) {
      // evalScript sends its command before its first await: the order of the writes holds.
      evalScript(this.redis, PUT_STATUSES_IF_TASK, 2, this.taskKey(taskId), this.statusKey(taskId), ...args).then(
        () => {
          for (const w of waiters) w.resolve();
        },
        (err: unknown) => {
          for (const w of waiters) w.reject(err);
        },
      );
    }
  }

  /** Statuses of every service of a task, sorted by namespace, group and name; empty for an unknown task. */
  async listServiceStatus(taskId: string): Promise<ServiceStatus[]> {
    this.flushStatuses();
    const key = this.statusKey(taskId);
    const fields = await this.redis.hgetall(key);
    const statuses = Object.entries(fields).map(([field, raw]) =>
      parseRecord(`${key} field ${field}`, raw, 'service status', isServiceStatus),
    );
    return statuses.sort((a, b) => compareServiceKeys(a.service, b.service));
  }

  /** The status of one service of a task, if there is one. */
  async getServiceStatus(taskId: string, service: ServiceKey): Promise<ServiceStatus | undefined> {
    this.flushStatuses();
    const key = this.statusKey(taskId);
    const field = statusField(service);
    const raw = await this.redis.hget(key, field);
    return raw === null ? undefined : parseRecord(`${key} field ${field}`, raw, 'service status', isServiceStatus);
  }

  /**
   * The statuses of many services of a task, in the order asked (undefined where there is none):
   * one HMGET, so that a full sync reads a slice of statuses in one round trip.
   */
  async getServiceStatuses(taskId: string, services: readonly ServiceKey[]): Promise<Array<ServiceStatus | undefined>> {
    if (services.length === 0) return [];
    this.flushStatuses();
    const key = this.statusKey(taskId);
    const fields = services.map(statusField);
    const raws = await this.redis.hmget(key, ...fields);
    return raws.map((raw, i) => (raw === null ? undefined : parseRecord(`${key} field ${fields[i]}`, raw, 'service status', isServiceStatus)));
  }

  /** The service sync keys (see `serviceSyncKey`) of every service with a status in a task; cheap (field names only). */
  async statusKeys(taskId: string): Promise<string[]> {
    this.flushStatuses();
    const fields = await this.redis.hkeys(this.statusKey(taskId));
    // Both are the same encoded components, joined differently.
    return fields.map((field) => `${encodeURIComponent(taskId)}|${field.split('/').join('|')}`);
  }

  /** Forgets one service's status (the service vanished from a `*` task); a no-op when there is none. */
  async deleteServiceStatus(taskId: string, service: ServiceKey): Promise<void> {
    this.flushStatuses();
    await this.redis.hdel(this.statusKey(taskId), statusField(service));
  }

  /**
   * What the reconcile's guards remember of one service between reads (the hash
   * `<p>:task-guard:<task>`); empty when nothing. Kept apart from the status, which every reconcile
   * replaces, so that only a reconcile with something to guard reads or writes it.
   */
  async getGuard(taskId: string, service: ServiceKey): Promise<GuardState> {
    const key = this.guardKey(taskId);
    const field = statusField(service);
    const raw = await this.redis.hget(key, field);
    return raw === null ? {} : parseRecord(`${key} field ${field}`, raw, 'guard state', isGuardState);
  }

  /** Replaces what the guards remember of one service; an empty state forgets it. */
  async putGuard(taskId: string, service: ServiceKey, state: GuardState): Promise<void> {
    const stored = storedGuard(state);
    if (stored.emptySince === undefined && stored.copies === undefined) await this.redis.hdel(this.guardKey(taskId), statusField(service));
    else await evalScript(this.redis, PUT_STATUS_IF_TASK, 2, this.taskKey(taskId), this.guardKey(taskId), statusField(service), JSON.stringify(stored));
  }

  /**
   * Lets the next reconcile of each of `services` apply the mass deletion the guard holds (see the
   * task option `massDeletionPercent`); a release not taken within an hour lapses.
   */
  async releaseHeld(taskId: string, services: readonly ServiceKey[]): Promise<void> {
    if (services.length === 0) return;
    const pipeline = this.redis.pipeline();
    for (const service of services) pipeline.set(this.releaseKey(taskId, service), '1', 'EX', 3600);
    await pipeline.exec();
  }

  /** Takes (reads and clears) a release of `service`'s held mass deletion; true when there was one. */
  async takeRelease(taskId: string, service: ServiceKey): Promise<boolean> {
    return (await this.redis.getdel(this.releaseKey(taskId, service))) !== null;
  }

  /**
   * Sets the task-level error (one that stops the whole task, such as an unreachable source), or
   * clears it with null. Writes nothing when the task does not exist (as {@link putServiceStatus}).
   */
  async setTaskError(taskId: string, problem: TaskProblem | null): Promise<void> {
    const args = problem === null ? ['clear'] : ['set', JSON.stringify({ code: problem.code, cluster: problem.cluster, message: problem.message })];
    await evalScript(this.redis, SET_ERROR_IF_TASK, 2, this.taskKey(taskId), this.errorKey(taskId), ...args);
  }

  /** The text of the task-level problem, or null when there is none. */
  async getTaskError(taskId: string): Promise<string | null> {
    return (await this.getTaskProblem(taskId))?.message ?? null;
  }

  /** The task-level problem, or null when there is none (a plain message stored by an older build counts as `task_unstartable`). */
  async getTaskProblem(taskId: string): Promise<TaskProblem | null> {
    const raw = await this.redis.get(this.errorKey(taskId));
    if (raw === null) return null;
    try {
      const value = JSON.parse(raw) as Partial<TaskProblem> | null;
      if (value !== null && typeof value === 'object' && typeof value.code === 'string' && typeof value.message === 'string') {
        return { code: value.code, ...(typeof value.cluster === 'string' ? { cluster: value.cluster } : {}), message: value.message };
      }
    } catch {
      // a plain message
    }
    return { code: 'task_unstartable', message: raw };
  }

  // ---- internals ----

  private async writeTask(
    spec: TaskSpec,
    mode: 'create' | 'put' | 'replace',
    expected = '',
  ): Promise<PutResult | 'exists' | 'changed' | 'duplicate'> {
    const key = this.taskKey(spec.id);
    const reply = await evalScript(
      this.redis,
      WRITE_TASK,
      4,
      key,
      this.tasksKey(),
      this.selectorsKey(),
      this.selectorOfKey(),
      spec.id,
      mode,
      expected,
      canonicalJson(spec),
      selectorOf(spec),
    );
    if (reply === 'created' || reply === 'replaced' || reply === 'unchanged' || reply === 'exists' || reply === 'changed' || reply === 'duplicate') return reply;
    throw new StoreError('unexpected_reply', key, `writing ${key}: unexpected script reply ${JSON.stringify(reply)}`);
  }

  /**
   * A stored cluster, its secrets decrypted (a {@link SecretKeyError} when one needs a key the box
   * lacks) and remembered, so that no log line or message of this process shows them.
   */
  private parseCluster(key: string, id: string, raw: string): ClusterSpec {
    const spec = parseRecord(key, raw, 'cluster', isClusterSpec);
    if (spec.id !== id) throw new StoreError('corrupt_record', key, `${key} holds cluster ${JSON.stringify(spec.id)}`);
    if (spec.password !== undefined) spec.password = this.secrets.open(spec.password, { cluster: id, field: 'password' });
    rememberSecrets(spec.password);
    return spec;
  }

  /** The record to write for a cluster: its secrets sealed by the box (and remembered, as those read). */
  private sealCluster(spec: ClusterSpec): ClusterSpec {
    rememberSecrets(spec.password);
    return spec.password === undefined ? spec : { ...spec, password: this.secrets.seal(spec.password, { cluster: spec.id, field: 'password' }) };
  }

  /** Every cluster record as stored, by id. */
  private async rawClusters(): Promise<Array<{ key: string; id: string; raw: string }>> {
    const ids = (await this.redis.smembers(this.clustersKey())).sort(compareStrings);
    if (ids.length === 0) return [];
    const keys = ids.map((id) => this.clusterKey(id));
    const raws = await this.redis.mget(keys);
    return ids.flatMap((id, i) => (raws[i] == null ? [] : [{ key: keys[i] as string, id, raw: raws[i] as string }]));
  }

  private parseTask(key: string, id: string, raw: string): TaskSpec {
    const spec = parseRecord(key, raw, 'task', isTaskSpec);
    if (spec.id !== id) throw new StoreError('corrupt_record', key, `${key} holds task ${JSON.stringify(spec.id)}`);
    return spec;
  }

  private clustersKey(): string {
    return redisKeys.clusters(this.prefix);
  }

  private clusterKey(id: string): string {
    return redisKeys.cluster(this.prefix, id);
  }

  private tasksKey(): string {
    return redisKeys.tasks(this.prefix);
  }

  private taskKey(id: string): string {
    return redisKeys.task(this.prefix, id);
  }

  private selectorsKey(): string {
    return redisKeys.taskSelectors(this.prefix);
  }

  private selectorOfKey(): string {
    return redisKeys.taskSelectorOf(this.prefix);
  }

  private statusKey(taskId: string): string {
    return redisKeys.taskStatus(this.prefix, taskId);
  }

  private releaseKey(taskId: string, service: ServiceKey): string {
    return redisKeys.release(this.prefix, taskId, statusField(service));
  }

  private guardKey(taskId: string): string {
    return redisKeys.taskGuard(this.prefix, taskId);
  }

  private errorKey(taskId: string): string {
    return redisKeys.taskError(this.prefix, taskId);
  }
}

/**
 * JSON with the keys of every object sorted, so that equal records are equal strings whatever
 * order a client sent their options in (arrays keep their order: it means something).
 */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}

/** MULTI replies without per-command errors; ioredis answers null when the transaction was aborted. */
function checkExec(replies: [Error | null, unknown][] | null): unknown[] {
  if (replies === null) throw new Error('Redis transaction was aborted');
  return replies.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}

/** Where one stored secret is, and the id of the key it is encrypted with (undefined: in clear). */
export interface StoredSecret extends SecretPlace {
  keyId: string | undefined;
}

/** The secrets a cluster record carries, with their places: its password (the kinds declare no secret option). */
function secretsOf(id: string, spec: ClusterSpec): Array<[SecretPlace, string]> {
  return spec.password === undefined ? [] : [[{ cluster: id, field: 'password' }, spec.password]];
}

/** Only the fields of a ClusterSpec, in a fixed order: stray properties of the caller's object are not stored. */
function storedCluster(spec: ClusterSpec): ClusterSpec {
  return {
    id: spec.id,
    kind: spec.kind,
    endpoints: [...spec.endpoints],
    namespace: spec.namespace,
    username: spec.username,
    password: spec.password,
    labels: { ...spec.labels },
    options: { ...spec.options },
  };
}

function storedTask(spec: TaskSpec): TaskSpec {
  return {
    id: spec.id,
    source: spec.source,
    destination: spec.destination,
    service: spec.service,
    group: spec.group,
    namespace: spec.namespace,
    options: storedTaskOptions(spec.options),
    state: spec.state,
    createdAt: spec.createdAt,
  };
}

/** The known task options only, without undefined fields (a deep copy). */
function storedTaskOptions(options: TaskOptions): TaskOptions {
  const stored: Record<string, unknown> = {};
  for (const key of TASK_OPTION_KEYS) {
    const value = options[key];
    if (value !== undefined) stored[key] = structuredClone(value);
  }
  return stored as TaskOptions;
}

/** Every field of {@link TaskOptions}; the compiler checks that none is missing. */
const TASK_OPTION_KEYS = Object.keys({
  fullSyncIntervalMs: true,
  verifyIntervalMs: true,
  labels: true,
  labelsOverride: true,
  include: true,
  exclude: true,
  mapping: true,
  maxServices: true,
  maxInstances: true,
  massDeletionPercent: true,
  massDeletionMinCopies: true,
  massDeletionWindowMs: true,
  massDeletionConfirm: true,
} satisfies Record<keyof TaskOptions, true>) as Array<keyof TaskOptions>;

function storedStatus(status: ServiceStatus): ServiceStatus {
  return {
    service: { namespace: status.service.namespace, group: status.service.group, name: status.service.name },
    sourceInstances: status.sourceInstances,
    destinationInstances: status.destinationInstances,
    lastSyncAt: status.lastSyncAt,
    lagMs: status.lagMs,
    lastError: status.lastError,
    ...(status.problems !== undefined ? { problems: status.problems.map((p) => ({ code: p.code, side: p.side, cluster: p.cluster, message: p.message, ...(p.cause !== undefined ? { cause: p.cause } : {}) })) } : {}),
    ...(status.sourceDigest !== undefined ? { sourceDigest: status.sourceDigest } : {}),
    ...(status.held ? { held: storedHeld(status.held) } : {}),
    ...(status.warmup ? { warmup: storedWarmup(status.warmup) } : {}),
    ...(status.skipped !== undefined ? { skipped: storedSkipped(status.skipped) } : {}),
  };
}

function storedSkipped(skipped: SkippedCounts): SkippedCounts {
  const out: SkippedCounts = {};
  for (const k of ['marked', 'foreign', 'unhealthy', 'disabled', 'conflicting'] as const) if (typeof skipped[k] === 'number') out[k] = skipped[k];
  return out;
}

function storedHeld(held: HeldDeletion): HeldDeletion {
  return {
    removes: held.removes,
    copies: held.copies,
    since: held.since,
    confirm: held.confirm,
    ...(held.peak !== undefined ? { peak: held.peak } : {}),
    ...(held.addresses !== undefined ? { addresses: held.addresses.slice(0, MAX_HELD_ADDRESSES) } : {}),
  };
}

function storedWarmup(warmup: WarmupHold): WarmupHold {
  return { cluster: warmup.cluster, reason: warmup.reason, since: warmup.since, until: warmup.until, removes: warmup.removes };
}

function storedGuard(guard: GuardState): GuardState {
  return {
    ...(guard.emptySince !== undefined ? { emptySince: guard.emptySince } : {}),
    ...(guard.copies !== undefined && guard.copies.length > 0 ? { copies: guard.copies.map(([at, n]): [number, number] => [at, n]) } : {}),
  };
}

/** An unambiguous string for a selector (JSON of the tuple), the field of the selector index. */
function selectorOf(s: TaskSelector): string {
  return JSON.stringify([s.source, s.destination, s.namespace, s.group, s.service]);
}

function statusField(s: ServiceKey): string {
  return [s.namespace, s.group, s.name].map(encodeURIComponent).join('/');
}

function duplicateTask(key: string, spec: TaskSpec): StoreError {
  return new StoreError(
    'duplicate_task',
    key,
    `another task already syncs ${spec.namespace}/${spec.group}/${spec.service} from ${spec.source} to ${spec.destination}`,
  );
}
