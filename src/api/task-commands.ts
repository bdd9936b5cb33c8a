import { DEFAULT_GROUP, DEFAULT_NAMESPACE, serviceKeyString, type TaskOptions, type TaskSpec, type TaskState } from '../model/index.js';
import { taskRuleProblem } from '../model/task-rules.js';
import { StoreError, type PutResult } from '../store/index.js';
import { canonical } from '../util/canonical.js';
import type { RouteContext } from './api-deps.js';
import { ApiError } from './api-error.js';
import { notifyEngine } from './notify.js';
import { defaultTaskId, maskSecrets } from './views.js';

/** A task body as the schemas let it through (native create and replace, and what nacos-sync's routes build). */
export interface TaskBody {
  id?: string;
  source: string;
  destination: string;
  service: string;
  group?: string;
  namespace?: string;
  options?: TaskOptions;
}

/** How a stored task and a body differ: the fields whose values would change (never their values). */
export interface TaskComparison {
  exists: boolean;
  differs: boolean;
  fields: string[];
}

/** How often a replace re-reads after the task changed under it before giving up. */
const MAX_REPLACE_ATTEMPTS = 20;

/**
 * Every change an operator makes to tasks, whichever API it comes through (the native routes, the
 * batch route, the nacos-sync routes, and `regsync apply`, which uses the native `compare` and
 * `PUT`). It lives with the API, not the engine: it speaks the API's errors and drives the engine
 * only through `TaskControl`, which is all the engine shows of itself here. Each command keeps the
 * same invariants:
 *
 * - a body is checked in full (clusters, selector, rules) before anything is written;
 * - the store decides atomically: one creator of an id wins, a batch is created whole or not at
 *   all, a replace goes through only over the record it was computed from, and a replace that
 *   changes nothing writes nothing and tells nobody;
 * - the store is written first, then the engine is told (a failure to tell is logged: the engine
 *   re-reads the store at its next full sync);
 * - copies are removed before the record changes (a delete, or a replace that changes what the
 *   task copies), since once the record is gone nothing would own them;
 * - after any failure the task runs where it ran before: removing copies stops the task in every
 *   process, so a failed removal, or a failed write after it, starts it again from the stored spec.
 *
 * Commands throw {@link ApiError}; the nacos-sync routes answer those in their own shape.
 */
export class TaskCommands {
  constructor(private readonly ctx: RouteContext) {}

  /** Creates a task from a checked spec (see {@link specOf}); `task_exists` when its id or selector is taken. */
  async create(spec: TaskSpec): Promise<void> {
    if ((await this.ctx.store.createTask(spec)) === 'exists') throw await this.taskExists(spec);
    await this.taskChanged(spec.id);
  }

  /**
   * Creates or replaces task `id` (`PUT`): answers what happened and the task as stored. A replace
   * keeps the state and creation time; when what the task copies changes, its old copies are removed
   * first. `unchanged` wrote nothing and told nobody.
   */
  async put(id: string, body: TaskBody): Promise<{ result: PutResult; spec: TaskSpec }> {
    for (let attempt = 1; attempt <= MAX_REPLACE_ATTEMPTS; attempt += 1) {
      const current = await this.ctx.store.getVersionedTask(id);
      const spec = await this.specOf({ ...body, id }, current?.spec);
      if (current !== undefined) {
        const owner = await this.ctx.store.findTaskBySelector(spec);
        if (owner !== undefined && owner.id !== id) throw selectorTaken(spec, owner.id);
      }
      const moving = current !== undefined && copiesMove(current.spec, spec);
      // The task now copies something else: remove what it copied so far (the engine reads the
      // old spec from the store), as a delete would, then store the new spec.
      if (moving) await this.removeCopies(current.spec);
      let result: PutResult | 'changed';
      try {
        result = await this.ctx.store.replaceTask(spec, current?.version);
      } catch (err) {
        if (moving) await this.restore(id);
        // Another task took the selector since the check above.
        if (err instanceof StoreError && err.code === 'duplicate_task') throw selectorTaken(spec, (await this.ctx.store.findTaskBySelector(spec))?.id);
        throw err;
      }
      if (result === 'changed') {
        // Created or replaced by someone else meanwhile: start from what they stored.
        if (moving) await this.restore(id);
        continue;
      }
      if (result !== 'unchanged') await this.taskChanged(id);
      return { result, spec };
    }
    throw new StoreError('write_conflict', `task ${id}`, `task ${id} kept changing; gave up replacing it after ${MAX_REPLACE_ATTEMPTS} attempts`);
  }

  /**
   * Whether `PUT` of `body` would change task `id`, and which fields (`source`, `options`, ...): what
   * `regsync apply` asks before it writes. Checks the body as `PUT` would.
   */
  async compare(id: string, body: TaskBody): Promise<TaskComparison> {
    const current = await this.ctx.store.getTask(id);
    const spec = await this.specOf({ ...body, id }, current);
    if (current === undefined) return { exists: false, differs: true, fields: [] };
    const fields = (['source', 'destination', 'namespace', 'group', 'service', 'options'] as const).filter(
      (f) => canonical(current[f]) !== canonical(spec[f]),
    );
    return { exists: true, differs: fields.length > 0, fields };
  }

  /** Removes the task's copies, then the task; `cleanup_failed` (the task kept, running as before) when the copies cannot be removed. */
  async delete(spec: TaskSpec): Promise<void> {
    await this.removeCopies(spec);
    try {
      await this.ctx.store.deleteTask(spec.id);
    } catch (err) {
      await this.restore(spec.id);
      throw err;
    }
  }

  /** Pauses or resumes task `id` and answers it; `task_not_found` when there is none. */
  async setState(id: string, state: TaskState): Promise<TaskSpec> {
    const spec = await this.ctx.store.setTaskState(id, state);
    if (spec === undefined) throw taskNotFound(id);
    await this.taskChanged(spec.id);
    return spec;
  }

  /** Reconciles every service of a running task now; `task_paused`, or `resync_failed` when the engine does not take it. */
  async resync(spec: TaskSpec): Promise<void> {
    if (spec.state === 'paused') throw new ApiError('task_paused', `task ${spec.id} is paused; resume it to sync`);
    try {
      await this.ctx.control.resync(spec.id);
    } catch (err) {
      this.ctx.log.warn({ err, taskId: spec.id }, 'resync was not accepted');
      throw new ApiError('resync_failed', `the engine did not accept the resync of task ${spec.id}: ${await this.reasonOf(spec, err)}`);
    }
  }

  /**
   * Lets the held mass deletions of a running task's services (all, or those `wanted` names, by
   * name or `namespace/group/name`) go through, and reconciles them; answers the services released.
   */
  async release(spec: TaskSpec, wanted: readonly string[] | undefined): Promise<string[]> {
    if (spec.state === 'paused') throw new ApiError('task_paused', `task ${spec.id} is paused; resume it to sync`);
    const held = (await this.ctx.store.listServiceStatus(spec.id)).filter((s) => s.held);
    const chosen = wanted === undefined ? held : held.filter((s) => wanted.some((w) => w === s.service.name || w === serviceKeyString(s.service)));
    await this.ctx.store.releaseHeld(spec.id, chosen.map((s) => s.service));
    const released = chosen.map((s) => serviceKeyString(s.service));
    if (chosen.length > 0) await this.resync(spec);
    this.ctx.log.warn({ taskId: spec.id, released }, 'held mass deletions released by an operator');
    return released;
  }

  /**
   * Creates every task of `bodies` or none (`invalid_batch` listing every problem by position).
   * Checked as single creates would be, and against each other; the store then creates them in one
   * atomic step, so a task created meanwhile by someone else fails the whole batch.
   */
  async createMany(bodies: readonly TaskBody[]): Promise<TaskSpec[]> {
    const specs = await this.checkedBatch(bodies);
    const outcome = await this.ctx.store.createTasks(specs);
    if (outcome.result === 'exists') {
      const spec = specs[outcome.index] as TaskSpec;
      throw new ApiError('invalid_batch', `nothing created: tasks[${outcome.index}]: ${(await this.taskExists(spec)).message}`);
    }
    for (const spec of specs) await this.taskChanged(spec.id);
    return specs;
  }

  /** The tasks of `ids`, or `invalid_batch` (nothing done) when any is unknown or named twice. */
  async existingMany(ids: readonly string[]): Promise<TaskSpec[]> {
    const found = await Promise.all(ids.map((id) => this.ctx.store.getTask(id)));
    const problems = ids.flatMap((id, i) => (found[i] === undefined ? [`tasks[${i}]: no task ${id}`] : []));
    const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
    if (twice.length > 0) problems.push(`named more than once: ${[...new Set(twice)].join(', ')}`);
    if (problems.length > 0) throw new ApiError('invalid_batch', `nothing done: ${problems.join('; ')}`);
    return found as TaskSpec[];
  }

  /**
   * The spec a create or replace body describes: defaults applied (group `DEFAULT_GROUP`, namespace
   * from the source cluster or `public`, id from the selector), both clusters checked. A replace
   * keeps the state and creation time of `existing`.
   */
  async specOf(body: TaskBody, existing: TaskSpec | undefined): Promise<TaskSpec> {
    if (body.source === body.destination) {
      throw new ApiError('same_cluster', `source and destination are both ${body.source}; a task copies between two clusters`);
    }
    const [source, destination] = await Promise.all([this.ctx.store.getCluster(body.source), this.ctx.store.getCluster(body.destination)]);
    const missing = [source === undefined ? `source ${body.source}` : '', destination === undefined ? `destination ${body.destination}` : ''].filter(Boolean);
    if (missing.length > 0) throw new ApiError('unknown_cluster', `no cluster for ${missing.join(' and ')}`);
    const selector = {
      source: body.source,
      destination: body.destination,
      namespace: body.namespace ?? source?.namespace ?? DEFAULT_NAMESPACE,
      group: body.group ?? DEFAULT_GROUP,
      service: body.service,
    };
    const spec: TaskSpec = {
      id: body.id ?? defaultTaskId(selector),
      ...selector,
      options: body.options ?? {},
      state: existing?.state ?? 'running',
      createdAt: existing?.createdAt ?? new Date().toISOString(),
    };
    const problem = taskRuleProblem(spec);
    if (problem !== undefined) throw new ApiError('invalid_rules', problem);
    return spec;
  }

  /** Says which task is in the way: the one with the id, or the one with the same selector. */
  private async taskExists(spec: TaskSpec): Promise<ApiError> {
    if ((await this.ctx.store.getTask(spec.id)) !== undefined) return new ApiError('task_exists', `task ${spec.id} already exists`);
    return selectorTaken(spec, (await this.ctx.store.findTaskBySelector(spec))?.id);
  }

  /** An engine failure's message for a client, with the task's cluster passwords masked. */
  private async reasonOf(spec: TaskSpec, err: unknown): Promise<string> {
    const message = err instanceof Error ? err.message : String(err);
    const [source, destination] = await Promise.all([
      this.ctx.store.getCluster(spec.source).catch(() => undefined),
      this.ctx.store.getCluster(spec.destination).catch(() => undefined),
    ]);
    return maskSecrets(message, [source?.password, destination?.password]);
  }

  /**
   * Has the engine remove every copy the stored task wrote (stopping it in every process); 502
   * `cleanup_failed`, with the task running again, when it cannot.
   */
  private async removeCopies(spec: TaskSpec): Promise<void> {
    try {
      await this.ctx.control.removeTask(spec.id);
    } catch (err) {
      this.ctx.log.warn({ err, taskId: spec.id }, 'removing the copies of a task failed; the task is kept');
      await this.restore(spec.id);
      throw new ApiError(
        'cleanup_failed',
        `removing the instances task ${spec.id} wrote failed: ${await this.reasonOf(spec, err)}; the task is kept unchanged, retry`,
      );
    }
  }

  /** Starts the task again in every process from the stored spec, after a command stopped it and then failed. */
  private async restore(id: string): Promise<void> {
    await this.taskChanged(id);
  }

  private taskChanged(id: string): Promise<void> {
    return notifyEngine(this.ctx.log, { taskId: id, call: 'taskChanged' }, () => this.ctx.control.taskChanged(id));
  }

  /**
   * The specs of a batch of new tasks, each checked as a single create would be, and against the
   * others of the batch; throws `invalid_batch` listing every problem by position when any has one.
   */
  private async checkedBatch(bodies: readonly TaskBody[]): Promise<TaskSpec[]> {
    const problems: string[] = [];
    const specs: TaskSpec[] = [];
    const ids = new Map<string, number>();
    const selectors = new Map<string, number>();
    for (const [i, body] of bodies.entries()) {
      let spec: TaskSpec;
      try {
        spec = await this.specOf(body, undefined);
      } catch (err) {
        problems.push(`tasks[${i}]: ${err instanceof Error ? err.message : String(err)}`);
        continue;
      }
      const selector = JSON.stringify([spec.source, spec.destination, spec.namespace, spec.group, spec.service]);
      const sameId = ids.get(spec.id);
      const sameSelector = selectors.get(selector);
      if (sameId !== undefined) problems.push(`tasks[${i}]: id ${spec.id} is also tasks[${sameId}]'s`);
      else if (sameSelector !== undefined) problems.push(`tasks[${i}]: syncs the same service as tasks[${sameSelector}]`);
      else if ((await this.ctx.store.getTask(spec.id)) !== undefined || (await this.ctx.store.findTaskBySelector(spec)) !== undefined) {
        problems.push(`tasks[${i}]: ${(await this.taskExists(spec)).message}`);
      }
      ids.set(spec.id, i);
      selectors.set(selector, i);
      specs.push(spec);
    }
    if (problems.length > 0) throw new ApiError('invalid_batch', `nothing created: ${problems.join('; ')}`);
    return specs;
  }
}

/** `task_not_found` for `id`. */
export function taskNotFound(id: string): ApiError {
  return new ApiError('task_not_found', `no task ${id}`);
}

/** Whether the copies of `b` would live elsewhere than those of `a` (another selection, or other names). */
function copiesMove(a: TaskSpec, b: TaskSpec): boolean {
  return (
    a.source !== b.source ||
    a.destination !== b.destination ||
    a.namespace !== b.namespace ||
    a.group !== b.group ||
    a.service !== b.service ||
    canonical(a.options.mapping) !== canonical(b.options.mapping)
  );
}

function selectorTaken(spec: TaskSpec, ownerId: string | undefined): ApiError {
  const what = `${spec.namespace}/${spec.group}/${spec.service} from ${spec.source} to ${spec.destination}`;
  return new ApiError('task_exists', `${ownerId === undefined ? 'a task' : `task ${ownerId}`} already syncs ${what}`);
}
