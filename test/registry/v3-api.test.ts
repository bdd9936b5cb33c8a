import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { formOf } from '../support/http.js';
import { waitUntil } from '../support/wait-until.js';

interface V3Answer<T = unknown> {
  status: number;
  body: { code: number; message: string; data: T };
}

/** The Nacos 3.x admin and client naming API over real HTTP. */
describe('v3 naming API', () => {
  let registry: RunningRegistry;

  const call = async <T = unknown>(method: string, path: string, params: Record<string, string | number | boolean> = {}, headers: Record<string, string> = {}): Promise<V3Answer<T>> => {
    const form = formOf(params);
    const url = method === 'GET' ? `${registry.url}${path}?${form}` : `${registry.url}${path}`;
    const res = await fetch(url, {
      method,
      headers: { ...(method === 'GET' ? {} : { 'content-type': 'application/x-www-form-urlencoded' }), ...headers },
      ...(method === 'GET' ? {} : { body: form.toString() }),
    });
    return { status: res.status, body: (await res.json()) as V3Answer<T>['body'] };
  };
  const list = async (serviceName: string, extra: Record<string, string> = {}) =>
    (await call<Array<Record<string, unknown>>>('GET', '/nacos/v3/admin/ns/instance/list', { serviceName, ...extra })).body.data;

  beforeAll(async () => {
    registry = await startRegistry({ port: 0, expiry: { unhealthyAfterMs: 1_000, expireAfterMs: 2_000, sweepIntervalMs: 100 } });
  });
  afterAll(async () => {
    await registry.close();
  });

  it('registers through the admin API and lists with every field', async () => {
    const res = await call('POST', '/nacos/v3/admin/ns/instance', {
      serviceName: 'v3-orders',
      groupName: 'G1',
      ip: '10.9.0.1',
      port: 8080,
      weight: 3,
      clusterName: 'BJ',
      ephemeral: false,
      metadata: JSON.stringify({ zone: 'a', n: 1 }),
    });
    expect(res).toEqual({ status: 200, body: { code: 0, message: 'success', data: 'ok' } });

    const hosts = await list('v3-orders', { groupName: 'G1' });
    expect(hosts).toEqual([
      expect.objectContaining({
        ip: '10.9.0.1',
        port: 8080,
        weight: 3,
        healthy: true,
        enabled: true,
        ephemeral: false,
        clusterName: 'BJ',
        serviceName: 'G1@@v3-orders',
        metadata: { zone: 'a', n: '1' },
      }),
    ]);
    expect(await list('v3-orders')).toEqual([]);
  });

  it('updates and deregisters through the admin API', async () => {
    const base = { serviceName: 'v3-upd', ip: '10.9.1.1', port: 1, ephemeral: false };
    await call('POST', '/nacos/v3/admin/ns/instance', base);
    const upd = await call('PUT', '/nacos/v3/admin/ns/instance', { ...base, enabled: false, metadata: '{"v":"2"}' });
    expect(upd.body.code).toBe(0);
    expect(await list('v3-upd')).toEqual([expect.objectContaining({ enabled: false, metadata: { v: '2' } })]);
    // Disabled instances stay visible to admins but not to clients, as in Nacos.
    const client = await call<unknown[]>('GET', '/nacos/v3/client/ns/instance/list', { serviceName: 'v3-upd' });
    expect(client.body.data).toEqual([]);

    const missing = await call('PUT', '/nacos/v3/admin/ns/instance', { ...base, port: 2 });
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe(21003);

    await call('DELETE', '/nacos/v3/admin/ns/instance', base);
    expect(await list('v3-upd')).toEqual([]);
  });

  it('renews with heartBeat=true, answers 21003 for an unknown instance, and expires silent ones', async () => {
    const inst = { serviceName: 'v3-beat', ip: '10.9.2.1', port: 7 };
    const reg = await call('POST', '/nacos/v3/client/ns/instance', inst);
    expect(reg.body).toEqual({ code: 0, message: 'success', data: 'ok' });
    const renew = await call('POST', '/nacos/v3/client/ns/instance', { ...inst, heartBeat: true });
    expect(renew.body.code).toBe(0);
    expect(registry.store.getService('public', 'DEFAULT_GROUP', 'v3-beat')?.instances.get('10.9.2.1#7#DEFAULT')?.beats).toBe(1);

    const unknown = await call('POST', '/nacos/v3/client/ns/instance', { ...inst, port: 8, heartBeat: true });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe(21003);
    expect(await list('v3-beat')).toHaveLength(1);

    await waitUntil(async () => (await list('v3-beat'))[0]?.healthy === false, { message: 'unhealthy without renewals' });
    const revive = await call('POST', '/nacos/v3/client/ns/instance', { ...inst, heartBeat: true });
    expect(revive.body.code).toBe(0);
    expect((await list('v3-beat'))[0]?.healthy).toBe(true);
    await waitUntil(async () => (await list('v3-beat')).length === 0, { message: 'removed without renewals' });
    const late = await call('POST', '/nacos/v3/client/ns/instance', { ...inst, heartBeat: true });
    expect(late.body.code).toBe(21003);
  });

  it('lists services with paging and filters', async () => {
    for (const name of ['svc-a', 'svc-b', 'svc-c']) {
      await call('POST', '/nacos/v3/admin/ns/instance', { serviceName: name, groupName: 'PAGED', ip: '10.9.3.1', port: 1, ephemeral: false });
    }
    const page1 = await call<{ totalCount: number; pageNumber: number; pagesAvailable: number; pageItems: Array<Record<string, unknown>> }>(
      'GET',
      '/nacos/v3/admin/ns/service/list',
      { groupNameParam: 'PAGED', pageNo: 1, pageSize: 2 },
    );
    expect(page1.body.data).toMatchObject({ totalCount: 3, pageNumber: 1, pagesAvailable: 2 });
    expect(page1.body.data.pageItems.map((i) => i.name)).toEqual(['svc-a', 'svc-b']);
    expect(page1.body.data.pageItems[0]).toMatchObject({ groupName: 'PAGED', ipCount: 1, healthyInstanceCount: 1, clusterCount: 1 });
    const page2 = await call<{ pageItems: Array<{ name: string }> }>('GET', '/nacos/v3/admin/ns/service/list', {
      groupNameParam: 'PAGED',
      pageNo: 2,
      pageSize: 2,
    });
    expect(page2.body.data.pageItems.map((i) => i.name)).toEqual(['svc-c']);
    const byName = await call<{ totalCount: number }>('GET', '/nacos/v3/admin/ns/service/list', { serviceNameParam: 'svc-b' });
    expect(byName.body.data.totalCount).toBe(1);
  });

  it('keeps namespaces apart and lists them', async () => {
    await call('POST', '/nacos/v3/admin/core/namespace', { namespaceId: 'prod', namespaceName: 'Production' });
    await call('POST', '/nacos/v3/admin/ns/instance', { namespaceId: 'prod', serviceName: 'v3-ns', ip: '10.9.4.1', port: 1, ephemeral: false });
    expect(await list('v3-ns', { namespaceId: 'prod' })).toHaveLength(1);
    expect(await list('v3-ns')).toEqual([]);
    const namespaces = await call<Array<{ namespace: string; namespaceShowName: string }>>('GET', '/nacos/v3/admin/core/namespace/list');
    expect(namespaces.body.data.map((n) => [n.namespace, n.namespaceShowName])).toEqual([
      ['public', 'public'],
      ['prod', 'Production'],
    ]);
    // Without groupNameParam the service list covers every group of the namespace (what a `*` group lists).
    await call('POST', '/nacos/v3/admin/ns/instance', { namespaceId: 'prod', groupName: 'OTHER', serviceName: 'v3-ns-other', ip: '10.9.4.2', port: 1, ephemeral: false });
    const everyGroup = await call<{ totalCount: number; pageItems: Array<{ name: string; groupName: string }> }>('GET', '/nacos/v3/admin/ns/service/list', {
      namespaceId: 'prod',
      pageNo: 1,
      pageSize: 10,
    });
    expect(everyGroup.body.data.totalCount).toBe(2);
    expect(everyGroup.body.data.pageItems.map((i) => `${i.groupName}@@${i.name}`)).toEqual(['DEFAULT_GROUP@@v3-ns', 'OTHER@@v3-ns-other']);
  });

  it('answers a missing or invalid parameter with 400 and a Nacos error code, changing nothing', async () => {
    const missing = await call('POST', '/nacos/v3/admin/ns/instance', { ip: '10.9.5.1', port: 1 });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ code: 10000, message: expect.stringContaining("'serviceName'") });
    const badWeight = await call('POST', '/nacos/v3/admin/ns/instance', { serviceName: 'v3-bad', ip: '10.9.5.1', port: 1, weight: 20000 });
    expect(badWeight.status).toBe(400);
    expect(badWeight.body.code).toBe(20002);
    expect(registry.store.getService('public', 'DEFAULT_GROUP', 'v3-bad')).toBeUndefined();
  });
});

describe('v3 login', () => {
  let registry: RunningRegistry;
  beforeAll(async () => {
    registry = await startRegistry({ port: 0, users: new Map([['admin', 'pw']]) });
  });
  afterAll(async () => {
    await registry.close();
  });

  it('issues a token that authorizes as a Bearer header or accessToken parameter', async () => {
    const url = `${registry.url}/nacos/v3/admin/ns/instance/list?serviceName=x`;
    expect((await fetch(url)).status).toBe(403);

    const bad = await fetch(`${registry.url}/nacos/v3/auth/user/login`, { method: 'POST', body: new URLSearchParams({ username: 'admin', password: 'no' }) });
    expect(bad.status).toBe(403);
    const res = await fetch(`${registry.url}/nacos/v3/auth/user/login`, { method: 'POST', body: new URLSearchParams({ username: 'admin', password: 'pw' }) });
    const login = (await res.json()) as { accessToken: string; tokenTtl: number; username: string };
    expect(login).toMatchObject({ tokenTtl: 18000, username: 'admin', globalAdmin: true });

    expect((await fetch(url, { headers: { authorization: `Bearer ${login.accessToken}` } })).status).toBe(200);
    expect((await fetch(`${url}&accessToken=${encodeURIComponent(login.accessToken)}`)).status).toBe(200);
    expect((await fetch(url, { headers: { accessToken: login.accessToken } })).status).toBe(200);
    expect((await fetch(url, { headers: { authorization: 'Bearer forged' } })).status).toBe(403);
  });
});
