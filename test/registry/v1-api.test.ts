import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { formOf } from '../support/http.js';

/** The Nacos v1 open API over real HTTP: shapes, defaults and errors as a Nacos 2.x server answers. */
describe('v1 naming API', () => {
  let registry: RunningRegistry;

  const send = async (method: string, path: string, params: Record<string, string | number | boolean> = {}) => {
    const query = formOf(params);
    const res = await fetch(`${registry.url}${path}?${query}`, { method });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) as Record<string, unknown> };
  };
  const list = async (serviceName: string, extra: Record<string, string | number | boolean> = {}) =>
    (await send('GET', '/nacos/v1/ns/instance/list', { serviceName, ...extra })).json() as unknown as {
      name: string;
      hosts: Array<Record<string, unknown>>;
      checksum: string;
      lastRefTime: number;
      cacheMillis: number;
      clusters: string;
    };

  beforeAll(async () => {
    registry = await startRegistry({ port: 0, bodyLimitBytes: 4096 });
  });
  afterAll(async () => {
    await registry.close();
  });

  it('registers with Nacos defaults and answers ok', async () => {
    const res = await send('POST', '/nacos/v1/ns/instance', { serviceName: 'v1-defaults', ip: '10.8.0.1', port: 80 });
    expect(res).toMatchObject({ status: 200, text: 'ok' });
    const info = await list('v1-defaults');
    expect(info).toMatchObject({ name: 'DEFAULT_GROUP@@v1-defaults', groupName: 'DEFAULT_GROUP', clusters: '', cacheMillis: 10000 });
    expect(info.hosts).toEqual([
      {
        instanceId: '10.8.0.1#80#DEFAULT#DEFAULT_GROUP@@v1-defaults',
        ip: '10.8.0.1',
        port: 80,
        weight: 1,
        healthy: true,
        enabled: true,
        ephemeral: true,
        clusterName: 'DEFAULT',
        serviceName: 'DEFAULT_GROUP@@v1-defaults',
        metadata: {},
        instanceHeartBeatInterval: 5000,
        instanceHeartBeatTimeOut: 15000,
        ipDeleteTimeout: 30000,
        instanceIdGenerator: 'simple',
      },
    ]);
  });

  it('accepts group@@name and the legacy enable parameter', async () => {
    await send('POST', '/nacos/v1/ns/instance', { serviceName: 'GRP@@v1-grouped', ip: '10.8.1.1', port: 1, enable: false, ephemeral: false });
    const svc = registry.store.getService('public', 'GRP', 'v1-grouped');
    expect(svc?.instances.get('10.8.1.1#1#DEFAULT')?.enabled).toBe(false);
    // Disabled instances are left out of client lists.
    expect((await list('v1-grouped', { groupName: 'GRP' })).hosts).toEqual([]);
  });

  it('filters by clusters and healthyOnly, and changes checksum and lastRefTime only on change', async () => {
    const reg = (ip: string, clusterName: string, healthy = true) =>
      send('POST', '/nacos/v1/ns/instance', { serviceName: 'v1-filter', ip, port: 1, clusterName, healthy, ephemeral: false });
    await reg('10.8.2.1', 'SH');
    await reg('10.8.2.2', 'BJ');
    await reg('10.8.2.3', 'BJ', false);
    expect((await list('v1-filter', { clusters: 'BJ' })).hosts.map((h) => h.ip)).toEqual(['10.8.2.2', '10.8.2.3']);
    expect((await list('v1-filter', { clusters: 'BJ', healthyOnly: true })).hosts.map((h) => h.ip)).toEqual(['10.8.2.2']);
    expect((await list('v1-filter', { clusters: 'SH,BJ' })).hosts).toHaveLength(3);

    const before = await list('v1-filter');
    await reg('10.8.2.1', 'SH'); // same state again: not a change
    const same = await list('v1-filter');
    expect([same.checksum, same.lastRefTime]).toEqual([before.checksum, before.lastRefTime]);
    await send('PUT', '/nacos/v1/ns/instance', { serviceName: 'v1-filter', ip: '10.8.2.1', port: 1, clusterName: 'SH', weight: 5, ephemeral: false });
    const after = await list('v1-filter');
    expect(after.checksum).not.toBe(before.checksum);
    expect(after.lastRefTime).toBeGreaterThan(before.lastRefTime);
    expect(after.hosts.find((h) => h.ip === '10.8.2.1')?.weight).toBe(5);
  });

  it('answers missing and invalid parameters with 400 naming the parameter, changing nothing', async () => {
    const cases: Array<[Record<string, string | number>, string]> = [
      [{ ip: '10.8.3.1', port: 1 }, "caused: Param 'serviceName' is required.;"],
      [{ serviceName: 'v1-bad', port: 1 }, "caused: Param 'ip' is required.;"],
      [{ serviceName: 'v1-bad', ip: '10.8.3.1' }, "caused: Param 'port' is required.;"],
      [{ serviceName: 'v1-bad', ip: '10.8.3.1', port: 70000 }, "Param 'port'"],
      [{ serviceName: 'v1-bad', ip: '10.8.3.1', port: 1, weight: -1 }, 'The weights range from 0.0 to 10000.0'],
      [{ serviceName: 'v1-bad', ip: '10.8.3.1', port: 1, metadata: '{oops' }, 'metadata format incorrect'],
      [{ serviceName: 'v1-bad', ip: '10.8.3.1', port: 1, metadata: '[1]' }, 'metadata format incorrect'],
      [{ serviceName: 'v1-bad', ip: '10.8.3.1', port: 1, clusterName: 'a_b' }, 'cluster name can only have these characters'],
      [{ serviceName: 'v1-bad', ip: '10.8.3.1', port: 1, healthy: 'maybe' }, "Param 'healthy'"],
      [{ serviceName: 'a@@b@@c', ip: '10.8.3.1', port: 1 }, "Param 'serviceName' is illegal"],
    ];
    for (const [params, message] of cases) {
      const res = await send('POST', '/nacos/v1/ns/instance', params);
      expect(res.status, JSON.stringify(params)).toBe(400);
      expect(res.text).toContain(message);
    }
    expect(registry.store.getService('public', 'DEFAULT_GROUP', 'v1-bad')).toBeUndefined();
  });

  it('refuses a persistent instance in an ephemeral service', async () => {
    await send('POST', '/nacos/v1/ns/instance', { serviceName: 'v1-kind', ip: '10.8.4.1', port: 1 });
    const res = await send('POST', '/nacos/v1/ns/instance', { serviceName: 'v1-kind', ip: '10.8.4.2', port: 1, ephemeral: false });
    expect(res.status).toBe(400);
    expect(res.text).toContain("is ephemeral service, can't register persistent instance");
    expect((await list('v1-kind')).hosts.map((h) => h.ip)).toEqual(['10.8.4.1']);
  });

  it('caps request bodies', async () => {
    const res = await fetch(`${registry.url}/nacos/v1/ns/instance`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ serviceName: 'v1-big', ip: '10.8.5.1', port: '1', metadata: JSON.stringify({ pad: 'x'.repeat(10_000) }) }).toString(),
    });
    expect(res.status).toBe(413);
    expect(registry.store.getService('public', 'DEFAULT_GROUP', 'v1-big')).toBeUndefined();
  });

  it('accepts form bodies as well as query parameters', async () => {
    const res = await fetch(`${registry.url}/nacos/v1/ns/instance`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ serviceName: 'v1-form', ip: '10.8.6.1', port: '9', metadata: '{"a":"b"}' }).toString(),
    });
    expect(await res.text()).toBe('ok');
    expect((await list('v1-form')).hosts[0]).toMatchObject({ ip: '10.8.6.1', port: 9, metadata: { a: 'b' } });
  });

  it('answers beats: 10200 known, 20404 unknown light beat, re-creation from a full beat', async () => {
    await send('POST', '/nacos/v1/ns/instance', { serviceName: 'v1-beat', ip: '10.8.7.1', port: 1 });
    const known = await send('PUT', '/nacos/v1/ns/instance/beat', { serviceName: 'v1-beat', ip: '10.8.7.1', port: 1 });
    expect(known.json()).toEqual({ clientBeatInterval: 5000, code: 10200, lightBeatEnabled: true });

    const unknown = await send('PUT', '/nacos/v1/ns/instance/beat', { serviceName: 'v1-beat', ip: '10.8.7.2', port: 1 });
    expect(unknown.status).toBe(200);
    expect(unknown.json().code).toBe(20404);
    expect((await list('v1-beat')).hosts).toHaveLength(1);

    const beat = { serviceName: 'DEFAULT_GROUP@@v1-beat', ip: '10.8.7.2', port: 1, cluster: 'C1', weight: 2, metadata: { m: 'x' }, scheduled: false };
    const full = await send('PUT', '/nacos/v1/ns/instance/beat', { serviceName: 'DEFAULT_GROUP@@v1-beat', beat: JSON.stringify(beat) });
    expect(full.json().code).toBe(10200);
    expect((await list('v1-beat', { clusters: 'C1' })).hosts).toEqual([
      expect.objectContaining({ ip: '10.8.7.2', port: 1, weight: 2, clusterName: 'C1', metadata: { m: 'x' }, ephemeral: true }),
    ]);
  });

  it('deregisters and lists services page by page', async () => {
    for (const n of ['p1', 'p2', 'p3']) await send('POST', '/nacos/v1/ns/instance', { serviceName: n, groupName: 'PAGES', ip: '10.8.8.1', port: 1 });
    const page = await send('GET', '/nacos/v1/ns/service/list', { pageNo: 1, pageSize: 2, groupName: 'PAGES' });
    expect(page.json()).toEqual({ count: 3, doms: ['p1', 'p2'] });
    expect((await send('GET', '/nacos/v1/ns/service/list', { pageNo: 2, pageSize: 2, groupName: 'PAGES' })).json()).toEqual({ count: 3, doms: ['p3'] });
    expect((await send('GET', '/nacos/v1/ns/service/list', { pageSize: 2 })).status).toBe(400);

    expect((await send('DELETE', '/nacos/v1/ns/instance', { serviceName: 'p1', groupName: 'PAGES', ip: '10.8.8.1', port: 1 })).text).toBe('ok');
    expect(registry.store.getService('public', 'PAGES', 'p1')?.instances.size).toBe(0);
  });

  it('lists namespaces in the v1 console shape and reports metrics', async () => {
    await send('POST', '/nacos/v1/ns/instance', { namespaceId: 'team-a', serviceName: 'v1-ns', ip: '10.8.9.1', port: 1 });
    const ns = (await send('GET', '/nacos/v1/console/namespaces')).json() as { code: number; data: Array<{ namespace: string; namespaceShowName: string; type: number }> };
    expect(ns.code).toBe(200);
    expect(ns.data.map((n) => [n.namespace, n.namespaceShowName, n.type])).toEqual([
      ['', 'public', 0],
      ['team-a', 'team-a', 2],
    ]);
    // `public` and the empty id are the same namespace.
    await send('POST', '/nacos/v1/ns/instance', { namespaceId: '', serviceName: 'v1-pub', ip: '10.8.9.2', port: 1 });
    expect((await list('v1-pub', { namespaceId: 'public' })).hosts).toHaveLength(1);

    const metrics = (await send('GET', '/nacos/v1/ns/operator/metrics')).json();
    expect(metrics.status).toBe('UP');
    expect(metrics.serviceCount).toBe(registry.store.listNamespaces().reduce((n, s) => n + s.serviceCount, 0));
  });
});

/** The catalog list (`GET /nacos/v1/ns/catalog/services`): what Nacos 2.x answers, every group at once. */
describe('v1 catalog service list', () => {
  let registry: RunningRegistry;
  const NS = 'catalog';

  const catalog = async (params: Record<string, string | number | boolean>) => {
    const res = await fetch(`${registry.url}/nacos/v1/ns/catalog/services?${formOf(params).toString()}`);
    const text = await res.text();
    return { status: res.status, text, body: (res.ok ? JSON.parse(text) : undefined) as unknown };
  };
  const names = (body: unknown) => (body as { serviceList: Array<{ groupName: string; name: string }> }).serviceList.map((s) => `${s.groupName}@@${s.name}`);

  beforeAll(async () => {
    registry = await startRegistry({ port: 0 });
    const put = (groupName: string, name: string, ip: string, over: Partial<{ healthy: boolean; clusterName: string }> = {}) =>
      registry.store.register(NS, groupName, name, {
        ip, port: 8080, weight: 1, healthy: over.healthy ?? true, enabled: true, ephemeral: false, clusterName: over.clusterName ?? 'DEFAULT', metadata: { zone: 'a' },
      });
    put('DEFAULT_GROUP', 'orders', '10.8.20.1');
    put('DEFAULT_GROUP', 'orders', '10.8.20.2', { healthy: false, clusterName: 'BJ' });
    put('PAYMENTS', 'ledger', '10.8.20.3');
    put('PAYMENTS', 'orders-audit', '10.8.20.4');
    put('SEARCH', 'indexer', '10.8.20.5', { healthy: false });
    registry.store.createService(NS, 'SEARCH', 'empty', { protectThreshold: 0, metadata: {}, selector: { type: 'none' } });
    registry.store.register('public', 'DEFAULT_GROUP', 'elsewhere', {
      ip: '10.8.20.6', port: 1, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {},
    });
  });
  afterAll(async () => {
    await registry.close();
  });

  it('lists every group of one namespace with the ServiceView fields, the count being the total', async () => {
    const { status, body } = await catalog({ namespaceId: NS, pageNo: 1, pageSize: 100, withInstances: false });
    expect(status).toBe(200);
    expect(body).toEqual({
      count: 5,
      serviceList: [
        { name: 'orders', groupName: 'DEFAULT_GROUP', clusterCount: 2, ipCount: 2, healthyInstanceCount: 1, triggerFlag: 'false' },
        { name: 'ledger', groupName: 'PAYMENTS', clusterCount: 1, ipCount: 1, healthyInstanceCount: 1, triggerFlag: 'false' },
        { name: 'orders-audit', groupName: 'PAYMENTS', clusterCount: 1, ipCount: 1, healthyInstanceCount: 1, triggerFlag: 'false' },
        { name: 'empty', groupName: 'SEARCH', clusterCount: 0, ipCount: 0, healthyInstanceCount: 0, triggerFlag: 'false' },
        // No healthy instance is at or below a threshold of 0: protection would trigger.
        { name: 'indexer', groupName: 'SEARCH', clusterCount: 1, ipCount: 1, healthyInstanceCount: 0, triggerFlag: 'true' },
      ],
    });
    // Without a namespace: the public one only.
    expect(names((await catalog({ pageNo: 1, pageSize: 100 })).body)).toEqual(['DEFAULT_GROUP@@elsewhere']);
    expect((await catalog({ namespaceId: 'nobody-here', pageNo: 1, pageSize: 10 })).body).toEqual({ count: 0, serviceList: [] });
  });

  it('pages, and filters by substrings of group and name, and by having instances', async () => {
    const first = await catalog({ namespaceId: NS, pageNo: 1, pageSize: 2 });
    const second = await catalog({ namespaceId: NS, pageNo: 2, pageSize: 2 });
    const third = await catalog({ namespaceId: NS, pageNo: 3, pageSize: 2 });
    expect([first, second, third].map((p) => (p.body as { count: number }).count)).toEqual([5, 5, 5]);
    expect([...names(first.body), ...names(second.body), ...names(third.body)]).toEqual([
      'DEFAULT_GROUP@@orders', 'PAYMENTS@@ledger', 'PAYMENTS@@orders-audit', 'SEARCH@@empty', 'SEARCH@@indexer',
    ]);
    expect(names((await catalog({ namespaceId: NS, pageNo: 4, pageSize: 2 })).body)).toEqual([]);
    expect(names((await catalog({ namespaceId: NS, pageNo: 1, pageSize: 10, groupNameParam: 'PAY' })).body)).toEqual(['PAYMENTS@@ledger', 'PAYMENTS@@orders-audit']);
    expect(names((await catalog({ namespaceId: NS, pageNo: 1, pageSize: 10, serviceNameParam: 'orders' })).body)).toEqual(['DEFAULT_GROUP@@orders', 'PAYMENTS@@orders-audit']);
    expect(names((await catalog({ namespaceId: NS, pageNo: 1, pageSize: 10, groupNameParam: 'PAYMENTS', serviceNameParam: 'audit' })).body)).toEqual(['PAYMENTS@@orders-audit']);
    const nonEmpty = await catalog({ namespaceId: NS, pageNo: 1, pageSize: 10, hasIpCount: true });
    expect((nonEmpty.body as { count: number }).count).toBe(4);
    expect(names(nonEmpty.body)).not.toContain('SEARCH@@empty');
    expect(await catalog({ namespaceId: NS, pageNo: 0, pageSize: 10 })).toMatchObject({
      status: 400,
      text: "caused: Param 'pageNo' must be an integer from 1 to 9007199254740991, got: 0;",
    });
  });

  it('answers ServiceDetailInfo entries with withInstances=true', async () => {
    const { body } = await catalog({ namespaceId: NS, pageNo: 1, pageSize: 1, withInstances: true });
    expect(body).toEqual([
      {
        serviceName: 'orders',
        groupName: 'DEFAULT_GROUP',
        metadata: {},
        clusterMap: {
          DEFAULT: { hosts: [{ ip: '10.8.20.1', port: 8080, valid: true, marked: false, metadata: { zone: 'a' }, weight: 1, enabled: true }] },
          BJ: { hosts: [{ ip: '10.8.20.2', port: 8080, valid: false, marked: false, metadata: { zone: 'a' }, weight: 1, enabled: true }] },
        },
      },
    ]);
  });
});

describe('v1 login', () => {
  let registry: RunningRegistry;
  beforeAll(async () => {
    registry = await startRegistry({ port: 0, users: new Map([['nacos', 'nacos-pw']]) });
  });
  afterAll(async () => {
    await registry.close();
  });

  it('requires a token from /nacos/v1/auth/login on every naming call', async () => {
    const listUrl = `${registry.url}/nacos/v1/ns/instance/list?serviceName=x`;
    const denied = await fetch(listUrl);
    expect(denied.status).toBe(403);

    const wrong = await fetch(`${registry.url}/nacos/v1/auth/login`, { method: 'POST', body: new URLSearchParams({ username: 'nacos', password: 'x' }) });
    expect(wrong.status).toBe(403);
    const res = await fetch(`${registry.url}/nacos/v1/auth/login`, { method: 'POST', body: new URLSearchParams({ username: 'nacos', password: 'nacos-pw' }) });
    const login = (await res.json()) as { accessToken: string; tokenTtl: number; globalAdmin: boolean };
    expect(login.tokenTtl).toBe(18000);
    expect((await fetch(`${listUrl}&accessToken=${encodeURIComponent(login.accessToken)}`)).status).toBe(200);
    expect((await fetch(`${listUrl}&accessToken=forged`)).status).toBe(403);
    // The lists across groups and namespaces are naming calls too.
    const catalogUrl = `${registry.url}/nacos/v1/ns/catalog/services?pageNo=1&pageSize=10`;
    expect((await fetch(catalogUrl)).status).toBe(403);
    expect((await fetch(`${catalogUrl}&accessToken=${encodeURIComponent(login.accessToken)}`)).status).toBe(200);
  });
});
