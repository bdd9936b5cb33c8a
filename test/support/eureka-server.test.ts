import { Eureka, type EurekaClient } from 'eureka-js-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEurekaServer, type EurekaServer } from './eureka-server.js';
import { waitUntil } from './wait-until.js';

/*
 * The test Eureka server checked with the real npm `eureka-js-client` (4.5.0) as a Node service
 * uses it against a Spring Cloud Eureka server: register (204), heartbeats, registry fetches by
 * app and by VIP address, deltas, deregistration on stop; plus Eureka's own answers where the
 * client does not go (bad bodies, the lease rules, the response cache).
 */

const quiet = { warn: () => undefined, info: () => undefined, debug: () => undefined, error: () => undefined };

function client(server: EurekaServer, instance: Partial<EurekaClient.EurekaInstanceConfig>, extra: Partial<EurekaClient.EurekaConfig> = {}): Eureka {
  return new Eureka({
    logger: quiet,
    instance: {
      app: 'orders-service',
      hostName: '10.40.0.1',
      ipAddr: '10.40.0.1',
      instanceId: '10.40.0.1:orders-service:8080',
      port: { $: 8080, '@enabled': true },
      vipAddress: 'orders-service',
      statusPageUrl: 'http://10.40.0.1:8080/actuator/info',
      dataCenterInfo: { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: 'MyOwn' },
      metadata: { 'management.port': '8080' },
      ...instance,
    },
    eureka: { host: '127.0.0.1', port: server.port, servicePath: '/eureka/apps/', heartbeatInterval: 100, registryFetchInterval: 100, maxRetries: 1, requestRetryDelay: 10 },
    ...extra,
  });
}

const start = (c: Eureka) => new Promise<void>((resolve, reject) => c.start((err) => (err ? reject(err) : resolve())));
const stop = (c: Eureka) => new Promise<void>((resolve) => c.stop(() => resolve()));

describe('the test Eureka server, through eureka-js-client', () => {
  let server: EurekaServer;
  const clients: Eureka[] = [];

  beforeEach(async () => {
    server = await startEurekaServer();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await stop(c);
    await server.close();
  });

  it('registers (app upper-cased), renews, finds by app and by VIP address, and cancels on stop', async () => {
    const provider = client(server, {});
    const consumer = client(server, { app: 'consumer', instanceId: 'consumer-1', hostName: '10.40.0.9', ipAddr: '10.40.0.9', vipAddress: 'consumer' });
    clients.push(consumer);
    await start(provider);
    await start(consumer);
    expect(server.instances('ORDERS-SERVICE').map((i) => [i.app, i.instanceId, i.port.$, i.metadata['management.port']])).toEqual([['ORDERS-SERVICE', '10.40.0.1:orders-service:8080', 8080, '8080']]);
    expect(server.requests.filter((r) => r.method === 'POST').map((r) => [r.path, r.status])).toContainEqual(['/apps/orders-service', 204]);

    await waitUntil(() => server.requests.some((r) => r.method === 'PUT' && r.path === '/apps/orders-service/10.40.0.1:orders-service:8080' && r.status === 200), { message: 'a heartbeat' });
    await waitUntil(() => consumer.getInstancesByVipAddress('orders-service').length === 1, { message: 'the consumer finds the provider by VIP' });
    expect(consumer.getInstancesByAppId('ORDERS-SERVICE').map((i) => i.instanceId)).toEqual(['10.40.0.1:orders-service:8080']);

    await stop(provider);
    expect(server.instances('ORDERS-SERVICE')).toEqual([]);
    await waitUntil(() => consumer.getInstancesByVipAddress('orders-service').length === 0, { message: 'the consumer sees it gone' });
  });

  it('serves deltas the client applies, with a hash code of the whole registry', async () => {
    const consumer = client(server, { app: 'consumer', instanceId: 'consumer-1', hostName: '10.40.0.9', ipAddr: '10.40.0.9', vipAddress: 'consumer' }, { shouldUseDelta: true });
    clients.push(consumer);
    await start(consumer);
    const provider = client(server, {});
    clients.push(provider);
    await start(provider);
    await waitUntil(() => server.requests.some((r) => r.path === '/apps/delta'), { message: 'a delta fetch' });
    await waitUntil(() => consumer.getInstancesByVipAddress('orders-service').length === 1, { message: 'the delta applied' });
    const delta = (await (await fetch(`${server.serviceUrl}apps/delta`, { headers: { accept: 'application/json' } })).json()) as { applications: { apps__hashcode: string; application: Array<{ instance: Array<{ actionType: string }> }> } };
    expect(delta.applications.apps__hashcode).toBe('UP_2_');
    expect(delta.applications.application.flatMap((a) => a.instance.map((i) => i.actionType))).toEqual(['ADDED', 'ADDED']);
  });
});

describe("the test Eureka server's own rules", () => {
  let server: EurekaServer;
  afterEach(async () => server.close());

  const body = (over: Record<string, unknown> = {}) => ({
    instance: {
      instanceId: 'i-1',
      hostName: '10.40.0.2',
      app: 'PAY',
      ipAddr: '10.40.0.2',
      status: 'UP',
      port: { $: 9000, '@enabled': 'true' },
      dataCenterInfo: { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: 'MyOwn' },
      leaseInfo: { durationInSecs: 1, renewalIntervalInSecs: 1 },
      ...over,
    },
  });
  const post = (app: string, payload: unknown) =>
    fetch(`${server.serviceUrl}apps/${app}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });

  it("refuses bodies with Eureka's words, and a bare port number", async () => {
    server = await startEurekaServer();
    const refusals: Array<[Record<string, unknown>, string]> = [
      [{ hostName: undefined, instanceId: undefined }, 'Missing instanceId'],
      [{ ipAddr: undefined }, 'Missing ip address'],
      [{ app: 'OTHER' }, 'Mismatched appName, expecting PAY but was OTHER'],
      [{ dataCenterInfo: undefined }, 'Missing dataCenterInfo'],
      [{ dataCenterInfo: { '@class': 'x' } }, 'Missing dataCenterInfo Name'],
    ];
    for (const [over, message] of refusals) {
      const res = await post('PAY', body(over));
      expect([res.status, await res.text()]).toEqual([400, message]);
    }
    expect((await post('PAY', body({ port: 9000 }))).status).toBe(400);
    expect(server.instances()).toEqual([]);
  });

  it('renews, asks a dirtier client to register again, and evicts after twice the lease duration', async () => {
    server = await startEurekaServer({ evictionIntervalMs: 0 });
    expect((await post('pay', body())).status).toBe(204);
    const renew = (q = '') => fetch(`${server.serviceUrl}apps/PAY/i-1${q}`, { method: 'PUT' });
    expect((await renew()).status).toBe(200);
    expect((await renew(`?status=UP&lastDirtyTimestamp=${Date.now() + 60_000}`)).status).toBe(404);
    const registered = Date.now();
    expect(server.evict(registered + 1_500)).toBe(0);
    expect(server.evict(registered + 2_500)).toBe(1);
    expect((await renew()).status).toBe(404);
  });

  it('shows list reads through the read cache, and single reads live', async () => {
    server = await startEurekaServer({ readCacheMs: 60_000 });
    server.refreshReadCache();
    expect((await post('PAY', body())).status).toBe(204);
    const apps = async () => ((await (await fetch(`${server.serviceUrl}apps/`, { headers: { accept: 'application/json' } })).json()) as { applications: { application: unknown[] } }).applications.application;
    expect(await apps()).toEqual([]);
    expect((await fetch(`${server.serviceUrl}apps/PAY/i-1`)).status).toBe(200);
    server.refreshReadCache();
    expect(await apps()).toHaveLength(1);
  });

  it('asks for basic credentials when configured', async () => {
    server = await startEurekaServer({ basicAuth: { username: 'eureka', password: 's3cret' } });
    expect((await fetch(`${server.serviceUrl}apps/`)).status).toBe(401);
    const ok = await fetch(`${server.serviceUrl}apps/`, { headers: { authorization: `Basic ${Buffer.from('eureka:s3cret').toString('base64')}` } });
    expect(ok.status).toBe(200);
  });
});
