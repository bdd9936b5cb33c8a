import type { FastifyInstance } from 'fastify';
import type { ClusterSpec } from '../model/index.js';
import type { RouteContext } from './api-deps.js';
import { ApiError } from './api-error.js';
import { principalOf } from './auth.js';
import { checkClusterSpec } from './kind-routes.js';
import { compareCluster, putCluster } from './cluster-commands.js';
import { notifyEngine } from './notify.js';
import {
  clusterView as clusterViewSchema,
  comparisonView,
  createClusterBody,
  createParams,
  listOf,
  lookupParams,
  replaceClusterBody,
} from './schemas.js';
import { clusterView } from './views.js';

/** A cluster body as the schemas let it through. */
interface ClusterBody {
  id?: string;
  kind: string;
  endpoints: string[];
  namespace?: string;
  username?: string;
  /** `null` (PUT only) removes the stored password; absent (PUT) keeps it. */
  password?: string | null;
  hasPassword?: boolean;
  labels?: Record<string, string>;
  options?: Record<string, unknown>;
}

interface IdParams {
  id: string;
}

/**
 * `/api/v1/clusters`: create, list, show, replace, compare (would a replace change anything), delete.
 * Passwords go in, never out. A replace that changes nothing writes nothing (see {@link putCluster}).
 *
 * Deliberately left out: checking that a cluster is reachable (the engine reports that per task),
 * and making the in-use check of a delete atomic with task creation (a task created in the same
 * instant as its cluster is deleted is reported by the engine as an unknown cluster).
 */
export function registerClusterRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store, control, log } = ctx;

  app.post<{ Body: ClusterBody }>(
    '/api/v1/clusters',
    { schema: { body: createClusterBody, response: { 201: clusterViewSchema } } },
    async (request, reply) => {
      const spec = toSpec(request.body.id as string, request.body, undefined);
      checkClusterSpec(spec);
      if ((await store.createCluster(spec)) === 'exists') {
        throw new ApiError('cluster_exists', `cluster ${spec.id} already exists; PUT /api/v1/clusters/${spec.id} replaces it`);
      }
      await notifyEngine(log, { clusterId: spec.id, call: 'clusterChanged' }, () => control.clusterChanged(spec.id));
      return reply.code(201).header('location', `/api/v1/clusters/${spec.id}`).send(clusterView(spec));
    },
  );

  app.get('/api/v1/clusters', { schema: { response: { 200: listOf(clusterViewSchema) } } }, async () => {
    return { items: (await store.listClusters()).map(clusterView) };
  });

  app.get<{ Params: IdParams }>(
    '/api/v1/clusters/:id',
    { schema: { params: lookupParams, response: { 200: clusterViewSchema } } },
    async (request) => clusterView(await mustGetCluster(ctx, request.params.id)),
  );

  app.put<{ Params: IdParams; Body: ClusterBody }>(
    '/api/v1/clusters/:id',
    { schema: { params: createParams, body: replaceClusterBody, response: { 200: clusterViewSchema, 201: clusterViewSchema } } },
    async (request, reply) => {
      const { id } = request.params;
      if (request.body.id !== undefined && request.body.id !== id) {
        throw new ApiError('id_mismatch', `body.id ${request.body.id} differs from the id ${id} in the path`);
      }
      const existing = await store.getCluster(id);
      const spec = toSpec(id, request.body, existing?.password);
      checkClusterSpec(spec);
      const result = await putCluster(ctx, spec);
      return reply.code(result === 'created' ? 201 : 200).send(clusterView(spec));
    },
  );

  app.post<{ Params: IdParams; Body: ClusterBody }>(
    '/api/v1/clusters/:id/compare',
    { schema: { params: createParams, body: replaceClusterBody, response: { 200: comparisonView } } },
    async (request) => {
      const { id } = request.params;
      if (request.body.id !== undefined && request.body.id !== id) {
        throw new ApiError('id_mismatch', `body.id ${request.body.id} differs from the id ${id} in the path`);
      }
      // Whether a password matches the stored one is a secret of its own: only an admin may ask.
      const principal = principalOf(request);
      if (typeof request.body.password === 'string' && principal !== undefined && principal.scope !== 'admin') {
        throw new ApiError('forbidden', `token ${principal.name} has scope ${principal.scope}: comparing a password needs an admin token`);
      }
      const existing = await store.getCluster(id);
      const spec = toSpec(id, request.body, existing?.password);
      checkClusterSpec(spec);
      return compareCluster(existing, spec);
    },
  );

  app.delete<{ Params: IdParams }>(
    '/api/v1/clusters/:id',
    { schema: { params: lookupParams } },
    async (request, reply) => {
      const { id } = request.params;
      const users = await store.tasksUsingCluster(id);
      if (users.length > 0) {
        const ids = users.map((t) => t.id);
        const shown = ids.length > 10 ? `${ids.slice(0, 10).join(', ')} and ${ids.length - 10} more` : ids.join(', ');
        const many = ids.length > 1;
        throw new ApiError('cluster_in_use', `cluster ${id} is used by task${many ? 's' : ''} ${shown}; delete ${many ? 'them' : 'it'} first`);
      }
      if (!(await store.deleteCluster(id))) throw clusterNotFound(id);
      await notifyEngine(log, { clusterId: id, call: 'clusterChanged' }, () => control.clusterChanged(id));
      return reply.code(204).send();
    },
  );
}

async function mustGetCluster(ctx: RouteContext, id: string): Promise<ClusterSpec> {
  const spec = await ctx.store.getCluster(id);
  if (spec === undefined) throw clusterNotFound(id);
  return spec;
}

function clusterNotFound(id: string): ApiError {
  return new ApiError('cluster_not_found', `no cluster ${id}`);
}

/**
 * The spec a body describes. An absent password keeps `storedPassword` (a client that read the
 * cluster never saw it), `null` removes it. `hasPassword` is read-only and ignored.
 */
function toSpec(id: string, body: ClusterBody, storedPassword: string | undefined): ClusterSpec {
  const password = body.password === undefined ? storedPassword : (body.password ?? undefined);
  return {
    id,
    kind: body.kind,
    endpoints: body.endpoints,
    namespace: body.namespace,
    username: body.username,
    password,
    labels: body.labels ?? {},
    options: body.options ?? {},
  };
}
