import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { RegsyncStore } from '../../src/store/index.js';
import { scrape } from '../support/prometheus.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import { waitUntil } from '../support/wait-until.js';

const run = promisify(execFile);
const persistent = (ip: string) => ({ ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {} });

describe('regsync dns', () => {
  let redis: RedisServer;
  let client: Redis;
  let store: RegsyncStore;
  const registries: RunningRegistry[] = [];
  let dns: RegsyncProcess | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url);
    store = new RegsyncStore(client, 'regsync');
  });
  afterAll(async () => {
    await dns?.stop();
    client?.disconnect();
    for (const r of registries) await r.close();
    await redis?.cleanup();
  });

  async function cluster(id: string, ip: string): Promise<void> {
    const r = await startRegistry({ port: 0 });
    registries.push(r);
    r.store.register('public', 'DEFAULT_GROUP', `${id}-orders`, persistent(ip));
    await store.putCluster({ id, kind: 'nacos', endpoints: [r.endpoint], labels: {}, options: { apiVersion: 'grpc', grpcPort: r.grpcPort } });
  }

  it('serves the stored clusters, follows a cluster added later, and shows status and metrics', async () => {
    await cluster('sh', '10.70.0.1');
    dns = await startRegsync(['dns', '--redis', redis.url, '--listen', '127.0.0.1:0', '--metrics-listen', '127.0.0.1:0'], { ready: /metrics and status on (http:\/\/\S+)/ });
    const line = /^regsync dns: zone regsync\.internal on 127\.0\.0\.1:(\d+) \(UDP and TCP\); metrics and status on (http:\/\/\S+)$/m.exec(dns.output());
    expect(line).not.toBeNull();
    const [port, base] = [line?.[1] as string, line?.[2] as string];
    const dig = async (name: string) => (await run('dig', ['@127.0.0.1', '-p', port, '+norec', '+short', '+time=5', '+tries=1', name, 'A'])).stdout.trim();
    expect(await dig('sh-orders.svc.regsync.internal')).toBe('10.70.0.1');

    // A cluster defined through the API is announced on the control channel: served without a restart.
    await cluster('bj', '10.70.0.2');
    await client.publish('regsync:control', JSON.stringify({ op: 'clusterChanged', id: 'bj', from: 'test' }));
    await waitUntil(async () => (await dig('bj-orders.svc.regsync.internal')) === '10.70.0.2', { message: 'the new cluster served' });

    const status = (await (await fetch(`${base}/status`)).json()) as { clusters: Array<{ id: string; state: string }> };
    expect(status.clusters.map((c) => `${c.id}:${c.state}`)).toEqual(['bj:fresh', 'sh:fresh']);
    const metrics = await scrape(`${base}/metrics`);
    expect(metrics.total('regsync_dns_queries_total')).toBeGreaterThanOrEqual(2);
    expect(metrics.total('regsync_dns_services')).toBe(2);
    expect(await dns.stop()).toBe(0);
    dns = undefined;
  });

  it('refuses bad settings with a message naming them, before serving', async () => {
    const badPort = await runRegsync(['dns', '--redis', redis.url, '--listen', '127.0.0.1:99999']);
    expect(badPort.code).toBe(1);
    expect(badPort.output).toContain('regsync: dns --listen: expected host:port with a port from 0 to 65535, got "127.0.0.1:99999"');
    const badZone = await runRegsync(['dns', '--redis', redis.url, '--zone', 'cluster.local']);
    expect(badZone.code).toBe(1);
    expect(badZone.output).toMatch(/regsync: dns zone: /);
    const noRedis = await runRegsync(['dns', '--redis', 'redis://:secret@127.0.0.1:1', '--listen', '127.0.0.1:0']);
    expect(noRedis.code).toBe(1);
    expect(noRedis.output).toContain('cannot reach Redis at redis://:***@127.0.0.1:1');
    expect(noRedis.output).not.toContain('secret');
  });
});
