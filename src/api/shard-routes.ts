import type { FastifyInstance } from 'fastify';
import type { DeploymentView } from '../coord/deployment-view.js';

/**
 * `GET /api/v1/shards` (each shard's leader, fencing token, lease time left, replicas, queue depth
 * and service syncs) and `GET /api/v1/workers` (live workers with the shards they lead and serve),
 * and `GET /api/v1/cmdb` (the CMDB of every worker: provider, whether it answers, its last problem,
 * when it last refreshed), read from Redis at every request.
 */
export function registerShardRoutes(app: FastifyInstance, view: DeploymentView): void {
  app.get('/api/v1/shards', async () => view.shards());
  app.get('/api/v1/workers', async () => view.workers());
  app.get('/api/v1/cmdb', async () => view.partStatus('cmdb'));
}
