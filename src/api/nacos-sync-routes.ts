import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { maskSecretsInText } from '../log.js';
import type { TaskOptions, TaskSpec } from '../model/index.js';
import { ANY } from '../model/task-rules.js';
import type { RouteContext } from './api-deps.js';
import { ApiError } from './api-error.js';
import { toApiError } from './error-handler.js';
import { describeViolation } from '../validation/violation.js';
import { NacosSyncError } from '../nacos-sync/nacos-sync-error.js';
import {
  baseResult,
  clusterAddBody,
  clusterDetailResult,
  clusterIdQuery,
  clusterListQuery,
  clusterListResult,
  clusterTypesResult,
  taskAddAllBody,
  taskAddBody,
  taskDetailResult,
  taskIdQuery,
  taskIdsQuery,
  taskListQuery,
  taskListResult,
  taskUpdateBody,
} from '../nacos-sync/nacos-sync-schemas.js';
import {
  clusterModelOf,
  clusterSpecOf,
  failedResult,
  idList,
  matchesFilter,
  nacosSyncTaskId,
  okResult,
  pageOf,
  pageParam,
  SUPPORTED_CLUSTER_TYPES,
  TASK_STATUS_DELETE,
  TASK_STATUS_SYNC,
  taskBodyOf,
  taskModelOf,
  type ClusterAddRequest,
  type TaskAddRequest,
} from '../nacos-sync/nacos-sync-wire.js';
import { notifyEngine } from './notify.js';
import { TaskCommands } from './task-commands.js';

/** nacos-sync's default page size (its console's `PAGE_SIZE`), used when a list names none. */
const DEFAULT_PAGE_SIZE = 10;

/** The Fastify default, should the app have been built without a body limit. */
const FALLBACK_BODY_LIMIT = 1024 * 1024;

interface TaskAddAllRequest {
  sourceClusterId: string;
  destClusterId: string;
  excludeConsumer?: boolean | null;
}

interface TaskUpdateRequest {
  taskId: string;
  taskStatus: string;
}

interface ListQuery {
  pageNum?: string;
  pageSize?: string;
}

/**
 * nacos-sync's console API (`ClusterApi`, `TaskApi`) on regsync's store and engine, so that
 * scripts written for nacos-sync keep working: the same paths, methods, field names, generated ids
 * and `{success, resultCode, resultMessage, ...}` answers.
 *
 * - `/v1/cluster/{add,list,detail,delete,types}`: a nacos-sync cluster is a regsync cluster whose
 *   id is nacos-sync's `md5(clusterName_clusterType)`; `NACOS` is kind `nacos`, `ZK` kind
 *   `zookeeper`; the name is kept in `options.nacosSyncName`.
 * - `/v1/task/{add,addAll,list,detail,update,delete,deleteInBatch}`: a nacos-sync task is a regsync
 *   task whose id is nacos-sync's `md5(serviceName_groupName_sourceClusterId_destClusterId)`;
 *   `addAll` is one task of every service of every group (`*`/`*`) of the pair; `taskStatus`
 *   `SYNC` runs a task, `DELETE` deletes it after removing its copies, as `DELETE
 *   /api/v1/tasks/:id` does.
 *
 * Tasks are created, run and deleted through the same {@link TaskCommands} as the native routes,
 * so both APIs check, store and restore the same way. Failures answer HTTP 200 with
 * `success: false`, as nacos-sync does; only body-level problems (invalid JSON, too large, not
 * JSON) keep their 4xx status, in the same shape.
 *
 * Deliberately left out: nacos-sync's other routes (system config, metrics), Dubbo `version`
 * filters, and `addAll`'s one task per service (one `*` task also follows services that appear
 * later).
 */
export function registerNacosSyncRoutes(app: FastifyInstance, ctx: RouteContext): void {
  // A scope of their own: these routes answer errors in nacos-sync's shape, not the native one.
  void app.register(async (scope) => {
    const log = ctx.log.child({ api: 'nacos-sync' });
    const bodyLimit = scope.initialConfig.bodyLimit ?? FALLBACK_BODY_LIMIT;
    scope.setErrorHandler((error: unknown, request, reply) => sendFailure(error, request, reply, log, bodyLimit));
    const scoped = { ...ctx, log };
    registerClusters(scope, scoped);
    registerTasks(scope, scoped);
    await scope.register(async (deletes) => {
      // Bodies of any type are read as text and parsed by the routes only when they are forms.
      deletes.removeAllContentTypeParsers();
      deletes.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));
      registerDeletes(deletes, scoped);
    });
  });
}

function registerClusters(app: FastifyInstance, ctx: RouteContext): void {
  const { store } = ctx;

  app.post<{ Body: ClusterAddRequest }>(
    '/v1/cluster/add',
    { schema: { body: clusterAddBody, response: { 200: baseResult } } },
    async (request) => {
      const spec = clusterSpecOf(request.body);
      if ((await store.createCluster(spec)) === 'exists') {
        throw new NacosSyncError(
          `cluster ${spec.id} already exists (clusterName ${String(request.body.clusterName)}, clusterType ${String(request.body.clusterType)})`,
        );
      }
      await clusterChanged(ctx, spec.id);
      return okResult({});
    },
  );

  app.get<{ Querystring: ListQuery & { clusterName?: string } }>(
    '/v1/cluster/list',
    { schema: { querystring: clusterListQuery, response: { 200: clusterListResult } } },
    async (request) => {
      const { pageNum, pageSize } = pagingOf(request.query);
      const models = (await store.listClusters()).map(clusterModelOf).filter((m) => matchesFilter(m.clusterName, request.query.clusterName));
      const page = pageOf(models, pageNum, pageSize);
      return okResult({ clusterModels: page.items, totalPage: page.totalPage, totalSize: page.totalSize, currentSize: page.currentSize });
    },
  );

  app.get<{ Querystring: { clusterId?: string } }>(
    '/v1/cluster/detail',
    { schema: { querystring: clusterIdQuery, response: { 200: clusterDetailResult } } },
    async (request) => {
      const id = required('clusterId', request.query.clusterId);
      const spec = await store.getCluster(id);
      if (spec === undefined) throw new NacosSyncError(`no cluster ${id}`);
      return okResult({ clusterModel: clusterModelOf(spec) });
    },
  );

  app.get('/v1/cluster/types', { schema: { response: { 200: clusterTypesResult } } }, async () =>
    okResult({ types: Object.keys(SUPPORTED_CLUSTER_TYPES) }),
  );
}

function registerTasks(app: FastifyInstance, ctx: RouteContext): void {
  const { store, control, log } = ctx;
  const commands = new TaskCommands(ctx);

  /**
   * Creates the task, or runs it again when it exists with the same selector (nacos-sync's add of
   * an existing task id sets it back to `SYNC`; settings changed through the native API are kept).
   * Clusters, selector and rules are checked by `specOf`; nothing is stored when they fail.
   */
  async function addTask(request: {
    id: string;
    source: string;
    destination: string;
    service: string;
    group: string;
    namespace?: string;
    options?: TaskOptions;
  }): Promise<void> {
    const { id, ...body } = request;
    const spec = await commands.specOf({ id, ...body }, undefined);
    const existing = await store.getTask(id);
    if (existing !== undefined) {
      if (!sameSelector(existing, spec)) {
        throw new NacosSyncError(`task ${id} already exists and syncs ${selectorText(existing)}; delete it first`);
      }
      const differing = differingOptions(existing.options, spec.options);
      if (differing.length > 0) {
        throw new NacosSyncError(`task ${id} already exists with another ${differing.join(', ')}; delete it first, or change it with PUT /api/v1/tasks/${id}`);
      }
      if (existing.state === 'paused') await commands.setState(id, 'running');
      return;
    }
    try {
      await commands.create(spec);
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 'task_exists')) throw err;
      const owner = (await store.getTask(id)) ?? (await store.findTaskBySelector(spec));
      throw new NacosSyncError(`${owner === undefined ? 'a task' : `task ${owner.id}`} already syncs ${selectorText(spec)}`);
    }
  }

  app.post<{ Body: TaskAddRequest }>(
    '/v1/task/add',
    { schema: { body: taskAddBody, response: { 200: baseResult } } },
    async (request) => {
      await addTask(taskBodyOf(request.body));
      return okResult({});
    },
  );

  app.post<{ Body: TaskAddAllRequest }>(
    '/v1/task/addAll',
    { schema: { body: taskAddAllBody, response: { 200: baseResult } } },
    async (request) => {
      const { sourceClusterId, destClusterId, excludeConsumer } = request.body;
      // nacos-sync adds one task per service of every group of the source. Here: one task for
      // every service of every group (`*`/`*`) of the source's namespace, present and future, with
      // the id nacos-sync's formula gives those names (what /v1/task/add of `*`/`*` also gives).
      // Dubbo's consumer entries stay out by default, as with nacos-sync's excludeConsumer.
      await addTask({
        id: nacosSyncTaskId(ANY, ANY, sourceClusterId, destClusterId),
        source: sourceClusterId,
        destination: destClusterId,
        service: ANY,
        group: ANY,
        options: excludeConsumer === false ? { exclude: [] } : {},
      });
      return okResult({});
    },
  );

  app.get<{ Querystring: ListQuery & { serviceName?: string } }>(
    '/v1/task/list',
    { schema: { querystring: taskListQuery, response: { 200: taskListResult } } },
    async (request) => {
      const { pageNum, pageSize } = pagingOf(request.query);
      const tasks = (await store.listTasks())
        .filter((t) => matchesFilter(t.service, request.query.serviceName))
        // Newest first, as nacos-sync lists (by its row id, descending).
        .sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? 1 : -1));
      const page = pageOf(tasks.map(taskModelOf), pageNum, pageSize);
      return okResult({ taskModels: page.items, totalPage: page.totalPage, totalSize: page.totalSize, currentSize: page.currentSize });
    },
  );

  app.get<{ Querystring: { taskId?: string } }>(
    '/v1/task/detail',
    { schema: { querystring: taskIdQuery, response: { 200: taskDetailResult } } },
    async (request) => {
      const id = required('taskId', request.query.taskId);
      const spec = await store.getTask(id);
      if (spec === undefined) throw new NacosSyncError(`no task ${id}`);
      return okResult({ taskModel: taskModelOf(spec) });
    },
  );

  app.post<{ Body: TaskUpdateRequest }>(
    '/v1/task/update',
    { schema: { body: taskUpdateBody, response: { 200: baseResult } } },
    async (request) => {
      const { taskId, taskStatus } = request.body;
      if (taskStatus !== TASK_STATUS_SYNC && taskStatus !== TASK_STATUS_DELETE) {
        throw new NacosSyncError(`taskStatus must be ${TASK_STATUS_SYNC} or ${TASK_STATUS_DELETE}`);
      }
      const spec = await store.getTask(taskId);
      if (spec === undefined) throw new NacosSyncError(`no task ${taskId}`);
      if (taskStatus === TASK_STATUS_DELETE) {
        await commands.delete(spec);
      } else if (spec.state === 'paused') {
        await commands.setState(taskId, 'running');
      } else {
        // nacos-sync restarts a task set to SYNC again (a new operation id): reconcile it now.
        await notifyEngine(log, { taskId, call: 'resync' }, () => control.resync(taskId));
      }
      return okResult({});
    },
  );


}

/**
 * The `DELETE` routes. nacos-sync binds their parameters from the query string, and Spring also
 * from a form body; it never reads a JSON body. So here a body never fails a delete (a script that
 * sends `Content-Type: application/json` on every call, with or without a body, keeps working), and
 * a form body's parameters count after the query's.
 */
function registerDeletes(app: FastifyInstance, ctx: RouteContext): void {
  const { store } = ctx;
  const commands = new TaskCommands(ctx);

  app.delete(
    '/v1/cluster/delete',
    { schema: { querystring: clusterIdQuery, response: { 200: baseResult } } },
    async (request) => {
      const id = required('clusterId', paramOf(request, 'clusterId'));
      const users = await store.tasksUsingCluster(id);
      if (users.length > 0) {
        const ids = users.map((t) => t.id);
        const shown = ids.length > 10 ? `${ids.slice(0, 10).join(', ')} and ${ids.length - 10} more` : ids.join(', ');
        throw new NacosSyncError(`cluster ${id} is used by task${ids.length > 1 ? 's' : ''} ${shown}; delete ${ids.length > 1 ? 'them' : 'it'} first`);
      }
      // nacos-sync answers success for a cluster that is not there; so does this route, saying so.
      if (!(await store.deleteCluster(id))) return okResult({}, `no cluster ${id}; nothing to delete`);
      await clusterChanged(ctx, id);
      return okResult({});
    },
  );

  app.delete(
    '/v1/task/delete',
    { schema: { querystring: taskIdQuery, response: { 200: baseResult } } },
    async (request) => {
      const id = required('taskId', paramOf(request, 'taskId'));
      const spec = await store.getTask(id);
      // nacos-sync answers success for a task that is not there; so does this route, saying so.
      if (spec === undefined) return okResult({}, `no task ${id}; nothing to delete`);
      await commands.delete(spec);
      return okResult({});
    },
  );

  app.delete(
    '/v1/task/deleteInBatch',
    { schema: { querystring: taskIdsQuery, response: { 200: baseResult } } },
    async (request) => {
      const ids = idList(paramValues(request, 'taskIds'));
      if (ids.length === 0) throw new NacosSyncError('taskIds is required: taskIds=id1&taskIds=id2 or taskIds=id1,id2');
      const deleted: string[] = [];
      const missing: string[] = [];
      for (const id of ids) {
        const spec = await store.getTask(id);
        if (spec === undefined) {
          missing.push(id);
          continue;
        }
        try {
          await commands.delete(spec);
        } catch (err) {
          // One at a time, stopping at the first failure: what was deleted is said, the rest is untouched.
          const rest = ids.slice(ids.indexOf(id) + 1);
          throw new NacosSyncError(
            `${deleted.length > 0 ? `deleted ${deleted.join(', ')}; ` : ''}${messageOf(err)}` +
              `${rest.length > 0 ? `; not tried: ${rest.join(', ')}` : ''}`,
            { cause: err },
          );
        }
        deleted.push(id);
      }
      return okResult({}, missing.length > 0 ? `no task ${missing.join(', ')}; nothing to delete there` : null);
    },
  );}

/** Tells the engine a cluster changed; a failure is logged (see {@link notifyEngine}). */
function clusterChanged(ctx: RouteContext, id: string): Promise<void> {
  return notifyEngine(ctx.log, { clusterId: id, call: 'clusterChanged' }, () => ctx.control.clusterChanged(id));
}

/** Every value of a parameter: the query string's, then a form body's. */
function paramValues(request: FastifyRequest, name: string): string[] {
  const query = (request.query as Record<string, string | string[] | undefined>)[name];
  const values = query === undefined ? [] : typeof query === 'string' ? [query] : [...query];
  const type = request.headers['content-type'] ?? '';
  if (typeof request.body === 'string' && /^application\/x-www-form-urlencoded\b/i.test(type)) {
    values.push(...new URLSearchParams(request.body).getAll(name));
  }
  return values;
}

/** A parameter's first value, as Spring's `getParameter`. */
function paramOf(request: FastifyRequest, name: string): string | undefined {
  return paramValues(request, name)[0];
}

function pagingOf(query: ListQuery): { pageNum: number; pageSize: number } {
  return { pageNum: pageParam('pageNum', query.pageNum, 1), pageSize: pageParam('pageSize', query.pageSize, DEFAULT_PAGE_SIZE) };
}

function required(name: string, value: string | undefined): string {
  if (value === undefined || value.trim() === '') throw new NacosSyncError(`${name} is required`);
  return value.trim();
}

function sameSelector(a: TaskSpec, b: TaskSpec): boolean {
  return a.source === b.source && a.destination === b.destination && a.namespace === b.namespace && a.group === b.group && a.service === b.service;
}

/** The options `wanted` sets that `stored` has otherwise; options the request does not set (changed natively, say) do not count. */
function differingOptions(stored: TaskOptions, wanted: TaskOptions): string[] {
  return Object.entries(wanted)
    .filter(([key, value]) => JSON.stringify(stored[key as keyof TaskOptions]) !== JSON.stringify(value))
    .map(([key]) => `options.${key}`);
}

function selectorText(spec: TaskSpec): string {
  return `${spec.namespace}/${spec.group}/${spec.service} from ${spec.source} to ${spec.destination}`;
}

function messageOf(err: unknown): string {
  return err instanceof NacosSyncError || err instanceof ApiError ? err.message : 'internal error; the server log has the details';
}

/**
 * Answers any error of these routes in nacos-sync's shape. What nacos-sync's processors would
 * refuse (missing or malformed fields, unknown clusters, a task in the way, a failed cleanup)
 * answers HTTP 200 with `success: false`, as there; body-level problems keep their 4xx status;
 * anything unexpected is a 500 with a message that reveals nothing (the log has the error).
 * Messages are masked as the native API's are (`maskSecretsInText`).
 */
function sendFailure(error: unknown, request: FastifyRequest, reply: FastifyReply, log: Logger, bodyLimit: number): FastifyReply {
  const { status, message } = failureOf(error, bodyLimit);
  if (status >= 500) log.error({ err: error, method: request.method, url: request.url }, 'request failed');
  // The message may quote what the client sent (an endpoint URL with its password) or a registry said.
  return reply.code(status).type('application/json; charset=utf-8').send(failedResult(maskSecretsInText(message)));
}

function failureOf(error: unknown, bodyLimit: number): { status: number; message: string } {
  if (error instanceof NacosSyncError || error instanceof ApiError) return { status: 200, message: error.message };
  const validation = (error as { validation?: unknown } | null)?.validation;
  if (Array.isArray(validation)) {
    const context = (error as { validationContext?: string }).validationContext ?? 'body';
    const violation = validation[0] as Parameters<typeof describeViolation>[1] | undefined;
    return { status: 200, message: violation === undefined ? `the ${context} is invalid` : describeViolation(context, violation) };
  }
  const apiError = toApiError(error, bodyLimit);
  return { status: apiError.status, message: apiError.message };
}
