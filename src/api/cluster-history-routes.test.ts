import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RegsyncStore } from '../store/index.js';
import { CLUSTER_HISTORY_BUCKETS, ClusterErrorHistory } from '../store/cluster-history.js';
import { RecordingTaskControl } from '../../test/support/recording-task-control.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { buildApiApp } from './api-app.js';

const redisServer = redisPerTest();
let store: RegsyncStore;
let app: FastifyInstance;

beforeEach(async () => {
  store = new RegsyncStore(redisServer.redis, redisServer.prefix);
  app = await buildApiApp({ store, control: new RecordingTaskControl(), redis: redisServer.redis, clusterHistory: new ClusterErrorHistory(redisServer.redis, redisServer.prefix) });
  await store.createCluster({ id: 'shanghai', kind: 'nacos', endpoints: ['10.0.0.1:8848'], labels: {}, options: {} });
});
afterEach(async () => {
  await app.close();
});

describe('GET /api/v1/clusters/:id/history', () => {
  it("answers the cluster's last hour per minute, oldest first, with the counts of every process", async () => {
    const quiet = await app.inject({ method: 'GET', url: '/api/v1/clusters/shanghai/history' });
    expect(quiet.statusCode).toBe(200);
    const empty = quiet.json().items as Array<{ at: string; errors: number; byCode: Record<string, number> }>;
    expect(empty).toHaveLength(CLUSTER_HISTORY_BUCKETS);
    expect(empty.every((b) => b.errors === 0 && Object.keys(b.byCode).length === 0)).toBe(true);

    // Two processes (a worker and another) count failures of the same cluster.
    for (const redis of [redisServer.connect(), redisServer.connect()]) {
      const process = new ClusterErrorHistory(redis, redisServer.prefix);
      process.count('shanghai', 'nacos-unreachable');
      process.count('shanghai', 'nacos-timeout');
      await process.flush();
    }
    const res = await app.inject({ method: 'GET', url: '/api/v1/clusters/shanghai/history' });
    const items = res.json().items as Array<{ at: string; errors: number; byCode: Record<string, number> }>;
    const times = items.map((b) => Date.parse(b.at));
    expect(times).toEqual([...times].sort((a, b) => a - b));
    const counted = items.filter((b) => b.errors > 0);
    // Both processes wrote within a minute or two; whichever minutes they fell in, nothing is lost.
    expect(counted.reduce((n, b) => n + b.errors, 0)).toBe(4);
    expect(counted.reduce((n, b) => n + (b.byCode['nacos-unreachable'] ?? 0), 0)).toBe(2);
  });

  it('answers cluster_not_found for an unknown cluster', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/clusters/nope/history' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('cluster_not_found');
  });

  it('is in the OpenAPI document with its summary and response schema', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    const op = doc.paths['/api/v1/clusters/{id}/history'].get;
    expect(op.summary).toContain('last hour');
    expect(op.tags).toEqual(['clusters']);
    expect(Object.keys(op.responses['200'].content['application/json'].schema.properties.items.items.properties).sort()).toEqual(['at', 'byCode', 'errors']);
  });
});
