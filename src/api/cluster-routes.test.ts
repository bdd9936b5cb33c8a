import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { TaskSpec } from '../model/index.js';
import { apiHarness, expectError, SECRET_MARKER, type ApiHarness } from '../../test/support/api-harness.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';

let server: RedisServer;
let h: ApiHarness;

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server?.cleanup();
});

beforeEach(async () => {
  h = await apiHarness(server);
});

afterEach(async () => {
  await h?.close();
});

const PASSWORD = `pw-${SECRET_MARKER}-1`;

function clusterBody(id: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { id, kind: 'nacos', endpoints: ['10.0.0.1:8848'], ...extra };
}

function task(id: string, source: string, destination: string): TaskSpec {
  return {
    id,
    source,
    destination,
    service: `svc-${id}`,
    group: 'DEFAULT_GROUP',
    namespace: 'public',
    options: {},
    state: 'running',
    createdAt: '2024-01-01T00:00:00.000Z',
  };
}

const post = (payload: unknown) => h.inject({ method: 'POST', url: '/api/v1/clusters', payload: payload as object });
const put = (id: string, payload: unknown) => h.inject({ method: 'PUT', url: `/api/v1/clusters/${id}`, payload: payload as object });

describe('POST /api/v1/clusters', () => {
  it('creates a cluster, answers it without the password and tells the engine', async () => {
    const res = await post(
      clusterBody('nacos-eu', {
        endpoints: ['10.0.0.1:8848', 'nacos.example.com:8848'],
        namespace: 'dev',
        username: 'nacos',
        password: PASSWORD,
        labels: { region: 'eu' },
        options: { apiVersion: 'v1', aliases: ['nacos-eu-old'] },
      }),
    );
    expect(res.statusCode).toBe(201);
    expect(res.headers.location).toBe('/api/v1/clusters/nacos-eu');
    expect(res.json()).toEqual({
      id: 'nacos-eu',
      kind: 'nacos',
      endpoints: ['10.0.0.1:8848', 'nacos.example.com:8848'],
      namespace: 'dev',
      username: 'nacos',
      hasPassword: true,
      labels: { region: 'eu' },
      options: { apiVersion: 'v1', aliases: ['nacos-eu-old'] },
    });
    expect(await h.store.getCluster('nacos-eu')).toMatchObject({ password: PASSWORD, username: 'nacos' });
    expect(h.control.calls).toEqual([{ method: 'clusterChanged', id: 'nacos-eu' }]);
  });

  it('defaults labels and options, and says when there is no password', async () => {
    const res = await post(clusterBody('zk', { kind: 'zookeeper' }));
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ id: 'zk', kind: 'zookeeper', endpoints: ['10.0.0.1:8848'], hasPassword: false, labels: {}, options: {} });
    expect(await h.store.getCluster('zk')).toEqual({ id: 'zk', kind: 'zookeeper', endpoints: ['10.0.0.1:8848'], labels: {}, options: {} });
  });

  it('accepts the edges of every rule', async () => {
    const endpoints = Array.from({ length: 32 }, (_, i) => `h${i}:${i + 1}`);
    const accepted = [
      clusterBody('a'),
      clusterBody(`a${'-'.repeat(61)}b`),
      clusterBody('k8s', { kind: 'kubernetes', endpoints: ['[::1]:6443', 'my_host.internal:65535', '192.168.1.1:1'] }),
      clusterBody('many', { endpoints }),
      clusterBody('hp', { hasPassword: true }),
      // Kubernetes takes its API server from the kubeconfig: no endpoint needed.
      clusterBody('kube', { kind: 'kubernetes', endpoints: [] }),
    ];
    for (const body of accepted) {
      const res = await post(body);
      expect(res.statusCode, res.payload).toBe(201);
    }
    expect((await h.store.listClusters()).map((c) => c.id)).toEqual(['a', `a${'-'.repeat(61)}b`, 'hp', 'k8s', 'kube', 'many']);
    // hasPassword is read-only: sending it does not invent a password.
    expect((await h.store.getCluster('hp'))?.password).toBeUndefined();
  });

  it('answers 409 cluster_exists for a second cluster with the same id and keeps the first', async () => {
    await post(clusterBody('c1', { labels: { v: '1' } }));
    h.control.reset();
    const before = await h.snapshot();
    const res = await post(clusterBody('c1', { labels: { v: '2' } }));
    expectError(res, 409, 'cluster_exists', /c1/);
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });

  const invalid: [string, unknown, RegExp][] = [
    ['a missing id', { kind: 'nacos', endpoints: ['h:1'] }, /body\.id is required/],
    ['a missing kind', { id: 'c', endpoints: ['h:1'] }, /body\.kind is required/],
    ['missing endpoints', { id: 'c', kind: 'nacos' }, /body\.endpoints is required/],
    ['an uppercase id', clusterBody('Nacos'), /body\.id must be 1 to 63 lowercase/],
    ['an id of 64 characters', clusterBody('a'.repeat(64)), /body\.id must be 1 to 63/],
    ['an id starting with -', clusterBody('-a'), /body\.id/],
    ['an id ending with -', clusterBody('a-'), /body\.id/],
    ['an id with a slash', clusterBody('a/b'), /body\.id/],
    ['a numeric id', clusterBody('x', { id: 12 }), /body\.id must be string/],
    ['an unknown kind', clusterBody('c', { kind: 'eureka' }), /body\.kind must be one of nacos, zookeeper, kubernetes, consul/],
    ['no endpoints', clusterBody('c', { endpoints: [] }), /body\.endpoints must NOT have fewer than 1 items/],
    ['33 endpoints', clusterBody('c', { endpoints: Array.from({ length: 33 }, (_, i) => `h:${i + 1}`) }), /body\.endpoints must NOT have more than 32 items/],
    ['endpoints as a string', clusterBody('c', { endpoints: 'h:1' }), /body\.endpoints must be array/],
    ['an endpoint without a port', clusterBody('c', { endpoints: ['h:1', 'host'] }), /body\.endpoints\[1\] must be host:port/],
    ['port 0', clusterBody('c', { endpoints: ['h:0'] }), /body\.endpoints\[0\] must be host:port with a port from 1 to 65535/],
    ['port 65536', clusterBody('c', { endpoints: ['h:65536'] }), /body\.endpoints\[0\] must be host:port/],
    ['a named port', clusterBody('c', { endpoints: ['h:http'] }), /body\.endpoints\[0\]/],
    ['a URL as endpoint', clusterBody('c', { endpoints: ['http://h:8848'] }), /body\.endpoints\[0\]/],
    ['a number as endpoint', clusterBody('c', { endpoints: [8848] }), /body\.endpoints\[0\] must be string/],
    ['a namespace with a space', clusterBody('c', { namespace: 'my ns' }), /body\.namespace must not contain whitespace/],
    ['an empty username', clusterBody('c', { username: '' }), /body\.username/],
    ['a numeric password', clusterBody('c', { password: 1234 }), /body\.password must be string/],
    ['a null password', clusterBody('c', { password: null }), /body\.password must be string/],
    ['a numeric label', clusterBody('c', { labels: { region: 1 } }), /body\.labels\.region must be string/],
    ['labels as an array', clusterBody('c', { labels: ['eu'] }), /body\.labels must be object/],
    ['a label key of 64 characters', clusterBody('c', { labels: { ['k'.repeat(64)]: 'v' } }), /body\.labels key/],
    ['options as a string', clusterBody('c', { options: 'fast' }), /body\.options must be object/],
    ['a string hasPassword', clusterBody('c', { hasPassword: 'yes' }), /body\.hasPassword must be boolean/],
    ['an unknown field', clusterBody('c', { colour: 'blue' }), /body\.colour is not a known field/],
    // Each kind's own rules, run before anything is stored.
    ['an option the kind does not have', clusterBody('c', { options: { bogusOption: 1 } }), /^body\.options\.bogusOption: not an option of nacos clusters/],
    ['an apiVersion Nacos does not speak', clusterBody('c', { options: { apiVersion: 'v9' } }), /^body\.options\.apiVersion: expected auto, grpc, v1 or v3/],
    ['a Nacos option on a ZooKeeper cluster', clusterBody('c', { kind: 'zookeeper', options: { apiVersion: 'v1' } }), /^body\.options\.apiVersion: not an option of zookeeper clusters/],
    ['an unknown ZooKeeper layout', clusterBody('c', { kind: 'zookeeper', options: { layout: 'eureka' } }), /^body\.options\.layout: expected dubbo or curator/],
    ['a ZooKeeper server by IPv6 address', clusterBody('c', { kind: 'zookeeper', endpoints: ['[::1]:2181'] }), /^body\.endpoints: .*IPv6 literal/],
    ['a namespace map that is not one-to-one', clusterBody('c', { kind: 'kubernetes', options: { namespaceMap: { a: 'x', b: 'x' } } }), /^body\.options\.namespaceMap: .*one-to-one/],
    ['aliases that are not a list', clusterBody('c', { options: { aliases: 'old' } }), /^body\.options\.aliases: expected a list/],
    ['a JSON array', [clusterBody('c')], /^body must be object/],
    ['a JSON string', 'c', /^body must be object/],
    ['JSON null', null, /^body must be object/],
  ];

  for (const [what, body, message] of invalid) {
    it(`answers 400 invalid_request for ${what} and stores nothing`, async () => {
      const res = await h.inject({
        method: 'POST',
        url: '/api/v1/clusters',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      expectError(res, 400, 'invalid_request', message);
      expect(await h.snapshot()).toEqual({});
      expect(h.control.calls).toEqual([]);
    });
  }
});

describe('GET /api/v1/clusters', () => {
  it('lists clusters sorted by id, without passwords', async () => {
    expect((await h.inject({ method: 'GET', url: '/api/v1/clusters' })).json()).toEqual({ items: [] });
    await post(clusterBody('zeta', { password: PASSWORD }));
    await post(clusterBody('alpha'));
    const res = await h.inject({ method: 'GET', url: '/api/v1/clusters' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      items: [
        { id: 'alpha', kind: 'nacos', endpoints: ['10.0.0.1:8848'], hasPassword: false, labels: {}, options: {} },
        { id: 'zeta', kind: 'nacos', endpoints: ['10.0.0.1:8848'], hasPassword: true, labels: {}, options: {} },
      ],
    });
  });

  it('shows one cluster, or 404 cluster_not_found', async () => {
    await post(clusterBody('c1', { password: PASSWORD, username: 'u' }));
    const res = await h.inject({ method: 'GET', url: '/api/v1/clusters/c1' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ id: 'c1', kind: 'nacos', endpoints: ['10.0.0.1:8848'], username: 'u', hasPassword: true, labels: {}, options: {} });
    expectError(await h.inject({ method: 'GET', url: '/api/v1/clusters/nope' }), 404, 'cluster_not_found', /nope/);
    expectError(await h.inject({ method: 'GET', url: `/api/v1/clusters/${'x'.repeat(254)}` }), 400, 'invalid_request', /params\.id/);
    expectError(await h.inject({ method: 'GET', url: `/api/v1/clusters/${'x'.repeat(300)}` }), 414, 'uri_too_long');
  });

  it('never has a password field (every inject also checks that no password appears at all)', async () => {
    await post(clusterBody('c1', { password: PASSWORD }));
    const res = await h.inject({ method: 'GET', url: '/api/v1/clusters/c1' });
    expect(res.json()).not.toHaveProperty('password');
  });
});

describe('PUT /api/v1/clusters/:id', () => {
  it('creates (201) then replaces (200), telling the engine each time', async () => {
    const created = await put('c1', { kind: 'nacos', endpoints: ['h:1'], password: PASSWORD });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({ id: 'c1', hasPassword: true });
    const replaced = await put('c1', { id: 'c1', kind: 'zookeeper', endpoints: ['h:2181'], labels: { site: 'x' } });
    expect(replaced.statusCode).toBe(200);
    expect(replaced.json()).toEqual({ id: 'c1', kind: 'zookeeper', endpoints: ['h:2181'], hasPassword: true, labels: { site: 'x' }, options: {} });
    expect(h.control.calls).toEqual([
      { method: 'clusterChanged', id: 'c1' },
      { method: 'clusterChanged', id: 'c1' },
    ]);
  });

  it('keeps the stored password when the body has none, replaces it when given, removes it on null', async () => {
    await put('c1', { kind: 'nacos', endpoints: ['h:1'], username: 'u', password: PASSWORD });
    // A client sends back what it read: hasPassword and no password.
    const read = (await h.inject({ method: 'GET', url: '/api/v1/clusters/c1' })).json() as Record<string, unknown>;
    expect((await put('c1', { ...read, endpoints: ['h:2'] })).statusCode).toBe(200);
    expect(await h.store.getCluster('c1')).toMatchObject({ endpoints: ['h:2'], password: PASSWORD });

    const other = `other-${SECRET_MARKER}`;
    await put('c1', { kind: 'nacos', endpoints: ['h:1'], password: other });
    expect((await h.store.getCluster('c1'))?.password).toBe(other);

    const cleared = await put('c1', { kind: 'nacos', endpoints: ['h:1'], password: null });
    expect(cleared.json()).toMatchObject({ hasPassword: false });
    expect(await h.store.getCluster('c1')).not.toHaveProperty('password');
  });

  it('answers 400 id_mismatch when the body names another id, and stores nothing', async () => {
    const res = await put('c1', { id: 'c2', kind: 'nacos', endpoints: ['h:1'] });
    expectError(res, 400, 'id_mismatch', /c2.*c1/);
    expect(await h.snapshot()).toEqual({});
    expect(h.control.calls).toEqual([]);
  });

  const invalid: [string, string, unknown, RegExp][] = [
    ['an invalid id in the path', 'Bad_Id', { kind: 'nacos', endpoints: ['h:1'] }, /params\.id must be 1 to 63/],
    ['a missing kind', 'c1', { endpoints: ['h:1'] }, /body\.kind is required/],
    ['a bad endpoint', 'c1', { kind: 'nacos', endpoints: ['h:99999'] }, /body\.endpoints\[0\]/],
    ['an unknown field', 'c1', { kind: 'nacos', endpoints: ['h:1'], secret: 'x' }, /body\.secret is not a known field/],
    ['a numeric password', 'c1', { kind: 'nacos', endpoints: ['h:1'], password: 5 }, /body\.password must be string/],
    ['a wrong type', 'c1', { kind: 'nacos', endpoints: ['h:1'], labels: 'eu' }, /body\.labels must be object/],
    ['an option the kind does not have', 'c1', { kind: 'nacos', endpoints: ['h:1'], options: { bogusOption: 1 } }, /^body\.options\.bogusOption: not an option/],
    ['an apiVersion Nacos does not speak', 'c1', { kind: 'nacos', endpoints: ['h:1'], options: { apiVersion: 'v9' } }, /^body\.options\.apiVersion: expected auto, grpc, v1 or v3/],
    ['a change of kind the options do not fit', 'c1', { kind: 'zookeeper', endpoints: ['h:1'], options: { contextPath: '/nacos' } }, /^body\.options\.contextPath: not an option of zookeeper/],
  ];
  for (const [what, id, body, message] of invalid) {
    it(`answers 400 invalid_request for ${what} and changes nothing`, async () => {
      await put('c1', { kind: 'nacos', endpoints: ['h:1'], password: PASSWORD });
      h.control.reset();
      const before = await h.snapshot();
      expectError(await put(id, body), 400, 'invalid_request', message);
      expect(await h.snapshot()).toEqual(before);
      expect(h.control.calls).toEqual([]);
    });
  }
});

describe('DELETE /api/v1/clusters/:id', () => {
  it('deletes (204), tells the engine, then answers 404', async () => {
    await post(clusterBody('c1'));
    h.control.reset();
    const res = await h.inject({ method: 'DELETE', url: '/api/v1/clusters/c1' });
    expect(res.statusCode).toBe(204);
    expect(res.payload).toBe('');
    expect(await h.store.getCluster('c1')).toBeUndefined();
    expect(await h.snapshot()).toEqual({});
    expect(h.control.calls).toEqual([{ method: 'clusterChanged', id: 'c1' }]);
    expectError(await h.inject({ method: 'DELETE', url: '/api/v1/clusters/c1' }), 404, 'cluster_not_found');
  });

  it('answers 409 cluster_in_use naming the tasks, and keeps the cluster', async () => {
    await post(clusterBody('a'));
    await post(clusterBody('b'));
    await post(clusterBody('c'));
    await h.store.createTask(task('t1', 'a', 'b'));
    await h.store.createTask(task('t2', 'c', 'b'));
    h.control.reset();
    const before = await h.snapshot();
    expectError(await h.inject({ method: 'DELETE', url: '/api/v1/clusters/b' }), 409, 'cluster_in_use', /tasks t1, t2/);
    expectError(await h.inject({ method: 'DELETE', url: '/api/v1/clusters/a' }), 409, 'cluster_in_use', /task t1;/);
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });
});

describe('PUT /api/v1/clusters/:id that changes nothing, under concurrency, and compare', () => {
  const compare = (id: string, payload: unknown) => h.inject({ method: 'POST', url: `/api/v1/clusters/${id}/compare`, payload: payload as object });

  it('writes nothing and tells nobody when the body equals the stored cluster, password and option order included', async () => {
    const body = { kind: 'zookeeper', endpoints: ['h:2181'], username: 'u', password: PASSWORD, labels: { site: 'x', region: 'eu' }, options: { layout: 'dubbo', sessionTimeoutMs: 4000 } };
    expect((await put('c1', body)).statusCode).toBe(201);
    h.control.reset();
    const before = await h.snapshot();
    const again = await put('c1', { ...body, labels: { region: 'eu', site: 'x' }, options: { sessionTimeoutMs: 4000, layout: 'dubbo' } });
    expect(again.statusCode, again.payload).toBe(200);
    expect(again.json()).toMatchObject({ id: 'c1', hasPassword: true, options: body.options });
    // Without a password the stored one is kept: the same cluster again.
    expect((await put('c1', { ...body, password: undefined })).statusCode).toBe(200);
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);

    expect((await put('c1', { ...body, password: `new-${SECRET_MARKER}` })).statusCode).toBe(200);
    expect(h.control.calls).toEqual([{ method: 'clusterChanged', id: 'c1' }]);
  });

  it('answers 201 to exactly one of many concurrent PUTs of a new id, 200 to the others', async () => {
    for (let round = 0; round < 5; round += 1) {
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => put(`race-${round}`, { kind: 'nacos', endpoints: [`h:${i + 1}`] })));
      expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    }
  });

  it('compares a body with the stored cluster without writing, naming a differing password but never showing it', async () => {
    const body = { kind: 'nacos', endpoints: ['h:1'], username: 'u', password: PASSWORD, options: { requestTimeoutMs: 2000 } };
    expect((await compare('c1', body)).json()).toEqual({ exists: false, differs: true, fields: [] });
    await put('c1', body);
    h.control.reset();
    const before = await h.snapshot();
    expect((await compare('c1', body)).json()).toEqual({ exists: true, differs: false, fields: [] });
    expect((await compare('c1', { ...body, password: undefined })).json()).toEqual({ exists: true, differs: false, fields: [] });
    expect((await compare('c1', { ...body, password: `other-${SECRET_MARKER}`, endpoints: ['h:2'] })).json()).toEqual({
      exists: true,
      differs: true,
      fields: ['endpoints', 'password'],
    });
    expect((await compare('c1', { ...body, password: null, labels: { a: 'b' } })).json()).toEqual({ exists: true, differs: true, fields: ['password', 'labels'] });
    expectError(await compare('c1', { ...body, id: 'c2' }), 400, 'id_mismatch');
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });
});
