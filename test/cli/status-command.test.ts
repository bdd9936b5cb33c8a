import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { freePort } from '../support/ports.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import { waitUntil } from '../support/wait-until.js';

const READ = 'status-read-0123456789abcdef';
const ADMIN = 'status-admin-0123456789abcdef';

/**
 * `regsync status` against a real `regsync up` with tokens: east (an embedded registry) syncs to
 * west (a closed port), which fails; west-to-east is paused; zk is used by no task.
 */
describe('regsync status', () => {
  let redis: RedisServer;
  let east: RunningRegistry;
  let up: RegsyncProcess;

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${up.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    redis = await startRedis();
    east = await startRegistry({ port: 0 });
    up = await startRegsync(['up', '--redis', redis.url, '--listen', '127.0.0.1:0'], { env: { REGSYNC_API_TOKENS: `admin:${ADMIN},read:${READ}` } });
    const closed = await freePort();
    for (const cluster of [
      { id: 'east', kind: 'nacos', endpoints: [east.endpoint] },
      { id: 'west', kind: 'nacos', endpoints: [`127.0.0.1:${closed}`], options: { requestTimeoutMs: 1_000 } },
      { id: 'zk', kind: 'zookeeper', endpoints: ['127.0.0.1:1'] },
    ]) {
      expect((await call('POST', '/api/v1/clusters', cluster)).status).toBe(201);
    }
    east.store.register('public', 'DEFAULT_GROUP', 'orders', { ip: '10.34.0.1', port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {} });
    for (const [id, source, destination] of [['east-to-west', 'east', 'west'], ['west-to-east', 'west', 'east']]) {
      expect((await call('POST', '/api/v1/tasks', { id, source, destination, service: 'orders' })).status).toBe(201);
    }
    expect((await call('POST', '/api/v1/tasks/west-to-east/pause')).status).toBe(200);
    await waitUntil(async () => (await call('GET', '/api/v1/tasks/east-to-west/summary')).body.state === 'error', { message: 'east-to-west to fail', timeoutMs: 30_000 });
  });
  afterAll(async () => {
    await up?.stop();
    await east?.close();
    await redis?.cleanup();
  });

  it('prints a line per cluster and per task, with the failing task marked', async () => {
    const res = await runRegsync(['status', '--server', up.url], { env: { REGSYNC_API_TOKEN: READ } });
    expect(res.code, res.output).toBe(0);
    const lines = res.output.trimEnd().split('\n');
    expect(lines.slice(0, 3)).toEqual([
      'cluster  east  nacos      reachable',
      'cluster  west  nacos      unreachable',
      'cluster  zk    zookeeper  unknown',
    ]);
    expect(lines[3]).toMatch(/^east -> west {2}east-to-west {2}running {2}copies 0 {2}lag \S+ {2}failing$/);
    expect(lines[4]).toMatch(/^west -> east {2}west-to-east {2}paused {3}copies 0 {2}lag -$/);
    expect(lines).toHaveLength(5);
  });

  it('prints the same picture as a Graphviz digraph', async () => {
    const res = await runRegsync(['status', '--server', up.url, '--format', 'dot'], { env: { REGSYNC_API_TOKEN: READ } });
    expect(res.code, res.output).toBe(0);
    expect(res.output).toMatch(/^digraph regsync \{\n/);
    expect(res.output).toContain('  "west" [label="west\\nnacos, unreachable", color="#b3261e", class="health-failing"];');
    expect(res.output).toMatch(/ {2}"east" -> "west" \[label="east-to-west\\ncopies 0[^"]* failing", color="#b3261e", fontcolor="#b3261e", class="tone-failing", penwidth=2\];/);
    expect(res.output).toMatch(/ {2}"west" -> "east" \[[^\]]*class="tone-paused", style=dashed\];/);
  });

  it('says that a token is needed, and refuses a format it does not know', async () => {
    const without = await runRegsync(['status', '--server', up.url], { env: { REGSYNC_API_TOKEN: '' } });
    expect(without.code).toBe(1);
    expect(without.output).toContain('401');
    expect(without.output).toContain('set REGSYNC_API_TOKEN');
    const wrong = await runRegsync(['status', '--server', up.url, '--format', 'svg'], { env: { REGSYNC_API_TOKEN: READ } });
    expect(wrong.code).not.toBe(0);
    expect(wrong.output).toContain("option '--format <format>' argument 'svg' is invalid. expected text or dot");
  });
});
