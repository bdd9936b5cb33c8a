import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../registry-server.js';
import { TestGrpcClient, wireHost } from '../../../test/support/grpc-client.js';
import { formOf } from '../../../test/support/http.js';
import { waitUntil } from '../../../test/support/wait-until.js';

interface Host {
  ip: string;
  port: number;
  instanceId: string;
  metadata: Record<string, string>;
  ephemeral: boolean;
}

/** Naming requests over gRPC against the embedded registry, read back over gRPC and HTTP. */
describe('embedded registry gRPC: naming', () => {
  let registry: RunningRegistry;
  let clients: TestGrpcClient[] = [];
  let service = '';
  let counter = 0;
  const connect = async (options: Parameters<typeof TestGrpcClient.connect>[1] = {}) => {
    const c = await TestGrpcClient.connect(registry.grpcEndpoint as string, options);
    clients.push(c);
    return c;
  };
  const register = (c: TestGrpcClient, host: Record<string, unknown>) =>
    c.naming('InstanceRequest', service, { type: 'registerInstance', instance: host });
  const batch = (c: TestGrpcClient, hosts: Array<Record<string, unknown>>, name = service) =>
    c.naming('BatchInstanceRequest', name, { type: 'batchRegisterInstance', instances: hosts });
  const query = async (c: TestGrpcClient, fields: Record<string, unknown> = {}) => {
    const answer = await c.naming('ServiceQueryRequest', service, { cluster: '', healthyOnly: false, udpPort: 0, ...fields });
    expect(answer.type).toBe('QueryServiceResponse');
    return ((answer.body.serviceInfo as { hosts: Host[] }).hosts ?? []).map((h) => `${h.ip}:${h.port}`).sort();
  };
  const httpList = async (name = service) => {
    const res = await fetch(`${registry.url}/nacos/v1/ns/instance/list?${formOf({ serviceName: name })}`);
    return ((await res.json()) as { hosts: Host[] }).hosts.map((h) => `${h.ip}:${h.port}`).sort();
  };
  /** The v2 list and the v3 admin list, as `ip:port/instanceId`. */
  const httpV2V3 = async () => {
    const v2 = await fetch(`${registry.url}/nacos/v2/ns/instance/list?${formOf({ serviceName: service })}`);
    const v3 = await fetch(`${registry.url}/nacos/v3/admin/ns/instance/list?${formOf({ serviceName: service })}`);
    const show = (hosts: Host[]) => hosts.map((h) => `${h.ip}:${h.port}/${h.instanceId}`).sort();
    return {
      v2: show(((await v2.json()) as { data: { hosts: Host[] } }).data.hosts),
      v3: show(((await v3.json()) as { data: Host[] }).data),
    };
  };

  beforeAll(async () => {
    registry = await startRegistry({ port: 0 });
  });
  afterEach(() => {
    for (const c of clients) c.close();
    clients = [];
  });
  afterAll(async () => {
    await registry.close();
  });
  const nextService = () => {
    counter += 1;
    service = `svc-${counter}`;
  };

  it('register replaces the connection set with one instance, batch replaces it whole, deregister removes the entry', async () => {
    nextService();
    const a = await connect();
    const b = await connect();
    expect((await register(a, wireHost('10.0.0.1', 80))).body).toMatchObject({ resultCode: 200, type: 'registerInstance' });
    expect(await query(a)).toEqual(['10.0.0.1:80']);
    await register(a, wireHost('10.0.0.2', 80));
    expect(await query(a)).toEqual(['10.0.0.2:80']);
    const answer = await batch(a, [wireHost('10.0.0.3', 80), wireHost('10.0.0.4', 80)]);
    expect(answer).toMatchObject({ type: 'BatchInstanceResponse', body: { resultCode: 200, type: 'batchRegisterInstance' } });
    await register(b, wireHost('10.0.0.9', 80));
    expect(await query(a)).toEqual(['10.0.0.3:80', '10.0.0.4:80', '10.0.0.9:80']);
    expect(await httpList()).toEqual(['10.0.0.3:80', '10.0.0.4:80', '10.0.0.9:80']);
    // An empty batch clears only a's set; deregister of b ignores the instance sent and drops b's entry.
    await batch(a, []);
    expect(await query(b)).toEqual(['10.0.0.9:80']);
    await batch(a, [wireHost('10.0.0.3', 80)]);
    const dereg = await b.naming('InstanceRequest', service, { type: 'deregisterInstance', instance: wireHost('10.9.9.9', 1) });
    expect(dereg).toMatchObject({ type: 'InstanceResponse', body: { resultCode: 200, type: 'deregisterInstance' } });
    expect(await httpList()).toEqual(['10.0.0.3:80']);
    expect(registry.grpc?.stats().publishSets).toBeGreaterThanOrEqual(1);
  });

  it('shows byte-identical instances of two connections once, until the last publisher goes', async () => {
    nextService();
    const a = await connect();
    const b = await connect();
    const host = wireHost('10.0.1.1', 8080, { instanceId: `10.0.1.1#8080#DEFAULT#DEFAULT_GROUP@@${service}`, metadata: { zone: 'a', app: 'x' } });
    await batch(a, [host]);
    await batch(b, [{ ...host, metadata: { app: 'x', zone: 'a' } }]);
    expect(await query(a)).toEqual(['10.0.1.1:8080']);
    expect(await httpList()).toEqual(['10.0.1.1:8080']);
    const shown = `10.0.1.1:8080/10.0.1.1#8080#DEFAULT#DEFAULT_GROUP@@${service}`;
    expect(await httpV2V3()).toEqual({ v2: [shown], v3: [shown] });
    a.close();
    await waitUntil(() => registry.grpc?.connections().every((c) => c.id !== a.connectionId), { message: 'a unregistered' });
    expect(await httpList()).toEqual(['10.0.1.1:8080']);
    b.close();
    await waitUntil(async () => (await httpList()).length === 0, { message: 'last publisher gone' });
  });

  it('shows instances that differ in any field side by side, even on the same ip:port', async () => {
    nextService();
    const a = await connect();
    const b = await connect();
    await batch(a, [wireHost('10.0.2.1', 80, { metadata: { v: '1' } })]);
    await batch(b, [wireHost('10.0.2.1', 80, { metadata: { v: '2' } })]);
    expect(await query(a)).toEqual(['10.0.2.1:80', '10.0.2.1:80']);
    expect(await httpList()).toEqual(['10.0.2.1:80', '10.0.2.1:80']);
  });

  it('normalises what it stores: DEFAULT cluster, generated instanceId, grouped serviceName, ephemeral', async () => {
    nextService();
    const a = await connect();
    await register(a, { ip: '10.0.3.1', port: 81, clusterName: '', metadata: {} });
    const answer = await a.naming('ServiceQueryRequest', service, { cluster: '', healthyOnly: false });
    const info = answer.body.serviceInfo as Record<string, unknown>;
    expect(info).toMatchObject({ name: service, groupName: 'DEFAULT_GROUP', allIPs: false, allIps: false, cacheMillis: 10000 });
    expect(info.hosts).toEqual([
      expect.objectContaining({
        instanceId: `10.0.3.1#81##DEFAULT_GROUP@@${service}`,
        clusterName: 'DEFAULT',
        serviceName: `DEFAULT_GROUP@@${service}`,
        weight: 1,
        healthy: true,
        enabled: true,
        ephemeral: true,
      }),
    ]);
  });

  it('keeps a persistent instance after its connection closes, keyed like an HTTP registration', async () => {
    nextService();
    const a = await connect();
    const answer = await a.naming('PersistentInstanceRequest', service, { type: 'registerInstance', instance: wireHost('10.0.4.1', 80, { ephemeral: false }) });
    expect(answer).toMatchObject({ type: 'InstanceResponse', body: { resultCode: 200 } });
    const mismatch = await register(a, wireHost('10.0.4.2', 80));
    expect(mismatch).toMatchObject({ type: 'InstanceResponse', body: { resultCode: 500, errorCode: 400 } });
    a.close();
    await waitUntil(() => registry.grpc?.connections().every((c) => c.id !== a.connectionId), { message: 'a unregistered' });
    expect(await httpList()).toEqual(['10.0.4.1:80']);
    expect(registry.store.getService('public', 'DEFAULT_GROUP', service)?.instances.get('10.0.4.1#80#DEFAULT')?.ephemeral).toBe(false);
    const b = await connect();
    await b.naming('PersistentInstanceRequest', service, { type: 'deregisterInstance', instance: wireHost('10.0.4.1', 80, { ephemeral: false }) });
    expect(await httpList()).toEqual([]);
  });

  it('checks parameters as Nacos does: blank group 500, bad cluster, port, metadata size and op 400', async () => {
    nextService();
    const a = await connect();
    const blank = await a.naming('InstanceRequest', service, { type: 'registerInstance', instance: wireHost('10.0.5.1', 80) }, { groupName: '' });
    expect(blank).toMatchObject({ type: 'InstanceResponse', body: { resultCode: 500, errorCode: 500 } });
    const cases = [
      wireHost('10.0.5.1', 80, { clusterName: 'a_b' }),
      wireHost('10.0.5.1', 70000),
      wireHost('', 80),
      wireHost('10.0.5.1', 80, { metadata: { k: 'v'.repeat(1024) } }),
    ];
    for (const instance of cases) {
      const answer = await a.naming('InstanceRequest', service, { type: 'registerInstance', instance });
      expect(answer.body, JSON.stringify(instance).slice(0, 80)).toMatchObject({ resultCode: 500, errorCode: 400 });
    }
    // The batch allows '_' in cluster names, as Nacos' parameter check does.
    expect((await batch(a, [wireHost('10.0.5.1', 80, { clusterName: 'a_b' })])).body.resultCode).toBe(200);
    expect((await a.naming('BatchInstanceRequest', service, { type: 'registerInstance', instances: [] })).body.errorCode).toBe(400);
    expect((await a.naming('InstanceRequest', service, { type: 'nope', instance: wireHost('10.0.5.1', 80) })).body.errorCode).toBe(400);
  });

  it('takes the namespace literally: "" is not public', async () => {
    nextService();
    const a = await connect();
    await a.naming('InstanceRequest', service, { type: 'registerInstance', instance: wireHost('10.0.6.1', 80) }, { namespace: '' });
    expect(await httpList()).toEqual([]);
    const inBlank = await a.naming('ServiceQueryRequest', service, { cluster: '' }, { namespace: '' });
    expect((inBlank.body.serviceInfo as { hosts: Host[] }).hosts).toHaveLength(1);
    expect(await query(a)).toEqual([]);
  });

  it('lists services of a group exactly, in pages, services with only published instances included', async () => {
    const a = await connect();
    const group = `LIST_${Date.now()}`;
    for (const name of ['s1', 's2', 's3']) {
      await a.naming('BatchInstanceRequest', name, { type: 'batchRegisterInstance', instances: [wireHost('10.0.7.1', 80)] }, { groupName: group });
    }
    const page = async (pageNo: number, groupName = group) =>
      (await a.call('ServiceListRequest', { headers: {}, namespace: 'public', serviceName: '', groupName, pageNo, pageSize: 2, module: 'naming' })).body;
    expect(await page(1)).toMatchObject({ resultCode: 200, count: 3, serviceNames: ['s1', 's2'] });
    expect(await page(2)).toMatchObject({ count: 3, serviceNames: ['s3'] });
    expect(await page(1, group.toLowerCase())).toMatchObject({ count: 0, serviceNames: [] });
    const http = await fetch(`${registry.url}/nacos/v1/ns/service/list?${formOf({ pageNo: 1, pageSize: 10, groupName: group })}`);
    expect(((await http.json()) as { doms: string[] }).doms).toEqual(['s1', 's2', 's3']);
  });
});

describe('embedded registry gRPC: auth', () => {
  let registry: RunningRegistry;
  beforeAll(async () => {
    registry = await startRegistry({ port: 0, users: new Map([['nacos', 'secret']]) });
  });
  afterAll(async () => {
    await registry.close();
  });

  it('refuses naming requests without credentials with 403 and accepts a token from the HTTP login', async () => {
    const bare = await TestGrpcClient.connect(registry.grpcEndpoint as string);
    try {
      const health = await bare.call('HealthCheckRequest', { headers: {}, module: 'internal' });
      expect(health.body.resultCode).toBe(200);
      const refused = await bare.naming('InstanceRequest', 'secured', { type: 'registerInstance', instance: wireHost('10.0.8.1', 80) });
      expect(refused).toMatchObject({ type: 'InstanceResponse', body: { resultCode: 500, errorCode: 403 } });
      const wrong = await bare.call('ServiceQueryRequest', { headers: {}, namespace: 'public', serviceName: 'secured', groupName: 'DEFAULT_GROUP' }, { accessToken: 'nope' });
      expect(wrong).toMatchObject({ type: 'QueryServiceResponse', body: { errorCode: 403 } });
    } finally {
      bare.close();
    }
    const login = await fetch(`${registry.url}/nacos/v1/auth/login`, { method: 'POST', body: new URLSearchParams({ username: 'nacos', password: 'secret' }) });
    const { accessToken } = (await login.json()) as { accessToken: string };
    const authed = await TestGrpcClient.connect(registry.grpcEndpoint as string, { headers: { accessToken } });
    try {
      const ok = await authed.naming('InstanceRequest', 'secured', { type: 'registerInstance', instance: wireHost('10.0.8.1', 80) });
      expect(ok.body).toMatchObject({ resultCode: 200 });
      const bearer = await authed.call('ServiceQueryRequest', { headers: {}, namespace: 'public', serviceName: 'secured', groupName: 'DEFAULT_GROUP' }, { Authorization: `Bearer ${accessToken}` });
      expect(bearer.body.resultCode).toBe(200);
      const password = await authed.call('ServiceQueryRequest', { headers: {}, namespace: 'public', serviceName: 'secured', groupName: 'DEFAULT_GROUP' }, { username: 'nacos', password: 'secret' });
      expect((password.body.serviceInfo as { hosts: unknown[] }).hosts).toHaveLength(1);
    } finally {
      authed.close();
    }
  });
});
