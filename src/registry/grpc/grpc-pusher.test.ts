import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CmdbCache, FileCmdbProvider } from '../../cmdb/index.js';
import { startRegistry, type RunningRegistry } from '../registry-server.js';
import { NACOS_SCENARIO_YAML } from '../../../test/support/cmdb-fixtures.js';
import { TestGrpcClient, wireHost } from '../../../test/support/grpc-client.js';
import { formOf } from '../../../test/support/http.js';
import { waitUntil } from '../../../test/support/wait-until.js';

type Info = { name: string; groupName: string; clusters: string; allIPs: boolean; allIps: boolean; hosts: Array<{ ip: string; port: number; enabled: boolean }> };
const ipsOf = (info: Info | undefined) => (info?.hosts ?? []).map((h) => h.ip).sort();

/** Subscriptions and NotifySubscriberRequest pushes over the real @grpc/grpc-js client. */
describe('embedded registry gRPC: subscribe and push', () => {
  let registry: RunningRegistry;
  let clients: TestGrpcClient[] = [];
  let dir: string;
  let cmdb: { provider: FileCmdbProvider; cache: CmdbCache };
  const connect = async (options: Parameters<typeof TestGrpcClient.connect>[1] = {}) => {
    const c = await TestGrpcClient.connect(registry.grpcEndpoint as string, options);
    clients.push(c);
    return c;
  };
  const lastPush = (c: TestGrpcClient, service: string) => c.pushes(service).at(-1) as Info | undefined;
  const http = (method: string, path: string, params: Record<string, string | number | boolean>) =>
    fetch(`${registry.url}${path}?${formOf(params)}`, { method });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'regsync-grpc-push-'));
    const path = join(dir, 'cmdb.yaml');
    await writeFile(path, NACOS_SCENARIO_YAML);
    const provider = new FileCmdbProvider({ path });
    await provider.start();
    const cache = new CmdbCache({ provider });
    await cache.start();
    cmdb = { provider, cache };
    registry = await startRegistry({ port: 0, cmdb: cache, grpc: { pushMergeWindowMs: 20, pushAckTimeoutMs: 150, pushRetryDelayMs: 20, pushMaxAttempts: 3 } });
  });
  afterEach(() => {
    for (const c of clients) c.close();
    clients = [];
  });
  afterAll(async () => {
    await registry.close();
    await cmdb.provider.close();
    await cmdb.cache.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('answers the current list, pushes it once after the first subscribe, then after every change from gRPC or HTTP', async () => {
    const publisher = await connect();
    const subscriber = await connect();
    await publisher.naming('BatchInstanceRequest', 'orders', { type: 'batchRegisterInstance', instances: [wireHost('10.1.0.1', 80)] });
    const answer = await subscriber.naming('SubscribeServiceRequest', 'orders', { subscribe: true, clusters: '' });
    expect(answer).toMatchObject({ type: 'SubscribeServiceResponse', body: { resultCode: 200, message: 'success' } });
    expect(ipsOf(answer.body.serviceInfo as Info)).toEqual(['10.1.0.1']);
    await waitUntil(() => subscriber.pushes('orders').length >= 1, { message: 'first push' });
    const first = lastPush(subscriber, 'orders');
    expect(first).toMatchObject({ name: 'orders', groupName: 'DEFAULT_GROUP', clusters: '', allIPs: false, allIps: false });

    await publisher.naming('BatchInstanceRequest', 'orders', {
      type: 'batchRegisterInstance',
      instances: [wireHost('10.1.0.1', 80), wireHost('10.1.0.2', 80), wireHost('10.1.0.3', 80, { enabled: false })],
    });
    await waitUntil(() => ipsOf(lastPush(subscriber, 'orders')).length === 2, { message: 'push with the batch' });
    // Disabled hosts never reach subscribers.
    expect(ipsOf(lastPush(subscriber, 'orders'))).toEqual(['10.1.0.1', '10.1.0.2']);

    await http('POST', '/nacos/v1/ns/instance', { serviceName: 'orders', ip: '10.1.0.9', port: 80 });
    await waitUntil(() => ipsOf(lastPush(subscriber, 'orders')).includes('10.1.0.9'), { message: 'push after an HTTP register' });
    const push = subscriber.received.filter((m) => m.type === 'NotifySubscriberRequest').at(-1);
    expect(push?.body.requestId).toMatch(/^\d+$/);
    // The JSON field names of the reference's push example (nacos-grpc.md section 7), allIPs and allIps both.
    expect(Object.keys(push?.body ?? {}).sort()).toEqual(['headers', 'module', 'requestId', 'serviceInfo']);
    const info = push?.body.serviceInfo as Record<string, unknown>;
    expect(Object.keys(info).sort()).toEqual(
      ['allIPs', 'allIps', 'cacheMillis', 'checksum', 'clusters', 'groupName', 'hosts', 'lastRefTime', 'name', 'reachProtectionThreshold', 'valid'],
    );
    expect(Object.keys((info.hosts as Array<Record<string, unknown>>)[0] ?? {}).sort()).toEqual([
      'clusterName', 'enabled', 'ephemeral', 'healthy', 'instanceHeartBeatInterval', 'instanceHeartBeatTimeOut', 'instanceId',
      'instanceIdGenerator', 'ip', 'ipDeleteTimeout', 'metadata', 'port', 'serviceName', 'weight',
    ]);
    await waitUntil(() => (registry.grpc?.stats().pushesAcked ?? 0) >= 3, { message: 'pushes acked' });
  });

  it('echoes the subscriber clusters string and filters by it; unsubscribe stops pushes', async () => {
    const publisher = await connect();
    const subscriber = await connect();
    await subscriber.naming('SubscribeServiceRequest', 'billing', { subscribe: true, clusters: 'A,B' });
    await waitUntil(() => subscriber.pushes('billing').length >= 1, { message: 'first push' });
    await publisher.naming('BatchInstanceRequest', 'billing', {
      type: 'batchRegisterInstance',
      instances: [wireHost('10.2.0.1', 80, { clusterName: 'A' }), wireHost('10.2.0.2', 80, { clusterName: 'C' })],
    });
    await waitUntil(() => ipsOf(lastPush(subscriber, 'billing')).length === 1, { message: 'filtered push' });
    expect(lastPush(subscriber, 'billing')).toMatchObject({ clusters: 'A,B', hosts: [expect.objectContaining({ ip: '10.2.0.1' })] });

    const off = await subscriber.naming('SubscribeServiceRequest', 'billing', { subscribe: false, clusters: 'A,B' });
    expect(off.body.resultCode).toBe(200);
    const count = subscriber.pushes('billing').length;
    const acked = registry.grpc?.stats().pushesAcked ?? 0;
    // A change the publisher makes is pushed to a fresh subscriber but not to the one that left.
    const watcher = await connect();
    await watcher.naming('SubscribeServiceRequest', 'billing', { subscribe: true, clusters: '' });
    await publisher.naming('BatchInstanceRequest', 'billing', { type: 'batchRegisterInstance', instances: [] });
    await waitUntil(() => watcher.pushes('billing').some((p) => (p as Info).hosts.length === 0), { message: 'push to the watcher' });
    await waitUntil(() => (registry.grpc?.stats().pushesAcked ?? 0) > acked, { message: 'watcher acked' });
    expect(subscriber.pushes('billing')).toHaveLength(count);
  });

  it('sends an unacknowledged push again, then gives up', async () => {
    const publisher = await connect();
    const subscriber = await connect();
    subscriber.answer = () => undefined;
    const before = registry.grpc?.stats() ?? { pushesRetried: 0, pushesFailed: 0 };
    await subscriber.naming('SubscribeServiceRequest', 'retried', { subscribe: true, clusters: '' });
    await publisher.naming('InstanceRequest', 'retried', { type: 'registerInstance', instance: wireHost('10.3.0.1', 80) });
    await waitUntil(() => subscriber.pushes('retried').length >= 3, { message: 'three attempts' });
    await waitUntil(() => (registry.grpc?.stats().pushesFailed ?? 0) > before.pushesFailed, { message: 'push given up' });
    expect(registry.grpc?.stats().pushesRetried).toBeGreaterThan(before.pushesRetried);
    const ids = subscriber.received.filter((m) => m.type === 'NotifySubscriberRequest').map((m) => Number(m.body.requestId));
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('waits for a subscriber that answers late instead of pushing again into its backlog', async () => {
    // Ack timeout 400 ms; retries after 20 ms: without patience every push would go out again.
    const slow = await startRegistry({ port: 0, grpc: { pushMergeWindowMs: 20, pushAckTimeoutMs: 400, pushRetryDelayMs: 20, pushMaxAttempts: 3 } });
    try {
      const publisher = await TestGrpcClient.connect(slow.grpcEndpoint as string);
      const subscriber = await TestGrpcClient.connect(slow.grpcEndpoint as string);
      clients.push(publisher, subscriber);
      const services = ['late-1', 'late-2', 'late-3'];
      for (const name of services) {
        await publisher.naming('BatchInstanceRequest', name, { type: 'batchRegisterInstance', instances: [wireHost('10.5.0.1', 80)] });
      }
      const held: Array<Record<string, unknown>> = [];
      subscriber.answer = (request) => {
        held.push(request.body);
        return undefined;
      };
      for (const name of services) await subscriber.naming('SubscribeServiceRequest', name, { subscribe: true, clusters: '' });
      // Every push is overdue (or, without patience, already sent again) before any answer comes.
      await waitUntil(() => {
        const st = slow.grpc?.stats();
        return (st?.pushesRetried ?? 0) > 0 || (st?.pushesLate ?? 0) >= services.length;
      }, { message: 'pushes overdue' });
      for (const body of held.splice(0)) subscriber.write('NotifySubscriberResponse', { resultCode: 200, errorCode: 0, requestId: body.requestId, success: true });
      await waitUntil(() => (slow.grpc?.stats().pushesAcked ?? 0) >= services.length, { message: 'late answers counted' });
      expect(slow.grpc?.stats()).toMatchObject({ pushesSent: services.length, pushesRetried: 0, pushesFailed: 0 });
      for (const name of services) expect(subscriber.pushes(name)).toHaveLength(1);
    } finally {
      await slow.close();
    }
  });

  it('applies the service label selector with the connection clientIp as the consumer', async () => {
    const selector = JSON.stringify({ type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.site' });
    const created = await http('POST', '/nacos/v1/ns/service', { serviceName: 'sited', selector });
    expect(created.status).toBe(200);
    const publisher = await connect();
    await publisher.naming('BatchInstanceRequest', 'sited', {
      type: 'batchRegisterInstance',
      instances: [wireHost('11.11.11.11', 80), wireHost('22.22.22.22', 80)],
    });
    const inX11 = await connect({ clientIp: '33.33.33.33' });
    const inX12 = await connect({ clientIp: '44.44.44.44' });
    const a = await inX11.naming('SubscribeServiceRequest', 'sited', { subscribe: true, clusters: '' });
    expect(ipsOf(a.body.serviceInfo as Info)).toEqual(['11.11.11.11']);
    const b = await inX12.naming('ServiceQueryRequest', 'sited', { cluster: '', healthyOnly: false });
    expect(ipsOf(b.body.serviceInfo as Info)).toEqual(['22.22.22.22']);
    await publisher.naming('BatchInstanceRequest', 'sited', {
      type: 'batchRegisterInstance',
      instances: [wireHost('11.11.11.11', 80), wireHost('22.22.22.22', 80), wireHost('33.33.33.33', 80)],
    });
    await waitUntil(() => ipsOf(lastPush(inX11, 'sited')).length === 2, { message: 'selected push' });
    expect(ipsOf(lastPush(inX11, 'sited'))).toEqual(['11.11.11.11', '33.33.33.33']);
  });

  it('answers healthyOnly queries with healthy hosts only', async () => {
    const publisher = await connect();
    await publisher.naming('BatchInstanceRequest', 'health', {
      type: 'batchRegisterInstance',
      instances: [wireHost('10.4.0.1', 80), wireHost('10.4.0.2', 80, { healthy: false })],
    });
    const all = await publisher.naming('ServiceQueryRequest', 'health', { cluster: '', healthyOnly: false });
    const healthy = await publisher.naming('ServiceQueryRequest', 'health', { cluster: '', healthyOnly: true });
    expect(ipsOf(all.body.serviceInfo as Info)).toEqual(['10.4.0.1', '10.4.0.2']);
    expect(ipsOf(healthy.body.serviceInfo as Info)).toEqual(['10.4.0.1']);
  });
});
