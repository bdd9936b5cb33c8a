import type { FastifyInstance } from 'fastify';
import { DEFAULT_GROUP, DEFAULT_NAMESPACE, type TaskOptions, type TaskSpec, type TaskState } from '../model/index.js';
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
      if (selectorChanged(existing, spec)) {
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
async function specOf(ctx: RouteContext, body: TaskBody, existing: TaskSpec | undefined): Promise<TaskSpec> {
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
  return {
    id: body.id ?? defaultTaskId(selector),
    ...selector,
    options: body.options ?? {},
    state: existing?.state ?? 'running',
    createdAt: existing?.createdAt ?? new Date().toISOString(),
  };
}

function selectorChanged(a: TaskSpec, b: TaskSpec): boolean {
  return a.source !== b.source || a.destination !== b.destination || a.namespace !== b.namespace || a.group !== b.group || a.service !== b.service;
}

/** Asks the engine to remove every copy the stored task wrote; 502 `cleanup_failed` when it cannot. */
async function removeCopies(ctx: RouteContext, spec: TaskSpec): Promise<void> {
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
