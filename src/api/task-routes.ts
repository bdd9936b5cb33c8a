import type { FastifyInstance } from 'fastify';
import { DEFAULT_GROUP, DEFAULT_NAMESPACE, serviceKeyString, type TaskOptions, type TaskSpec, type TaskState } from '../model/index.js';
import { taskRuleProblem } from '../model/task-rules.js';
import { StoreError } from '../store/index.js';
import type { RouteContext } from './api-deps.js';
import { ApiError } from './api-error.js';
import { notifyEngine } from './notify.js';
import {
  createParams,
  createTaskBody,
  emptyBody,
  listOf,
  lookupParams,
  releaseBody,
  taskBatchBody,
  taskDetailView as taskDetailSchema,
  taskView as taskViewSchema,
} from './schemas.js';
import { defaultTaskId, isFailing, maskSecrets, taskDetailView, taskView, type TaskView } from './views.js';

/** A task body as the schema lets it through. */
interface TaskBody {
  id?: string;
  source: string;
  destination: string;
  service: string;
  group?: string;
  namespace?: string;
  options?: TaskOptions;
}

/** A batch body as the schema lets it through. */
interface TaskBatch {
  action: 'create' | 'pause' | 'resume' | 'delete';
  tasks: TaskBody[] | string[];
}

interface IdParams {
  id: string;
}

/**
 * `/api/v1/tasks`: create, create-or-replace (`PUT`, what `regsync apply` uses), list, show with
 * status, pause, resume, resync, delete. Every change is stored first, then the engine is told
 * (see {@link notifyEngine}). Removing copies comes before the store changes instead: a delete,
 * or a replace that changes what the task copies, first has the engine remove the copies the task
 * wrote (it reads the stored spec to find them), so a failed cleanup leaves the task as it was
 * and can be retried.
 *
 * Deliberately left out: pagination, and atomicity between the existence check and the write of
 * a replace (two concurrent replaces of one task: the last one wins).
 */
export function registerTaskRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store, control, log } = ctx;
  const taskChanged = (id: string) => notifyEngine(log, { taskId: id, call: 'taskChanged' }, () => control.taskChanged(id));

  app.post<{ Body: TaskBody }>(
    '/api/v1/tasks',
    { schema: { body: createTaskBody, response: { 201: taskViewSchema } } },
    async (request, reply) => {
      const spec = await specOf(ctx, request.body, undefined);
      if ((await store.createTask(spec)) === 'exists') throw await taskExists(ctx, spec);
      await taskChanged(spec.id);
      return reply.code(201).header('location', `/api/v1/tasks/${spec.id}`).send(taskView(spec, false));
    },
  );

  app.put<{ Params: IdParams; Body: TaskBody }>(
    '/api/v1/tasks/:id',
    { schema: { params: createParams, body: createTaskBody, response: { 200: taskViewSchema, 201: taskViewSchema } } },
    async (request, reply) => {
      const { id } = request.params;
      if (request.body.id !== undefined && request.body.id !== id) {
        throw new ApiError('id_mismatch', `body.id ${request.body.id} differs from the id ${id} in the path`);
      }
      const existing = await store.getTask(id);
      const spec = await specOf(ctx, { ...request.body, id }, existing);
      if (existing === undefined) {
        if ((await store.createTask(spec)) === 'exists') throw await taskExists(ctx, spec);
        await taskChanged(id);
        return reply.code(201).header('location', `/api/v1/tasks/${id}`).send(taskView(spec, false));
      }
      const owner = await store.findTaskBySelector(spec);
      if (owner !== undefined && owner.id !== id) throw selectorTaken(spec, owner.id);
      if (copiesMove(existing, spec)) {
        // The task now copies something else: remove what it copied so far (the engine reads the
        // old spec from the store), as a delete would, then store the new spec.
        await removeCopies(ctx, existing);
      }
      try {
        await store.putTask(spec);
      } catch (err) {
        // The engine may have stopped the task to remove its copies: let it pick the stored spec up again.
        await taskChanged(id);
        // Another task took the selector since the check above.
        if (err instanceof StoreError && err.code === 'duplicate_task') throw selectorTaken(spec, undefined);
        throw err;
      }
      await taskChanged(id);
      return viewOf(ctx, spec);
    },
  );

  app.get('/api/v1/tasks', { schema: { response: { 200: listOf(taskViewSchema) } } }, async () => {
    const tasks = await store.listTasks();
    return { items: await Promise.all(tasks.map((t) => viewOf(ctx, t))) };
  });

  app.get<{ Params: IdParams }>(
    '/api/v1/tasks/:id',
    { schema: { params: lookupParams, response: { 200: taskDetailSchema } } },
    async (request) => {
      const spec = await mustGetTask(ctx, request.params.id);
      const [taskError, statuses, source, destination] = await Promise.all([
        store.getTaskError(spec.id),
        store.listServiceStatus(spec.id),
        store.getCluster(spec.source),
        store.getCluster(spec.destination),
      ]);
      return taskDetailView(spec, taskError, statuses, secretsOf(source?.password, destination?.password));
    },
  );

  const setState = (state: TaskState) => async (request: { params: IdParams }) => {
    const spec = await store.setTaskState(request.params.id, state);
    if (spec === undefined) throw taskNotFound(request.params.id);
    await taskChanged(spec.id);
    return viewOf(ctx, spec);
  };
  const action = { params: lookupParams, body: emptyBody };
  const stateRoute = { schema: { ...action, response: { 200: taskViewSchema } }, preValidation: emptyBodyByDefault };
  app.post<{ Params: IdParams }>('/api/v1/tasks/:id/pause', stateRoute, setState('paused'));
  app.post<{ Params: IdParams }>('/api/v1/tasks/:id/resume', stateRoute, setState('running'));

  app.post<{ Params: IdParams }>(
    '/api/v1/tasks/:id/resync',
    { schema: action, preValidation: emptyBodyByDefault },
    async (request, reply) => {
      const spec = await mustGetTask(ctx, request.params.id);
      if (spec.state === 'paused') throw new ApiError('task_paused', `task ${spec.id} is paused; resume it to sync`);
      try {
        await control.resync(spec.id);
      } catch (err) {
        log.warn({ err, taskId: spec.id }, 'resync was not accepted');
        throw new ApiError('resync_failed', `the engine did not accept the resync of task ${spec.id}: ${await reasonOf(ctx, spec, err)}`);
      }
      return reply.code(202).send({ accepted: true });
    },
  );

  app.post<{ Params: IdParams; Body: { services?: string[] } }>(
    '/api/v1/tasks/:id/release',
    { schema: { params: lookupParams, body: releaseBody }, preValidation: emptyBodyByDefault },
    async (request, reply) => {
      const spec = await mustGetTask(ctx, request.params.id);
      if (spec.state === 'paused') throw new ApiError('task_paused', `task ${spec.id} is paused; resume it to sync`);
      const wanted = request.body.services;
      const held = (await store.listServiceStatus(spec.id)).filter((s) => s.held);
      const chosen = wanted === undefined ? held : held.filter((s) => wanted.some((w) => w === s.service.name || w === serviceKeyString(s.service)));
      await store.releaseHeld(spec.id, chosen.map((s) => s.service));
      if (chosen.length > 0) {
        try {
          await control.resync(spec.id);
        } catch (err) {
          log.warn({ err, taskId: spec.id }, 'resync after a release was not accepted');
          throw new ApiError('resync_failed', `the engine did not accept the resync of task ${spec.id}: ${await reasonOf(ctx, spec, err)}`);
        }
      }
      log.warn({ taskId: spec.id, released: chosen.map((s) => serviceKeyString(s.service)) }, 'held mass deletions released by an operator');
      return reply.code(202).send({ released: chosen.map((s) => serviceKeyString(s.service)) });
    },
  );

  // `::` is a literal colon for the router: the path is `/api/v1/tasks:batch`.
  app.post<{ Body: TaskBatch }>('/api/v1/tasks::batch', { schema: { body: taskBatchBody } }, async (request) => {
    const { action, tasks } = request.body;
    if (action === 'create') {
      const specs = await checkedBatch(ctx, tasks as TaskBody[]);
      const results: Array<{ id: string; result: string }> = [];
      for (const spec of specs) {
        if ((await store.createTask(spec)) === 'exists') throw await taskExists(ctx, spec);
        await taskChanged(spec.id);
        results.push({ id: spec.id, result: 'created' });
      }
      return { action, results };
    }
    const ids = tasks as string[];
    const found = await Promise.all(ids.map((id) => store.getTask(id)));
    const problems = ids.flatMap((id, i) => (found[i] === undefined ? [`tasks[${i}]: no task ${id}`] : []));
    const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
    if (twice.length > 0) problems.push(`named more than once: ${[...new Set(twice)].join(', ')}`);
    if (problems.length > 0) throw new ApiError('invalid_batch', `nothing done: ${problems.join('; ')}`);
    const results: Array<{ id: string; result: string }> = [];
    for (const spec of found as TaskSpec[]) {
      if (action === 'delete') {
        await removeCopies(ctx, spec);
        await store.deleteTask(spec.id);
        results.push({ id: spec.id, result: 'deleted' });
        continue;
      }
      await store.setTaskState(spec.id, action === 'pause' ? 'paused' : 'running');
      await taskChanged(spec.id);
      results.push({ id: spec.id, result: action === 'pause' ? 'paused' : 'resumed' });
    }
    return { action, results };
  });

  app.delete<{ Params: IdParams }>(
    '/api/v1/tasks/:id',
    { schema: { params: lookupParams } },
    async (request, reply) => {
      const spec = await mustGetTask(ctx, request.params.id);
      // First remove the copies the task wrote: once the record is gone nothing would own them.
      await removeCopies(ctx, spec);
      await store.deleteTask(spec.id);
      return reply.code(204).send();
    },
  );
}

/**
 * The spec a create or replace body describes: defaults applied (group `DEFAULT_GROUP`, namespace
 * from the source cluster or `public`, id from the selector), both clusters checked. A replace
 * keeps the state and creation time of `existing`.
 */
export async function specOf(ctx: RouteContext, body: TaskBody, existing: TaskSpec | undefined): Promise<TaskSpec> {
  if (body.source === body.destination) {
    throw new ApiError('same_cluster', `source and destination are both ${body.source}; a task copies between two clusters`);
  }
  const [source, destination] = await Promise.all([ctx.store.getCluster(body.source), ctx.store.getCluster(body.destination)]);
  const missing = [
    source === undefined ? `source ${body.source}` : '',
    destination === undefined ? `destination ${body.destination}` : '',
  ].filter(Boolean);
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

/**
 * The specs of a batch of new tasks, each checked as a single create would be, and against the
 * others of the batch; throws `invalid_batch` listing every problem by position when any has one.
 */
async function checkedBatch(ctx: RouteContext, bodies: readonly TaskBody[]): Promise<TaskSpec[]> {
  const problems: string[] = [];
  const specs: TaskSpec[] = [];
  const ids = new Map<string, number>();
  const selectors = new Map<string, number>();
  for (const [i, body] of bodies.entries()) {
    let spec: TaskSpec;
    try {
      spec = await specOf(ctx, body, undefined);
    } catch (err) {
      problems.push(`tasks[${i}]: ${err instanceof Error ? err.message : String(err)}`);
      continue;
    }
    const selector = JSON.stringify([spec.source, spec.destination, spec.namespace, spec.group, spec.service]);
    const sameId = ids.get(spec.id);
    const sameSelector = selectors.get(selector);
    if (sameId !== undefined) problems.push(`tasks[${i}]: id ${spec.id} is also tasks[${sameId}]'s`);
    else if (sameSelector !== undefined) problems.push(`tasks[${i}]: syncs the same service as tasks[${sameSelector}]`);
    else if ((await ctx.store.getTask(spec.id)) !== undefined || (await ctx.store.findTaskBySelector(spec)) !== undefined) {
      problems.push(`tasks[${i}]: ${(await taskExists(ctx, spec)).message}`);
    }
    ids.set(spec.id, i);
    selectors.set(selector, i);
    specs.push(spec);
  }
  if (problems.length > 0) throw new ApiError('invalid_batch', `nothing created: ${problems.join('; ')}`);
  return specs;
}

/** Whether the copies of `b` would live elsewhere than those of `a` (another selection, or other names). */
function copiesMove(a: TaskSpec, b: TaskSpec): boolean {
  return (
    a.source !== b.source ||
    a.destination !== b.destination ||
    a.namespace !== b.namespace ||
    a.group !== b.group ||
    a.service !== b.service ||
    JSON.stringify(a.options.mapping ?? null) !== JSON.stringify(b.options.mapping ?? null)
  );
}

/** Asks the engine to remove every copy the stored task wrote; 502 `cleanup_failed` when it cannot. */
export async function removeCopies(ctx: RouteContext, spec: TaskSpec): Promise<void> {
  try {
    await ctx.control.removeTask(spec.id);
  } catch (err) {
    ctx.log.warn({ err, taskId: spec.id }, 'removing the copies of a task failed; the task is kept');
    throw new ApiError(
      'cleanup_failed',
      `removing the instances task ${spec.id} wrote failed: ${await reasonOf(ctx, spec, err)}; the task is kept unchanged, retry`,
    );
  }
}

/** Lets action routes be called without a body: a missing body counts as `{}`. */
async function emptyBodyByDefault(request: { body: unknown }): Promise<void> {
  if (request.body === undefined) request.body = {};
}

async function viewOf(ctx: RouteContext, spec: TaskSpec): Promise<TaskView> {
  if (spec.state === 'paused') return taskView(spec, false);
  const [taskError, statuses] = await Promise.all([ctx.store.getTaskError(spec.id), ctx.store.listServiceStatus(spec.id)]);
  return taskView(spec, isFailing(taskError, statuses));
}

async function mustGetTask(ctx: RouteContext, id: string): Promise<TaskSpec> {
  const spec = await ctx.store.getTask(id);
  if (spec === undefined) throw taskNotFound(id);
  return spec;
}

function taskNotFound(id: string): ApiError {
  return new ApiError('task_not_found', `no task ${id}`);
}

/** Says which task is in the way: the one with the id, or the one with the same selector. */
async function taskExists(ctx: RouteContext, spec: TaskSpec): Promise<ApiError> {
  if ((await ctx.store.getTask(spec.id)) !== undefined) return new ApiError('task_exists', `task ${spec.id} already exists`);
  return selectorTaken(spec, (await ctx.store.findTaskBySelector(spec))?.id);
}

function selectorTaken(spec: TaskSpec, ownerId: string | undefined): ApiError {
  const what = `${spec.namespace}/${spec.group}/${spec.service} from ${spec.source} to ${spec.destination}`;
  return new ApiError('task_exists', `${ownerId === undefined ? 'a task' : `task ${ownerId}`} already syncs ${what}`);
}

function secretsOf(...passwords: (string | undefined)[]): string[] {
  return passwords.filter((p): p is string => p !== undefined);
}

/** An engine failure's message for a client, with the task's cluster passwords masked. */
async function reasonOf(ctx: RouteContext, spec: TaskSpec, err: unknown): Promise<string> {
  const message = err instanceof Error ? err.message : String(err);
  const [source, destination] = await Promise.all([
    ctx.store.getCluster(spec.source).catch(() => undefined),
    ctx.store.getCluster(spec.destination).catch(() => undefined),
  ]);
  return maskSecrets(message, [source?.password, destination?.password]);
}
