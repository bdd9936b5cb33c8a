import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_INSTANCE_CLUSTER, MARK_ORIGIN, type ClusterSpec, type Instance } from '../../src/model/index.js';
import { startEurekaServer, type EurekaServer } from '../../test/support/eureka-server.js';
import { freePort } from '../../test/support/ports.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createEurekaAdapter, type EurekaAdapter } from './eureka-adapter.js';
import { EurekaConfigError } from './eureka-config-error.js';
import { copyInstanceId, infoOf, instanceOfInfo, reconcileHashOf, serviceNameOf } from './eureka-meta.js';
import { parseEurekaCluster } from './eureka-options.js';
import { EurekaRequestError } from './eureka-request-error.js';

const silent = pino({ level: 'silent' });
const key = (name: string) => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });
const instance = (ip: string, over: Partial<Instance> = {}): Instance => ({
  ip,
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: DEFAULT_INSTANCE_CLUSTER,
  metadata: {},
  ...over,
});
const lease = { renewalIntervalS: 30, leaseDurationS: 90, dataCenterName: 'MyOwn', now: 1_700_000_000_000 };

describe('Eureka mapping', () => {
  it('names an application by the VIP address that names it, else in lower case', () => {
    expect(serviceNameOf('ORDERS-SERVICE', [{ vipAddress: 'orders-service' }])).toBe('orders-service');
    expect(serviceNameOf('ORDERSERVICE', [{ vipAddress: 'other,OrderService' }])).toBe('OrderService');
    expect(serviceNameOf('PAY', [{ vipAddress: 'payments' }])).toBe('pay');
  });

  it('reads UP as healthy, OUT_OF_SERVICE as disabled, anything else as unhealthy; the enabled port, the secure one as metadata', () => {
    const read = (status: string) => instanceOfInfo({ instanceId: 'i', ipAddr: '10.61.0.1', status, port: { $: 80, '@enabled': 'true' } });
    expect(read('UP')).toMatchObject({ instance: { healthy: true, enabled: true } });
    expect(read('OUT_OF_SERVICE')).toMatchObject({ instance: { healthy: true, enabled: false } });
    for (const s of ['DOWN', 'STARTING', 'UNKNOWN']) expect(read(s)).toMatchObject({ instance: { healthy: false, enabled: true } });
    expect(instanceOfInfo({ ipAddr: '10.61.0.1', status: 'UP', port: { $: 80, '@enabled': false }, securePort: { $: 443, '@enabled': 'true' } })).toMatchObject({ instance: { port: 443 } });
    expect(instanceOfInfo({ ipAddr: '10.61.0.1', status: 'UP', port: { $: '80', '@enabled': true }, securePort: { $: 443, '@enabled': true } })).toMatchObject({ instance: { port: 80, metadata: { 'eureka.securePort': '443' } } });
    expect(instanceOfInfo({ ipAddr: '10.61.0.1', port: { $: 80, '@enabled': 'false' } })).toMatch(/no enabled port/);
    expect(instanceOfInfo({ port: { $: 80 } })).toMatch(/no address/);
  });

  it('writes a complete InstanceInfo and reads every field back from it', () => {
    const rich = instance('10.61.0.2', { weight: 2.5, healthy: false, enabled: false, ephemeral: false, cluster: 'SH', metadata: { [MARK_ORIGIN]: 'a', 'spring.boot.version': '3', 'management.port': '9090' } });
    const { instance: info } = infoOf('OrderService', rich, lease);
    expect(info).toMatchObject({
      instanceId: '10.61.0.2:OrderService:8080:SH',
      app: 'ORDERSERVICE',
      vipAddress: 'OrderService',
      secureVipAddress: 'OrderService',
      status: 'DOWN',
      port: { $: 8080, '@enabled': 'true' },
      securePort: { '@enabled': 'false' },
      dataCenterInfo: { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: 'MyOwn' },
      leaseInfo: { renewalIntervalInSecs: 30, durationInSecs: 90 },
      statusPageUrl: 'http://10.61.0.2:9090/actuator/info',
      lastDirtyTimestamp: '1700000000000',
    });
    expect(instanceOfInfo(info as never)).toEqual({ eurekaId: '10.61.0.2:OrderService:8080:SH', instance: rich });
    expect(copyInstanceId('billing', instance('10.61.0.3'))).toBe('10.61.0.3:billing:8080');
  });

  it('hashes statuses as Eureka reconciles them', () => {
    expect(reconcileHashOf(['UP', 'DOWN', 'UP'])).toBe('DOWN_1_UP_2_');
    expect(reconcileHashOf([])).toBe('');
  });

  it('refuses settings it cannot use, naming them', () => {
    const bad = (over: Partial<ClusterSpec>) => () => parseEurekaCluster({ id: 'e', endpoints: ['10.0.0.1:8761'], ...over, options: over.options ?? {} });
    expect(bad({ endpoints: ['http://10.0.0.1:8761/eureka'] })).toThrow(/endpoints: expected host:port/);
    expect(bad({ endpoints: [] })).toThrow(EurekaConfigError);
    expect(bad({ password: 'x' })).toThrow(/password: basic authentication needs a username/);
    expect(bad({ options: { contextPath: 'eureka v2' } })).toThrow(/options.contextPath/);
    expect(bad({ options: { leaseDurationS: 10, renewalIntervalS: 30 } })).toThrow(/options.leaseDurationS: must be longer than renewalIntervalS/);
    expect(bad({ options: { dataCenterName: 'Amazon' } })).toThrow(/options.dataCenterName: expected one of MyOwn, Netflix/);
    expect(parseEurekaCluster({ id: 'e', endpoints: ['10.0.0.1'], options: { contextPath: '/eureka/v2/' } })).toMatchObject({ endpoints: [{ host: '10.0.0.1', port: 8761 }], options: { contextPath: '/eureka/v2' } });
  });
});

describe('EurekaAdapter against the test Eureka server', () => {
  let server: EurekaServer;
  const adapters: EurekaAdapter[] = [];
  const connect = (options: Record<string, unknown> = {}, extra: Partial<ClusterSpec> = {}, endpoints = [server.endpoint]) => {
    const a = createEurekaAdapter({ id: 'eureka-test', kind: 'eureka', endpoints, labels: {}, options: { pollIntervalMs: 100, readCacheMs: 0, requestTimeoutMs: 2_000, ...options }, ...extra }, { logger: silent });
    adapters.push(a);
    return a;
  };

  beforeEach(async () => {
    server = await startEurekaServer();
  });
  afterEach(async () => {
    for (const a of adapters.splice(0)) await a.close();
    await server.close();
  });

  it('renews a copy, and answers unknown once the server lost it', async () => {
    const adapter = connect();
    const copy = instance('10.61.1.1');
    await adapter.apply(key('billing'), { upsert: [copy], remove: [] });
    expect(await adapter.heartbeat(key('billing'), copy)).toBe('ok');
    server.evict(Date.now() + 10 * 90_000);
    expect(await adapter.heartbeat(key('billing'), copy)).toBe('unknown');
  });

  it('fails over to the next peer, and stays with the one that answered', async () => {
    const dead = `127.0.0.1:${await freePort()}`;
    const adapter = connect({}, {}, [dead, server.endpoint]);
    expect(await adapter.listServices({ namespace: '*', group: '*' })).toEqual([]);
    const before = server.requests.length;
    await adapter.listInstances(key('x'));
    expect(server.requests.length).toBe(before + 1);
  });

  it('sends basic credentials, and names a refusal as an auth failure', async () => {
    await server.close();
    server = await startEurekaServer({ basicAuth: { username: 'eureka', password: 's3cret' } });
    expect(await connect({}, { username: 'eureka', password: 's3cret' }).listServices({ namespace: '*', group: '*' })).toEqual([]);
    const wrong = connect({}, { username: 'eureka', password: 'nope' });
    await expect(wrong.listServices({ namespace: '*', group: '*' })).rejects.toMatchObject({ code: 'eureka-auth-failed', status: 401 });
  });

  it('rejects reads of an unreachable cluster, never answering empty', async () => {
    const adapter = connect({}, {}, [`127.0.0.1:${await freePort()}`]);
    await expect(adapter.listInstances(key('x'))).rejects.toBeInstanceOf(EurekaRequestError);
    await expect(adapter.listInstances(key('x'))).rejects.toMatchObject({ code: 'eureka-unreachable' });
  });

  it('follows deltas, and fetches the registry whole when the hash code disagrees', async () => {
    const writer = connect();
    const watcher = connect();
    let calls = 0;
    watcher.watch(key('pay'), () => (calls += 1));
    await waitUntil(() => calls === 1, { message: 'the first read' });
    await writer.apply(key('pay'), { upsert: [instance('10.61.2.1')], remove: [] });
    await waitUntil(() => calls === 2, { message: 'the change seen through a delta' });
    expect(server.requests.some((r) => r.path === '/apps/delta')).toBe(true);

    // A change older than the delta's retention: only the hash can tell.
    await server.close();
    server = await startEurekaServer({ deltaRetentionMs: 0 });
    const late = connect({ fullFetchEvery: 100_000 });
    let seen = 0;
    late.watch(key('pay'), () => (seen += 1));
    await waitUntil(() => seen === 1, { message: 'the first read' });
    const fulls = () => server.requests.filter((r) => r.path === '/apps').length;
    const before = fulls();
    await connect().apply(key('pay'), { upsert: [instance('10.61.2.2')], remove: [] });
    await waitUntil(() => seen === 2, { message: 'the change seen through a full fetch' });
    expect(fulls()).toBeGreaterThan(before);
  });

  it('reads an application answered as a single object, as older servers write one', async () => {
    await connect().apply(key('solo'), { upsert: [instance('10.61.3.1')], remove: [] });
    const raw = (await (await fetch(`${server.serviceUrl}apps/SOLO`, { headers: { accept: 'application/json' } })).json()) as { application: { instance: unknown[] } };
    const { instanceOfInfo: read } = await import('./eureka-meta.js');
    expect(read(raw.application.instance[0] as never)).toMatchObject({ instance: { ip: '10.61.3.1' } });
    const { instancesOfApp } = await import('./eureka-meta.js');
    expect(instancesOfApp({ instance: raw.application.instance[0] as never })).toHaveLength(1);
  });
});
