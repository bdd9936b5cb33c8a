import type { FastifyInstance } from 'fastify';
import type { TaskSpec, TaskState } from '../model/index.js';
import type { RouteContext } from './api-deps.js';
import { ApiError } from './api-error.js';
import {
  comparisonView,
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
import { TaskCommands, taskNotFound, type TaskBody } from './task-commands.js';
import { isFailing, taskDetailView, taskView, type TaskView } from './views.js';

/** A batch body as the schema lets it through. */
interface TaskBatch {
  action: 'create' | 'pause' | 'resume' | 'delete';
  tasks: TaskBody[] | string[];
}

interface IdParams {
  id: string;
}

/**
 * `/api/v1/tasks`: create, create-or-replace (`PUT`, what `regsync apply` uses), compare (would a
 * `PUT` change anything), list, show with status, pause, resume, resync, release, delete, batch.
 * The routes translate HTTP; every change is one of the {@link TaskCommands}, which hold what each
 * command guarantees (checks, atomic store writes, telling the engine, removing copies first, and
 * the task running as before after a failure).
 *
 * Deliberately left out: pagination.
 */
export function registerTaskRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store } = ctx;
  const commands = new TaskCommands(ctx);

  app.post<{ Body: TaskBody }>(
    '/api/v1/tasks',
    { schema: { body: createTaskBody, response: { 201: taskViewSchema } } },
    async (request, reply) => {
      const spec = await commands.specOf(request.body, undefined);
      await commands.create(spec);
      return reply.code(201).header('location', `/api/v1/tasks/${spec.id}`).send(taskView(spec, false));
    },
  );

  app.put<{ Params: IdParams; Body: TaskBody }>(
    '/api/v1/tasks/:id',
    { schema: { params: createParams, body: createTaskBody, response: { 200: taskViewSchema, 201: taskViewSchema } } },
    async (request, reply) => {
      const { id } = request.params;
      checkBodyId(id, request.body.id);
      const { result, spec } = await commands.put(id, request.body);
      if (result === 'created') return reply.code(201).header('location', `/api/v1/tasks/${id}`).send(taskView(spec, false));
      return viewOf(ctx, spec);
    },
  );

  app.post<{ Params: IdParams; Body: TaskBody }>(
    '/api/v1/tasks/:id/compare',
    { schema: { params: createParams, body: createTaskBody, response: { 200: comparisonView } } },
    async (request) => {
      checkBodyId(request.params.id, request.body.id);
      return commands.compare(request.params.id, request.body);
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

  const setState = (state: TaskState) => async (request: { params: IdParams }) => viewOf(ctx, await commands.setState(request.params.id, state));
  const action = { params: lookupParams, body: emptyBody };
  const stateRoute = { schema: { ...action, response: { 200: taskViewSchema } }, preValidation: emptyBodyByDefault };
  app.post<{ Params: IdParams }>('/api/v1/tasks/:id/pause', stateRoute, setState('paused'));
  app.post<{ Params: IdParams }>('/api/v1/tasks/:id/resume', stateRoute, setState('running'));

  app.post<{ Params: IdParams }>(
    '/api/v1/tasks/:id/resync',
    { schema: action, preValidation: emptyBodyByDefault },
    async (request, reply) => {
      await commands.resync(await mustGetTask(ctx, request.params.id));
      return reply.code(202).send({ accepted: true });
    },
  );

  app.post<{ Params: IdParams; Body: { services?: string[] } }>(
    '/api/v1/tasks/:id/release',
    { schema: { params: lookupParams, body: releaseBody }, preValidation: emptyBodyByDefault },
    async (request, reply) => {
      const released = await commands.release(await mustGetTask(ctx, request.params.id), request.body.services);
      return reply.code(202).send({ released });
    },
  );

  // `::` is a literal colon for the router: the path is `/api/v1/tasks:batch`.
  app.post<{ Body: TaskBatch }>('/api/v1/tasks::batch', { schema: { body: taskBatchBody } }, async (request) => {
    const { action, tasks } = request.body;
    if (action === 'create') {
      const specs = await commands.createMany(tasks as TaskBody[]);
      return { action, results: specs.map((spec) => ({ id: spec.id, result: 'created' })) };
    }
    const results: Array<{ id: string; result: string }> = [];
    for (const spec of await commands.existingMany(tasks as string[])) {
      if (action === 'delete') {
        await commands.delete(spec);
        results.push({ id: spec.id, result: 'deleted' });
        continue;
      }
      await commands.setState(spec.id, action === 'pause' ? 'paused' : 'running');
      results.push({ id: spec.id, result: action === 'pause' ? 'paused' : 'resumed' });
    }
    return { action, results };
  });

  app.delete<{ Params: IdParams }>(
    '/api/v1/tasks/:id',
    { schema: { params: lookupParams } },
    async (request, reply) => {
      await commands.delete(await mustGetTask(ctx, request.params.id));
      return reply.code(204).send();
    },
  );
}

/** `id_mismatch` when the body names another id than the path. */
function checkBodyId(id: string, bodyId: string | undefined): void {
  if (bodyId !== undefined && bodyId !== id) throw new ApiError('id_mismatch', `body.id ${bodyId} differs from the id ${id} in the path`);
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

function secretsOf(...passwords: (string | undefined)[]): string[] {
  return passwords.filter((p): p is string => p !== undefined);
}
