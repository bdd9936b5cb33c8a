import type { FastifyInstance } from 'fastify';
import type { ClusterSpec } from '../model/index.js';
import type { ClusterErrorBucket } from '../store/cluster-history.js';
import { ApiError } from './api-error.js';
import { listOf, lookupParams } from './schemas.js';

/** Where `GET /api/v1/clusters/:id/history` reads a cluster's buckets of failed requests. */
export interface ClusterHistorySource {
  read(clusterId: string): Promise<ClusterErrorBucket[]>;
}

/** One minute of failed requests as the route answers it. */
export const clusterErrorBucketView = {
  type: 'object',
  additionalProperties: false,
  required: ['at', 'errors', 'byCode'],
  properties: {
    at: { type: 'string', description: 'ISO-8601 start of the minute.' },
    errors: { type: 'integer', description: 'Failed requests to the cluster in the minute, by every process.' },
    byCode: {
      type: 'object',
      description: "The failed requests by the adapter's error code (at most 16 codes a minute; the rest count under `other`).",
      additionalProperties: { type: 'integer' },
    },
  },
} as const;

/**
 * `GET /api/v1/clusters/:id/history`: the cluster's failed registry requests over the last hour,
 * one bucket per minute, oldest first, zeros included (`{items: [{at, errors, byCode}]}`), as every
 * process of the deployment counted them (see `ClusterErrorHistory`). `cluster_not_found` for an
 * unknown cluster.
 */
export function registerClusterHistoryRoutes(app: FastifyInstance, history: ClusterHistorySource, store: { getCluster(id: string): Promise<ClusterSpec | undefined> }): void {
  app.get<{ Params: { id: string } }>(
    '/api/v1/clusters/:id/history',
    { schema: { params: lookupParams, response: { 200: listOf(clusterErrorBucketView) } } },
    async (request) => {
      const { id } = request.params;
      if ((await store.getCluster(id)) === undefined) throw new ApiError('cluster_not_found', `no cluster ${id}`);
      return { items: await history.read(id) };
    },
  );
}
