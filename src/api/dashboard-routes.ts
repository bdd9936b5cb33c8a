import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { isUnreached, reachFailureOf, serviceKeyString, type ReachFailure, type ClusterSpec, type ServiceMapping, type TaskProblem, type TaskSpec } from '../model/index.js';
import { mapService } from '../model/task-rules.js';
import type { ServiceStatus } from '../store/index.js';
import type { RouteContext } from './api-deps.js';
import { ApiError } from './api-error.js';
import { listOf, lookupParams, taskDetailView as taskDetailSchema, taskView as taskViewSchema } from './schemas.js';
import { isFailing, maskSecrets, taskDetailView, taskView, type ServiceStatusView, type TaskView } from './views.js';

/*
 * The web dashboard: its static files (built into dist/dashboard/ by `npm run build`) at `/` and
 * `/dashboard/*`, and the read routes it needs to stay usable at 10,000 service syncs, where
 * `GET /api/v1/tasks/:id` (every service of a task) is too much to fetch at every refresh:
 *
 *   GET /api/v1/tasks/:id/services  one page of a task's services, searchable and filtered
 *   GET /api/v1/tasks:summary       every task with its service syncs counted and summed up
 *   GET /api/v1/tasks/:id/summary   one task, the same way
 *   GET /api/v1/clusters:status     whether the tasks that use each cluster can reach it
 *
 * The pages and sums are computed here from `store.listServiceStatus` (one HGETALL per task), so the
 * browser gets a page or a few numbers instead of every status.
 */

/** A task with its service syncs summed up, as the dashboard's task list shows it. */
export interface TaskSummaryView extends TaskView {
  /** The task's own error (rules, service lists), masked; null when none. */
  error: string | null;
  /** Service syncs (services of the task with a status). */
  serviceSyncs: number;
  /** Instances read from the source and copies held in the destination, summed over the services. */
  sourceInstances: number;
  destinationInstances: number;
  /** The largest lag of the services' last reconciles, ms; null before any. */
  maxLagMs: number | null;
  /** The latest successful reconcile of any service; null before any. */
  lastSyncAt: string | null;
  /** Service syncs whose last reconcile reported a problem (held mass deletions included). */
  failing: number;
  /** Service syncs holding back a mass deletion. */
  held: number;
  /** The task's error, else the first failing service's (`namespace/group/name: message`), masked. */
  lastError: string | null;
}

/** How reachable a cluster looks from the reconciles of the running tasks that use it. */
export type Reachability = 'ok' | 'failing' | 'partial' | 'unknown';

/** One cluster's reachability, as `GET /api/v1/clusters:status` shows it. */
export interface ClusterStatusView {
  id: string;
  /**
   * `ok`: the last reconciles that used it reached it; `failing`: every one of them failed to;
   * `partial`: some did, some did not; `unknown`: no running task has used it yet.
   */
  reachability: Reachability;
  /** Tasks using it, as source or destination (paused ones included). */
  tasks: string[];
  /** Service syncs whose last reconcile reached it, and those that could not. */
  reached: number;
  unreached: number;
  /** One of the failures (`task namespace/group/name: message`), masked; null when none. */
  lastError: string | null;
  /**
   * Why it was not reached, when it was not (see `reachFailureOf`): `auth_failed`, `not_connected`,
   * `unreachable` or `error`; the most common among the failures (ties: the first seen). Null when
   * every reconcile reached it.
   */
  failure: ReachFailure | null;
}

/** What `GET /api/v1/tasks/:id/services` filters and pages by. */
export interface ServicePageQuery {
  offset: number;
  limit: number;
  /** Case-insensitive substring of `namespace/group/name` or of the mapped destination. */
  q?: string | undefined;
  /** Only services whose last reconcile reported a problem, or that hold a mass deletion. */
  only?: 'error' | 'held' | undefined;
}

/** Default and largest page of {@link ServicePageQuery.limit}. */
export const DEFAULT_SERVICE_PAGE = 100;
export const MAX_SERVICE_PAGE = 1000;

/**
 * One page of a task's services, in the store's order (namespace, group, name), after the search
 * and the filter: `total` counts every match, `items` holds at most `limit` of them from `offset`.
 */
export function pageOfServices(
  statuses: readonly ServiceStatus[],
  query: ServicePageQuery,
  mapping?: ServiceMapping,
): { total: number; items: ServiceStatus[] } {
  const needle = query.q?.trim().toLowerCase() ?? '';
  const matches = statuses.filter((s) => {
    if (query.only === 'error' && s.lastError === null) return false;
    if (query.only === 'held' && !s.held) return false;
    if (needle === '') return true;
    return (
      serviceKeyString(s.service).toLowerCase().includes(needle) ||
      (mapping !== undefined && serviceKeyString(mapService(s.service, mapping)).toLowerCase().includes(needle))
    );
  });
  return { total: matches.length, items: matches.slice(query.offset, query.offset + query.limit) };
}

/** Sums up a task's service syncs; messages are masked with `secrets` (the clusters' passwords). */
export function taskSummary(
  spec: TaskSpec,
  taskError: string | null,
  statuses: readonly ServiceStatus[],
  secrets: readonly (string | undefined)[],
): TaskSummaryView {
  let sourceInstances = 0;
  let destinationInstances = 0;
  let maxLagMs: number | null = null;
  let lastSyncAt: string | null = null;
  let failing = 0;
  let held = 0;
  let firstError: string | null = null;
  for (const s of statuses) {
    sourceInstances += s.sourceInstances;
    destinationInstances += s.destinationInstances;
    if (s.lagMs !== null && (maxLagMs === null || s.lagMs > maxLagMs)) maxLagMs = s.lagMs;
    if (s.lastSyncAt !== null && (lastSyncAt === null || s.lastSyncAt > lastSyncAt)) lastSyncAt = s.lastSyncAt;
    if (s.held) held += 1;
    if (s.lastError !== null) {
      failing += 1;
      firstError ??= `${serviceKeyString(s.service)}: ${s.lastError}`;
    }
  }
  const error = taskError === null ? null : maskSecrets(taskError, secrets);
  const lastError = error ?? (firstError === null ? null : maskSecrets(firstError, secrets));
  return {
    ...taskView(spec, isFailing(taskError, statuses)),
    error,
    serviceSyncs: statuses.length,
    sourceInstances,
    destinationInstances,
    maxLagMs,
    lastSyncAt,
    failing,
    held,
    lastError,
  };
}

/**
 * Each cluster's reachability as the engine saw it, with no probe of its own: the API process may
 * run elsewhere than the workers, so only their reads and writes tell whether *they* reach a
 * cluster. A service sync's last reconcile failed to reach a cluster when its status carries a
 * problem of that side and cluster whose code says so (`cluster_unavailable`, `source_unreadable`,
 * `destination_unreadable`, `destination_unwritable`; a task problem `source_unlisted` counts
 * against its source). It reached the source when it has synced, or failed only at the
 * destination after reading the source, and the destination when it has synced and no problem
 * says it was not reached. Paused tasks only count as users: their statuses are as old as the pause.
 */
export function clusterStatuses(
  clusters: readonly ClusterSpec[],
  tasks: ReadonlyArray<{ spec: TaskSpec; taskProblem: TaskProblem | null; statuses: readonly ServiceStatus[] }>,
): ClusterStatusView[] {
  const secrets = clusters.map((c) => c.password);
  const views = new Map<string, ClusterStatusView>(
    clusters.map((c) => [c.id, { id: c.id, reachability: 'unknown', tasks: [], reached: 0, unreached: 0, lastError: null, failure: null }]),
  );
  const kinds = new Map<string, Map<ReachFailure, number>>();
  const failed = (view: ClusterStatusView, what: string, failure: ReachFailure) => {
    view.unreached += 1;
    view.lastError ??= maskSecrets(what, secrets);
    const seen = kinds.get(view.id) ?? new Map<ReachFailure, number>();
    seen.set(failure, (seen.get(failure) ?? 0) + 1);
    kinds.set(view.id, seen);
  };
  for (const { spec, taskProblem, statuses } of tasks) {
    const source = views.get(spec.source);
    const destination = views.get(spec.destination);
    source?.tasks.push(spec.id);
    destination?.tasks.push(spec.id);
    if (spec.state === 'paused') continue;
    if (source && taskProblem?.code === 'source_unlisted' && taskProblem.cluster === spec.source) {
      failed(source, `${spec.id}: ${taskProblem.message}`, reachFailureOf({ code: 'source_unreadable', side: 'source', cluster: spec.source, message: taskProblem.message }));
    }
    for (const s of statuses) {
      const problems = s.problems ?? [];
      const unreached = problems.filter(isUnreached);
      const sourceDown = unreached.some((p) => p.side === 'source' && p.cluster === spec.source);
      const destinationDown = unreached.some((p) => p.side === 'destination' && p.cluster === spec.destination);
      // A destination read or write fails after the source was read; a destination that cannot even be used, before.
      const sourceRead = problems.some((p) => p.side === 'destination' && p.code !== 'cluster_unavailable');
      const what = `${spec.id} ${serviceKeyString(s.service)}: ${s.lastError ?? ''}`;
      const failureAt = (side: 'source' | 'destination') => {
        const problem = unreached.find((p) => p.side === side);
        return problem === undefined ? 'error' : reachFailureOf(problem);
      };
      if (source && sourceDown) failed(source, what, failureAt('source'));
      else if (source && (sourceRead || s.lastSyncAt !== null)) source.reached += 1;
      if (destination && destinationDown) failed(destination, what, failureAt('destination'));
      else if (destination && !sourceDown && s.lastSyncAt !== null) destination.reached += 1;
    }
  }
  for (const view of views.values()) {
    view.reachability = view.unreached === 0 ? (view.reached === 0 ? 'unknown' : 'ok') : view.reached === 0 ? 'failing' : 'partial';
    let most = 0;
    for (const [failure, count] of kinds.get(view.id) ?? []) {
      if (count > most) {
        most = count;
        view.failure = failure;
      }
    }
  }
  return [...views.values()];
}

const nullableString = { type: ['string', 'null'] } as const;
const nullableNumber = { type: ['number', 'null'] } as const;

/** The service items of `GET /api/v1/tasks/:id`, reused for one page of them. */
const serviceItemSchema = taskDetailSchema.properties.status.properties.services.items;

const servicePageQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    offset: { type: 'string', pattern: '^[0-9]{1,9}$', description: 'Matching services to skip (default 0).' },
    limit: { type: 'string', pattern: '^(?:[1-9][0-9]{0,2}|1000)$', description: 'Services to return, 1 to 1000 (default 100).' },
    q: { type: 'string', maxLength: 255, description: 'Case-insensitive substring of namespace/group/name or of the mapped destination.' },
    only: { type: 'string', enum: ['error', 'held'], description: 'Only services whose last reconcile reported a problem, or that hold a mass deletion.' },
  },
} as const;

const servicePageSchema = {
  type: 'object',
  required: ['total', 'items'],
  properties: { total: { type: 'integer' }, items: { type: 'array', items: serviceItemSchema } },
} as const;

const taskSummarySchema = {
  type: 'object',
  required: [
    ...taskViewSchema.required,
    'error',
    'serviceSyncs',
    'sourceInstances',
    'destinationInstances',
    'maxLagMs',
    'lastSyncAt',
    'failing',
    'held',
    'lastError',
  ],
  properties: {
    ...taskViewSchema.properties,
    error: nullableString,
    serviceSyncs: { type: 'integer' },
    sourceInstances: { type: 'integer' },
    destinationInstances: { type: 'integer' },
    maxLagMs: nullableNumber,
    lastSyncAt: nullableString,
    failing: { type: 'integer' },
    held: { type: 'integer' },
    lastError: nullableString,
  },
} as const;

const clusterStatusSchema = {
  type: 'object',
  required: ['id', 'reachability', 'tasks', 'reached', 'unreached', 'lastError', 'failure'],
  properties: {
    id: { type: 'string' },
    reachability: { type: 'string', enum: ['ok', 'failing', 'partial', 'unknown'] },
    tasks: { type: 'array', items: { type: 'string' } },
    reached: { type: 'integer' },
    unreached: { type: 'integer' },
    lastError: nullableString,
    failure: { type: ['string', 'null'], enum: ['auth_failed', 'not_connected', 'unreachable', 'error', null] },
  },
} as const;

/** Where the built dashboard may be: next to the compiled API (dist/), or under dist/ when run from the sources. */
function defaultAssetDirs(): string[] {
  const root = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
  return [join(root, 'dashboard'), join(root, 'dist', 'dashboard')];
}

/** Options of {@link registerDashboardRoutes}. */
export interface DashboardOptions {
  /** Directories searched, in order, for the built dashboard (default: dist/dashboard of this package). */
  assetDirs?: readonly string[];
}

/** File names the dashboard may serve: no path separators, no dot files, known types only. */
const ASSET_NAME = /^[a-z0-9][a-z0-9._-]*\.(js|css|svg)$/;
const CONTENT_TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
};

/**
 * The page's own origin for everything, nothing inline: the token it keeps in sessionStorage can
 * only leave through code the server sent.
 */
const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

interface Asset {
  body: Buffer;
  etag: string;
  type: string;
  mtimeMs: number;
  size: number;
}

/**
 * The dashboard: `GET /` (the page), `GET /dashboard/:file` (its scripts and style sheet) and the
 * read routes described at the top of this file. The files are read from the build output when
 * first asked for and again when they change, revalidated by ETag.
 *
 * Deliberately left out: compression and long-lived caching (a few small files on an operator's
 * page), and any route that writes: the dashboard acts through the REST API itself.
 */
export function registerDashboardRoutes(app: FastifyInstance, ctx: RouteContext, options: DashboardOptions = {}): void {
  const { store } = ctx;
  const assetDirs = options.assetDirs ?? defaultAssetDirs();
  const cache = new Map<string, Asset>();

  const load = async (name: string): Promise<Asset | undefined> => {
    for (const dir of assetDirs) {
      const path = join(dir, name);
      const info = await stat(path).catch(() => undefined);
      if (!info?.isFile()) continue;
      const cached = cache.get(path);
      if (cached && cached.mtimeMs === info.mtimeMs && cached.size === info.size) return cached;
      const body = await readFile(path);
      const extension = name.slice(name.lastIndexOf('.') + 1);
      const asset: Asset = {
        body,
        etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
        type: CONTENT_TYPES[extension] ?? 'application/octet-stream',
        mtimeMs: info.mtimeMs,
        size: info.size,
      };
      cache.set(path, asset);
      return asset;
    }
    return undefined;
  };

  const send = async (name: string, ifNoneMatch: string | undefined, reply: FastifyReply) => {
    const asset = await load(name);
    if (asset === undefined) {
      if (name === 'index.html') throw new ApiError('not_found', 'the dashboard is not built: run npm run build (it writes dist/dashboard/)');
      throw new ApiError('not_found', `no dashboard file ${name}`);
    }
    reply
      .header('etag', asset.etag)
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer');
    if (name === 'index.html') reply.header('content-security-policy', PAGE_POLICY).header('x-frame-options', 'DENY');
    if (ifNoneMatch === asset.etag) return reply.code(304).send();
    return reply.type(asset.type).send(asset.body);
  };

  app.get('/', async (request, reply) => send('index.html', request.headers['if-none-match'], reply));
  app.get<{ Params: { file: string } }>('/dashboard/:file', async (request, reply) => {
    const { file } = request.params;
    if (!ASSET_NAME.test(file)) throw new ApiError('not_found', `no dashboard file ${file}`);
    return send(file, request.headers['if-none-match'], reply);
  });

  const mustGetTask = async (id: string): Promise<TaskSpec> => {
    const spec = await store.getTask(id);
    if (spec === undefined) throw new ApiError('task_not_found', `no task ${id}`);
    return spec;
  };
  const passwords = async (): Promise<Array<string | undefined>> => (await store.listClusters()).map((c) => c.password);

  app.get<{ Params: { id: string }; Querystring: { offset?: string; limit?: string; q?: string; only?: 'error' | 'held' } }>(
    '/api/v1/tasks/:id/services',
    {
      schema: {
        summary: "One page of a task's services, searched and filtered",
        params: lookupParams,
        querystring: servicePageQuerySchema,
        response: { 200: servicePageSchema },
      },
    },
    async (request) => {
      const spec = await mustGetTask(request.params.id);
      const { offset, limit, q, only } = request.query;
      const [statuses, source, destination] = await Promise.all([
        store.listServiceStatus(spec.id),
        store.getCluster(spec.source),
        store.getCluster(spec.destination),
      ]);
      const page = pageOfServices(statuses, {
        offset: offset === undefined ? 0 : Number(offset),
        limit: limit === undefined ? DEFAULT_SERVICE_PAGE : Number(limit),
        q,
        only,
      }, spec.options.mapping);
      const secrets = [source?.password, destination?.password].filter((p) => p !== undefined);
      const items: ServiceStatusView[] = taskDetailView(spec, null, page.items, secrets).status.services;
      return { total: page.total, items };
    },
  );

  const summaryOf = async (spec: TaskSpec, secrets: Array<string | undefined>): Promise<TaskSummaryView> => {
    const [taskError, statuses] = await Promise.all([store.getTaskError(spec.id), store.listServiceStatus(spec.id)]);
    return taskSummary(spec, taskError, statuses, secrets);
  };

  // `::` is a literal colon for the router: the path is `/api/v1/tasks:summary`, which no task id can shadow.
  app.get(
    '/api/v1/tasks::summary',
    { schema: { summary: 'Every task with its service syncs summed up', response: { 200: listOf(taskSummarySchema) } } },
    async () => {
      const [tasks, secrets] = await Promise.all([store.listTasks(), passwords()]);
      return { items: await Promise.all(tasks.map((t) => summaryOf(t, secrets))) };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/api/v1/tasks/:id/summary',
    { schema: { summary: 'One task with its service syncs summed up', params: lookupParams, response: { 200: taskSummarySchema } } },
    async (request) => summaryOf(await mustGetTask(request.params.id), await passwords()),
  );

  app.get(
    '/api/v1/clusters::status',
    { schema: { summary: 'Whether the reconciles of the tasks using each cluster reach it', response: { 200: listOf(clusterStatusSchema) } } },
    async () => {
      const [clusters, tasks] = await Promise.all([store.listClusters(), store.listTasks()]);
      const withStatus = await Promise.all(
        tasks.map(async (spec) => {
          // A paused task's statuses are as old as the pause: it only counts as a user.
          if (spec.state === 'paused') return { spec, taskProblem: null, statuses: [] };
          const [taskProblem, statuses] = await Promise.all([store.getTaskProblem(spec.id), store.listServiceStatus(spec.id)]);
          return { spec, taskProblem, statuses };
        }),
      );
      return { items: clusterStatuses(clusters, withStatus) };
    },
  );
}
