import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ClusterSpec, TaskSpec } from '../model/index.js';
import { apiHarness, expectError, SECRET_MARKER, type ApiHarness } from '../../test/support/api-harness.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import {
  clusterSpecOf,
  endpointsOf,
  idList,
  nacosSyncClusterId,
  nacosSyncTaskId,
  pageOf,
  pageParam,
} from '../nacos-sync/nacos-sync-wire.js';
import { ID_PATTERN } from '../validation/patterns.js';

// Ids computed outside this code base (`printf %s shanghai_NACOS | md5sum`), so that the formula
// is checked against nacos-sync's, not against itself.
const SHANGHAI = '28456ef8a3d2d158061fd794894d7127'; // md5("shanghai_NACOS")
const BEIJING = '5612ec2238b730a4b99dd63b86d6bc07'; // md5("beijing_NACOS")
const ZK_SH = 'a99412f8636fdcbd81bfa1c5c54f7430'; // md5("zk-sh_ZK")

const PASSWORD = `pw-${SECRET_MARKER}-1`;

describe('nacos-sync wire helpers', () => {
  it('computes nacos-sync cluster and task ids (md5 of the joined fields, "null" for a missing group)', () => {
    expect(nacosSyncClusterId('shanghai', 'NACOS')).toBe(SHANGHAI);
    expect(nacosSyncClusterId('zk-sh', 'ZK')).toBe(ZK_SH);
    expect(nacosSyncTaskId('orders', 'DEFAULT_GROUP', 'a', 'b')).toBe('d197e856d68bce94e07ceb6e9c6ce788');
    expect(nacosSyncTaskId('orders', null, 'a', 'b')).toBe('d4caaf3cabbfdf23fc6b67955d64bed1');
    expect(nacosSyncTaskId('orders', undefined, 'a', 'b')).toBe('d4caaf3cabbfdf23fc6b67955d64bed1');
    // Every md5 is a valid regsync id, so nacos-sync's ids are used as they are.
    expect(new RegExp(ID_PATTERN).test(nacosSyncTaskId('*', '', 'x', 'y'))).toBe(true);
  });

  it('turns connect keys into endpoints: commas split, http:// dropped, default ports added, duplicates removed', () => {
    expect(endpointsOf(['10.0.0.1:8848', 'http://nacos.local:8849/', 'nacos.local', '10.0.0.1:8848'], 'nacos')).toEqual([
      '10.0.0.1:8848',
      'nacos.local:8849',
      'nacos.local:8848',
    ]);
    expect(endpointsOf(['10.0.0.1:2181,10.0.0.2, 10.0.0.3:2182'], 'zookeeper')).toEqual(['10.0.0.1:2181', '10.0.0.2:2181', '10.0.0.3:2182']);
    expect(endpointsOf(['[::1]'], 'nacos')).toEqual(['[::1]:8848']);
    for (const bad of ['https://n:8848', 'n:8848/nacos', '192.168.2?key=1', 'n:99999', 'n:0', 'a b:1', ':8848']) {
      expect(() => endpointsOf([bad], 'nacos'), bad).toThrow(/connectKeyList entry/);
    }
  });

  it('keeps the name in options, blanks as absent, and refuses what nacos-sync or the native API would', () => {
    expect(clusterSpecOf({ clusterName: 'shanghai', clusterType: 'NACOS', connectKeyList: ['n:1'], userName: '', password: ' ', namespace: '' })).toEqual({
      id: SHANGHAI,
      kind: 'nacos',
      endpoints: ['n:1'],
      namespace: undefined,
      username: undefined,
      password: undefined,
      labels: {},
      options: { nacosSyncName: 'shanghai' },
    });
    const base = { clusterName: 'x', clusterType: 'NACOS', connectKeyList: ['n:1'] };
    expect(() => clusterSpecOf({ ...base, connectKeyList: [] })).toThrow(/connectKeyList is empty/);
    expect(() => clusterSpecOf({ ...base, connectKeyList: null })).toThrow(/connectKeyList is empty/);
    expect(() => clusterSpecOf({ ...base, clusterName: ' ' })).toThrow(/clusterName and clusterType must not be empty/);
    expect(() => clusterSpecOf({ ...base, clusterType: null })).toThrow(/clusterName and clusterType must not be empty/);
    expect(() => clusterSpecOf({ ...base, namespace: 'a b' })).toThrow(/namespace must be 1 to 128 characters without whitespace/);
  });

  it('pages like Spring Data and reads page parameters strictly', () => {
    expect(pageOf([1, 2, 3, 4, 5], 2, 2)).toEqual({ items: [3, 4], totalPage: 3, totalSize: 5, currentSize: 2 });
    expect(pageOf([1, 2, 3], 9, 2)).toEqual({ items: [], totalPage: 2, totalSize: 3, currentSize: 0 });
    expect(pageOf([], 1, 10)).toEqual({ items: [], totalPage: 0, totalSize: 0, currentSize: 0 });
    expect(pageParam('pageNum', undefined, 1)).toBe(1);
    expect(pageParam('pageNum', '', 1)).toBe(1);
    expect(pageParam('pageSize', '25', 10)).toBe(25);
    for (const bad of ['0', '-1', '1.5', 'x', '2147483648', '1e3']) expect(() => pageParam('pageSize', bad, 10), bad).toThrow(/pageSize must be a whole number/);
  });

  it('reads taskIds repeated, comma-separated or both', () => {
    expect(idList(['a', 'b,c', ' ', 'a'])).toEqual(['a', 'b', 'c']);
    expect(idList('x, y')).toEqual(['x', 'y']);
    expect(idList(undefined)).toEqual([]);
  });
});

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

/** A nacos-sync answer: status 200, the base fields, and what the route adds. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read answers loosely
function body(res: LightMyRequestResponse): any {
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  return res.json();
}

/** Asserts a nacos-sync success answer with exactly `fields` besides the base ones; answers the body. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read answers loosely
function expectOk(res: LightMyRequestResponse, fields: string[] = [], message: string | null = null): any {
  expect(res.statusCode, res.payload).toBe(200);
  const b = body(res);
  expect({ success: b.success, resultCode: b.resultCode, resultMessage: b.resultMessage }, res.payload).toEqual({
    success: true,
    resultCode: 'SUCCESS',
    resultMessage: message,
  });
  expect(Object.keys(b).sort()).toEqual(['resultCode', 'resultMessage', 'success', ...fields].sort());
  return b;
}

/** Asserts a nacos-sync failure answer: `success: false`, `SYSTEM_ERROR`, a message, and nothing else. */
function expectFailure(res: LightMyRequestResponse, message: RegExp, status = 200): void {
  expect(res.statusCode, res.payload).toBe(status);
  const b = body(res);
  expect(Object.keys(b).sort()).toEqual(['resultCode', 'resultMessage', 'success']);
  expect({ success: b.success, resultCode: b.resultCode }).toEqual({ success: false, resultCode: 'SYSTEM_ERROR' });
  expect(b.resultMessage).toMatch(message);
}

const postJson = (url: string, payload: unknown) =>
  h.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
const get = (url: string) => h.inject({ method: 'GET', url });
const del = (url: string) => h.inject({ method: 'DELETE', url });

const addCluster = (payload: Record<string, unknown>) => postJson('/v1/cluster/add', payload);
const shanghai = { clusterName: 'shanghai', clusterType: 'NACOS', connectKeyList: ['10.1.0.10:8848', '10.1.0.11'], userName: 'sync', password: PASSWORD, namespace: 'dev' };
const beijing = { clusterName: 'beijing', clusterType: 'NACOS', connectKeyList: ['10.2.0.10:8848'] };

function spec(id: string, extra: Partial<ClusterSpec> = {}): ClusterSpec {
  return { id, kind: 'nacos', endpoints: ['10.0.0.1:8848'], labels: {}, options: {}, ...extra };
}

function task(id: string, extra: Partial<TaskSpec> = {}): TaskSpec {
  return {
    id,
    source: SHANGHAI,
    destination: BEIJING,
    service: `svc-${id}`,
    group: 'DEFAULT_GROUP',
    namespace: 'public',
    options: {},
    state: 'running',
    createdAt: '2024-01-01T00:00:00.000Z',
    ...extra,
  };
}

describe('POST /v1/cluster/add', () => {
  it('stores a regsync cluster under nacos-sync\'s id, keeps the name, never shows the password, tells the engine', async () => {
    expectOk(await addCluster(shanghai));

    expect(await h.store.getCluster(SHANGHAI)).toEqual({
      id: SHANGHAI,
      kind: 'nacos',
      endpoints: ['10.1.0.10:8848', '10.1.0.11:8848'],
      namespace: 'dev',
      username: 'sync',
      password: PASSWORD,
      labels: {},
      options: { nacosSyncName: 'shanghai' },
    });
    expect(h.control.calls).toEqual([{ method: 'clusterChanged', id: SHANGHAI }]);

    // The native API serves the same cluster, and takes back what it shows.
    const native = await h.inject({ method: 'GET', url: `/api/v1/clusters/${SHANGHAI}` });
    expect(native.statusCode).toBe(200);
    expect(native.json()).toMatchObject({ id: SHANGHAI, kind: 'nacos', hasPassword: true, options: { nacosSyncName: 'shanghai' } });
    const replaced = await h.inject({ method: 'PUT', url: `/api/v1/clusters/${SHANGHAI}`, payload: native.json() as object });
    expect(replaced.statusCode, replaced.payload).toBe(200);
    expect((await h.store.getCluster(SHANGHAI))?.password).toBe(PASSWORD);
  });

  it('maps ZK to a zookeeper cluster, splitting connect strings and adding the default port', async () => {
    expectOk(await addCluster({ clusterName: 'zk-sh', clusterType: 'ZK', connectKeyList: ['10.3.0.1:2181,10.3.0.2'] }));
    expect(await h.store.getCluster(ZK_SH)).toMatchObject({ kind: 'zookeeper', endpoints: ['10.3.0.1:2181', '10.3.0.2:2181'], options: { nacosSyncName: 'zk-sh' } });
  });

  it('maps EUREKA to a eureka cluster, adding the default port 8761', async () => {
    expectOk(await addCluster({ clusterName: 'eureka-sc', clusterType: 'EUREKA', connectKeyList: ['10.5.0.1:8761', '10.5.0.2'] }));
    const [stored] = (await h.store.listClusters()).filter((c) => c.options.nacosSyncName === 'eureka-sc');
    expect(stored).toMatchObject({ kind: 'eureka', endpoints: ['10.5.0.1:8761', '10.5.0.2:8761'] });
  });

  it('reads a Eureka service URL as nacos-sync stores one: the endpoint, and its path as the context path', async () => {
    expectOk(await addCluster({ clusterName: 'eureka-url', clusterType: 'EUREKA', connectKeyList: ['http://10.5.0.1:8761/eureka/', 'http://10.5.0.2:8761/eureka'] }));
    const [stored] = (await h.store.listClusters()).filter((c) => c.options.nacosSyncName === 'eureka-url');
    expect(stored).toMatchObject({ kind: 'eureka', endpoints: ['10.5.0.1:8761', '10.5.0.2:8761'], options: { contextPath: '/eureka' } });
    expectOk(await addCluster({ clusterName: 'eureka-tls', clusterType: 'EUREKA', connectKeyList: ['https://eureka.example.internal/eureka/v2/apps/'] }));
    const [tls] = (await h.store.listClusters()).filter((c) => c.options.nacosSyncName === 'eureka-tls');
    expect(tls).toMatchObject({ endpoints: ['eureka.example.internal:443'], options: { contextPath: '/eureka/v2', scheme: 'https' } });
    expectFailure(await addCluster({ clusterName: 'eureka-mixed', clusterType: 'EUREKA', connectKeyList: ['http://10.5.0.1:8761/eureka/', 'http://10.5.0.2:8761/eureka/v2/'] }), /every URL of a cluster must have the same scheme and path/);
  });

  it('maps CONSUL to a consul cluster, adding the default port 8500', async () => {
    expectOk(await addCluster({ clusterName: 'consul-dc1', clusterType: 'CONSUL', connectKeyList: ['10.4.0.1:8500', '10.4.0.2'] }));
    const [stored] = (await h.store.listClusters()).filter((c) => c.options.nacosSyncName === 'consul-dc1');
    expect(stored).toMatchObject({ kind: 'consul', endpoints: ['10.4.0.1:8500', '10.4.0.2:8500'] });
  });

  it('accepts nulls where nacos-sync\'s Jackson does', async () => {
    expectOk(await addCluster({ ...beijing, userName: null, password: null, namespace: null }));
    expect(await h.store.getCluster(BEIJING)).toMatchObject({ endpoints: ['10.2.0.10:8848'] });
  });

  it('refuses a second cluster with the same name and type', async () => {
    expectOk(await addCluster(beijing));
    h.control.reset();
    const before = await h.snapshot();
    expectFailure(await addCluster({ ...beijing, connectKeyList: ['10.9.9.9:8848'] }), new RegExp(`cluster ${BEIJING} already exists \\(clusterName beijing, clusterType NACOS\\)`));
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });

  const refused: [string, unknown, RegExp][] = [
    ['CS (a nacos-sync type regsync does not serve)', { ...beijing, clusterType: 'CS' }, /regsync does not support clusterType CS; supported types: NACOS, ZK, CONSUL, EUREKA/],
    ['an unknown type', { ...beijing, clusterType: 'ETCD' }, /clusterType ETCD does not exist; supported types: NACOS, ZK, CONSUL, EUREKA/],
    ['a lower-case type (ids hash the exact type)', { ...beijing, clusterType: 'nacos' }, /clusterType nacos does not exist/],
    ['no connect keys', { ...beijing, connectKeyList: [] }, /connectKeyList is empty/],
    ['no name', { clusterType: 'NACOS', connectKeyList: ['n:1'] }, /clusterName and clusterType must not be empty/],
    ['a blank type', { ...beijing, clusterType: ' ' }, /clusterName and clusterType must not be empty/],
    ['a port out of range', { ...beijing, connectKeyList: ['n:65536'] }, /connectKeyList entry n:65536 must be host:port/],
    ['https', { ...beijing, connectKeyList: ['https://n:8848'] }, /https:\/\/ is not supported/],
    ['a context path', { ...beijing, connectKeyList: ['n:8848/nacos'] }, /paths and parameters are not supported/],
    ['a namespace with whitespace', { ...beijing, namespace: 'a b' }, /namespace must be 1 to 128 characters/],
    ['an unknown field', { ...beijing, clusterId: 'x' }, /body\.clusterId is not a known field/],
    ['connectKeyList as a string', { ...beijing, connectKeyList: '10.0.0.1:8848' }, /body\.connectKeyList must be array/],
    ['a numeric name', { ...beijing, clusterName: 7 }, /body\.clusterName must be string/],
    ['a JSON array', [beijing], /body must be object/],
    // The kind's own endpoint rules, as the native API runs them.
    ['a ZooKeeper server by IPv6 address', { clusterName: 'zk6', clusterType: 'ZK', connectKeyList: ['[::1]:2181'] }, /^connectKeyList: .*IPv6 literal/],
  ];
  for (const [what, payload, message] of refused) {
    it(`answers success: false for ${what} and stores nothing`, async () => {
      const before = await h.snapshot();
      expectFailure(await addCluster(payload as Record<string, unknown>), message);
      expect(await h.snapshot()).toEqual(before);
      expect(h.control.calls).toEqual([]);
    });
  }

  it('answers body-level problems with their HTTP status, in nacos-sync\'s shape', async () => {
    const before = await h.snapshot();
    expectFailure(await h.inject({ method: 'POST', url: '/v1/cluster/add', headers: { 'content-type': 'application/json' }, payload: '{"clusterName":' }), /not valid JSON/, 400);
    expectFailure(
      await h.inject({ method: 'POST', url: '/v1/cluster/add', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'clusterName=x' }),
      /application\/json/,
      415,
    );
    expectFailure(await postJson('/v1/cluster/add', { ...beijing, clusterName: 'x'.repeat(70 * 1024) }), /larger than/, 413);
    expect(await h.snapshot()).toEqual(before);
  });
});

describe('GET /v1/cluster/list, /v1/cluster/detail, /v1/cluster/types', () => {
  it('lists clusters as ClusterModels with paging counters and a name filter; native clusters show their id as name', async () => {
    expectOk(await addCluster(shanghai));
    expectOk(await addCluster(beijing));
    await h.store.putCluster(spec('k8s', { kind: 'kubernetes', endpoints: [] }));

    const all = expectOk(await get('/v1/cluster/list?pageNum=1&pageSize=10'), ['clusterModels', 'totalPage', 'totalSize', 'currentSize']);
    expect(all).toMatchObject({ totalPage: 1, totalSize: 3, currentSize: 3 });
    expect(all.clusterModels).toEqual(
      expect.arrayContaining([
        {
          clusterId: SHANGHAI,
          connectKeyList: '["10.1.0.10:8848","10.1.0.11:8848"]',
          clusterName: 'shanghai',
          clusterType: 'NACOS',
          namespace: 'dev',
          userName: 'sync',
        },
        { clusterId: BEIJING, connectKeyList: '["10.2.0.10:8848"]', clusterName: 'beijing', clusterType: 'NACOS', namespace: null, userName: null },
        { clusterId: 'k8s', connectKeyList: '[]', clusterName: 'k8s', clusterType: 'KUBERNETES', namespace: null, userName: null },
      ]),
    );

    const second = expectOk(await get('/v1/cluster/list?pageNum=2&pageSize=2'), ['clusterModels', 'totalPage', 'totalSize', 'currentSize']);
    expect(second).toMatchObject({ totalPage: 2, totalSize: 3, currentSize: 1 });
    const filtered = expectOk(await get('/v1/cluster/list?pageNum=1&pageSize=10&clusterName=HAI&_=123'), ['clusterModels', 'totalPage', 'totalSize', 'currentSize']);
    expect(filtered.clusterModels.map((m: { clusterName: string }) => m.clusterName)).toEqual(['shanghai']);
    // No paging parameters: page 1 of 10.
    expect(expectOk(await get('/v1/cluster/list'), ['clusterModels', 'totalPage', 'totalSize', 'currentSize']).currentSize).toBe(3);
    expectFailure(await get('/v1/cluster/list?pageNum=0&pageSize=10'), /pageNum must be a whole number from 1/);
  });

  it('shows one cluster, and says which one is missing', async () => {
    expectOk(await addCluster(shanghai));
    const detail = expectOk(await get(`/v1/cluster/detail?clusterId=${SHANGHAI}`), ['clusterModel']);
    expect(detail.clusterModel).toMatchObject({ clusterId: SHANGHAI, clusterName: 'shanghai', clusterType: 'NACOS', userName: 'sync' });
    expect(Object.keys(detail.clusterModel)).not.toContain('password');
    expectFailure(await get('/v1/cluster/detail?clusterId=nope'), /no cluster nope/);
    expectFailure(await get('/v1/cluster/detail'), /clusterId is required/);
  });

  it('lists the cluster types regsync serves', async () => {
    expect(expectOk(await get('/v1/cluster/types'), ['types']).types).toEqual(['NACOS', 'ZK', 'CONSUL', 'EUREKA']);
  });
});

describe('DELETE /v1/cluster/delete', () => {
  it('deletes an unused cluster and tells the engine; a missing one is a success that says so', async () => {
    expectOk(await addCluster(beijing));
    h.control.reset();
    expectOk(await del(`/v1/cluster/delete?clusterId=${BEIJING}`));
    expect(await h.store.getCluster(BEIJING)).toBeUndefined();
    expect(h.control.calls).toEqual([{ method: 'clusterChanged', id: BEIJING }]);
    expectOk(await del(`/v1/cluster/delete?clusterId=${BEIJING}`), [], `no cluster ${BEIJING}; nothing to delete`);
    expectFailure(await del('/v1/cluster/delete'), /clusterId is required/);
  });

  it('refuses to delete a cluster a task uses, naming the task', async () => {
    expectOk(await addCluster(shanghai));
    expectOk(await addCluster(beijing));
    await h.store.createTask(task('t1'));
    const before = await h.snapshot();
    expectFailure(await del(`/v1/cluster/delete?clusterId=${BEIJING}`), new RegExp(`cluster ${BEIJING} is used by task t1; delete it first`));
    expect(await h.snapshot()).toEqual(before);
  });
});

describe('POST /v1/task/add and /v1/task/addAll', () => {
  beforeEach(async () => {
    expectOk(await addCluster(shanghai));
    expectOk(await addCluster(beijing));
    h.control.reset();
  });

  const addTask = (payload: Record<string, unknown>) => postJson('/v1/task/add', payload);
  const orders = { sourceClusterId: SHANGHAI, destClusterId: BEIJING, serviceName: 'orders', groupName: 'DEFAULT_GROUP' };
  const ordersId = nacosSyncTaskId('orders', 'DEFAULT_GROUP', SHANGHAI, BEIJING);

  it('creates a regsync task under nacos-sync\'s task id, in the source cluster\'s namespace, and tells the engine', async () => {
    let storedWhenTold: TaskSpec | undefined;
    h.control.onCall = async (call) => {
      storedWhenTold = await h.store.getTask(call.id);
    };
    expectOk(await addTask(orders));
    const stored = await h.store.getTask(ordersId);
    expect(stored).toMatchObject({ id: ordersId, source: SHANGHAI, destination: BEIJING, service: 'orders', group: 'DEFAULT_GROUP', namespace: 'dev', options: {}, state: 'running' });
    expect(h.control.calls).toEqual([{ method: 'taskChanged', id: ordersId }]);
    expect(storedWhenTold).toEqual(stored);
    // The native API shows it.
    expect((await get(`/api/v1/tasks/${ordersId}`)).json()).toMatchObject({ id: ordersId, service: 'orders', state: 'running' });
  });

  it('takes nameSpace, and hashes a missing groupName as Java does ("null") while syncing DEFAULT_GROUP', async () => {
    expectOk(await addTask({ sourceClusterId: BEIJING, destClusterId: SHANGHAI, serviceName: 'users', nameSpace: 'prod', version: '' }));
    const id = nacosSyncTaskId('users', null, BEIJING, SHANGHAI);
    expect(await h.store.getTask(id)).toMatchObject({ service: 'users', group: 'DEFAULT_GROUP', namespace: 'prod' });
  });

  it('is idempotent, and runs a paused task again, as nacos-sync sets an existing task back to SYNC', async () => {
    expectOk(await addTask(orders));
    const first = await h.store.getTask(ordersId);
    h.control.reset();
    expectOk(await addTask(orders));
    expect(await h.store.getTask(ordersId)).toEqual(first);
    expect(h.control.calls).toEqual([]);

    await h.store.setTaskState(ordersId, 'paused');
    expectOk(await addTask(orders));
    expect((await h.store.getTask(ordersId))?.state).toBe('running');
    expect(h.control.calls).toEqual([{ method: 'taskChanged', id: ordersId }]);
  });

  it('addAll creates one task of every service of every group, with the id /v1/task/add gives "*"/"*"', async () => {
    expectOk(await postJson('/v1/task/addAll', { sourceClusterId: SHANGHAI, destClusterId: BEIJING, excludeConsumer: true }));
    const id = nacosSyncTaskId('*', '*', SHANGHAI, BEIJING);
    expect(await h.store.getTask(id)).toMatchObject({ service: '*', group: '*', namespace: 'dev', options: {} });
    expect(h.control.calls).toEqual([{ method: 'taskChanged', id }]);
    expectOk(await addTask({ ...orders, serviceName: '*', groupName: '*' }));
    expectOk(await postJson('/v1/task/addAll', { sourceClusterId: SHANGHAI, destClusterId: BEIJING }));
    expect((await h.store.listTasks()).map((t) => t.id)).toEqual([id]);
    // Asking for the consumers' entries too is another task: refused while this one exists.
    expectFailure(
      await postJson('/v1/task/addAll', { sourceClusterId: SHANGHAI, destClusterId: BEIJING, excludeConsumer: false }),
      new RegExp(`task ${id} already exists with another options.exclude; delete it first`),
    );
  });

  it('addAll with excludeConsumer false syncs Dubbo consumer entries too (no exclusion)', async () => {
    expectOk(await postJson('/v1/task/addAll', { sourceClusterId: BEIJING, destClusterId: SHANGHAI, excludeConsumer: false }));
    expect(await h.store.getTask(nacosSyncTaskId('*', '*', BEIJING, SHANGHAI))).toMatchObject({ service: '*', group: '*', options: { exclude: [] } });
  });

  it('keeps settings changed through the native API when a script adds the task again', async () => {
    expectOk(await addTask(orders));
    const changed = await h.inject({
      method: 'PUT',
      url: `/api/v1/tasks/${ordersId}`,
      payload: { source: SHANGHAI, destination: BEIJING, service: 'orders', namespace: 'dev', options: { fullSyncIntervalMs: 5000 } },
    });
    expect(changed.statusCode, changed.payload).toBe(200);
    expectOk(await addTask(orders));
    expect((await h.store.getTask(ordersId))?.options).toEqual({ fullSyncIntervalMs: 5000 });
  });

  it('refuses a selector another task (created natively) already syncs, naming it', async () => {
    await h.store.createTask(task('native-orders', { service: 'orders', namespace: 'dev' }));
    const before = await h.snapshot();
    expectFailure(await addTask(orders), new RegExp(`task native-orders already syncs dev/DEFAULT_GROUP/orders from ${SHANGHAI} to ${BEIJING}`));
    expect(await h.snapshot()).toEqual(before);
  });

  const refused: [string, string, unknown, RegExp][] = [
    ['an unknown source', '/v1/task/add', { ...orders, sourceClusterId: 'nope' }, /no cluster for source nope/],
    ['the same cluster twice', '/v1/task/add', { ...orders, destClusterId: SHANGHAI }, /source and destination are both/],
    ['a version', '/v1/task/add', { ...orders, version: '1.0.0' }, /version is not supported/],
    ['a missing serviceName', '/v1/task/add', { sourceClusterId: SHANGHAI, destClusterId: BEIJING }, /body\.serviceName is required/],
    ['a serviceName with a space', '/v1/task/add', { ...orders, serviceName: 'my orders' }, /body\.serviceName must be a service name without whitespace/],
    ['a group with a space', '/v1/task/add', { ...orders, groupName: 'A B' }, /groupName must be 1 to 128 characters without whitespace/],
    ['a nameSpace with a space', '/v1/task/add', { ...orders, nameSpace: 'a b' }, /nameSpace must be 1 to 128 characters without whitespace/],
    ['an unknown field', '/v1/task/add', { ...orders, taskId: 'x' }, /body\.taskId is not a known field/],
    ['a null source', '/v1/task/add', { ...orders, sourceClusterId: null }, /body\.sourceClusterId must be string/],
    ['addAll to an unknown destination', '/v1/task/addAll', { sourceClusterId: SHANGHAI, destClusterId: 'gone' }, /no cluster for destination gone/],
    ['addAll with an unknown field', '/v1/task/addAll', { sourceClusterId: SHANGHAI, destClusterId: BEIJING, serviceName: 'x' }, /body\.serviceName is not a known field/],
  ];
  for (const [what, url, payload, message] of refused) {
    it(`answers success: false for ${what} and stores nothing`, async () => {
      const before = await h.snapshot();
      expectFailure(await postJson(url, payload), message);
      expect(await h.snapshot()).toEqual(before);
      expect(h.control.calls).toEqual([]);
    });
  }
});

describe('GET /v1/task/list, /v1/task/detail', () => {
  beforeEach(async () => {
    await h.store.putCluster(spec(SHANGHAI));
    await h.store.putCluster(spec(BEIJING));
    await h.store.createTask(task('t-old', { service: 'orders', createdAt: '2024-01-01T00:00:00.000Z' }));
    await h.store.createTask(task('t-mid', { service: 'users', createdAt: '2024-01-02T00:00:00.000Z', state: 'paused' }));
    await h.store.createTask(task('t-new', { service: 'orders-v2', group: 'PAY', createdAt: '2024-01-03T00:00:00.000Z' }));
  });

  const listFields = ['taskModels', 'totalPage', 'totalSize', 'currentSize'];

  it('lists TaskModels newest first, with paging counters and a serviceName filter', async () => {
    const all = expectOk(await get('/v1/task/list?pageNum=1&pageSize=10'), listFields);
    expect(all).toMatchObject({ totalPage: 1, totalSize: 3, currentSize: 3 });
    expect(all.taskModels).toEqual([
      { taskId: 't-new', sourceClusterId: SHANGHAI, destClusterId: BEIJING, serviceName: 'orders-v2', groupName: 'PAY', taskStatus: 'SYNC' },
      { taskId: 't-mid', sourceClusterId: SHANGHAI, destClusterId: BEIJING, serviceName: 'users', groupName: 'DEFAULT_GROUP', taskStatus: 'PAUSED' },
      { taskId: 't-old', sourceClusterId: SHANGHAI, destClusterId: BEIJING, serviceName: 'orders', groupName: 'DEFAULT_GROUP', taskStatus: 'SYNC' },
    ]);
    const page2 = expectOk(await get('/v1/task/list?pageNum=2&pageSize=2'), listFields);
    expect(page2).toMatchObject({ totalPage: 2, totalSize: 3, currentSize: 1 });
    expect(page2.taskModels.map((t: { taskId: string }) => t.taskId)).toEqual(['t-old']);
    const orders = expectOk(await get('/v1/task/list?pageNum=1&pageSize=10&serviceName=ORDERS'), listFields);
    expect(orders.taskModels.map((t: { taskId: string }) => t.taskId)).toEqual(['t-new', 't-old']);
    expect(orders.totalSize).toBe(2);
    expectFailure(await get('/v1/task/list?pageSize=abc'), /pageSize must be a whole number/);
  });

  it('shows one task, and says which one is missing', async () => {
    expect(expectOk(await get('/v1/task/detail?taskId=t-mid'), ['taskModel']).taskModel).toEqual({
      taskId: 't-mid',
      sourceClusterId: SHANGHAI,
      destClusterId: BEIJING,
      serviceName: 'users',
      groupName: 'DEFAULT_GROUP',
      taskStatus: 'PAUSED',
    });
    expectFailure(await get('/v1/task/detail?taskId=nope'), /no task nope/);
    expectFailure(await get('/v1/task/detail?taskId='), /taskId is required/);
  });
});

describe('POST /v1/task/update, DELETE /v1/task/delete, DELETE /v1/task/deleteInBatch', () => {
  beforeEach(async () => {
    await h.store.putCluster(spec(SHANGHAI, { password: PASSWORD }));
    await h.store.putCluster(spec(BEIJING));
    for (const id of ['t1', 't2', 't3']) await h.store.createTask(task(id));
  });

  const update = (taskId: string, taskStatus: string) => postJson('/v1/task/update', { taskId, taskStatus });

  it('SYNC resumes a paused task, and reconciles a running one again', async () => {
    await h.store.setTaskState('t1', 'paused');
    expectOk(await update('t1', 'SYNC'));
    expect((await h.store.getTask('t1'))?.state).toBe('running');
    expect(h.control.calls).toEqual([{ method: 'taskChanged', id: 't1' }]);
    h.control.reset();
    expectOk(await update('t1', 'SYNC'));
    expect(h.control.calls).toEqual([{ method: 'resync', id: 't1' }]);
  });

  it('DELETE removes the copies while the task is still stored, then the task', async () => {
    let storedDuringRemoval: TaskSpec | undefined;
    h.control.onCall = async (call) => {
      if (call.method === 'removeTask') storedDuringRemoval = await h.store.getTask(call.id);
    };
    expectOk(await update('t1', 'DELETE'));
    expect(h.control.calls).toEqual([{ method: 'removeTask', id: 't1' }]);
    expect(storedDuringRemoval?.id).toBe('t1');
    expect(await h.store.getTask('t1')).toBeUndefined();
  });

  it('refuses an unknown status or task and changes nothing', async () => {
    const before = await h.snapshot();
    expectFailure(await update('t1', 'PAUSE'), /taskStatus must be SYNC or DELETE/);
    expectFailure(await update('t1', 'sync'), /taskStatus must be SYNC or DELETE/);
    expectFailure(await update('nope', 'SYNC'), /no task nope/);
    expectFailure(await postJson('/v1/task/update', { taskId: 't1' }), /body\.taskStatus is required/);
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });

  it('delete removes the copies then the task; a missing task is a success that says so', async () => {
    expectOk(await del('/v1/task/delete?taskId=t2'));
    expect(h.control.calls).toEqual([{ method: 'removeTask', id: 't2' }]);
    expect(await h.store.getTask('t2')).toBeUndefined();
    expectOk(await del('/v1/task/delete?taskId=t2'), [], 'no task t2; nothing to delete');
    expectFailure(await del('/v1/task/delete'), /taskId is required/);
  });

  it('takes parameters from a form body, and ignores any other body, as Spring does on a DELETE', async () => {
    const json = { 'content-type': 'application/json' };
    expectOk(await h.inject({ method: 'DELETE', url: '/v1/task/delete?taskId=t1', headers: json }));
    expectOk(await h.inject({ method: 'DELETE', url: '/v1/task/delete?taskId=t2', headers: json, payload: '{"taskId":"t3"}' }));
    expect((await h.store.listTasks()).map((t) => t.id)).toEqual(['t3']);
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    expectOk(await h.inject({ method: 'DELETE', url: '/v1/task/deleteInBatch', headers: form, payload: 'taskIds=t3' }));
    expect(await h.store.listTasks()).toEqual([]);
    expectOk(await h.inject({ method: 'DELETE', url: '/v1/cluster/delete', headers: form, payload: `clusterId=${BEIJING}` }));
    expect(await h.store.getCluster(BEIJING)).toBeUndefined();
    // The query's value comes first, as with Spring's getParameter.
    expectOk(await h.inject({ method: 'DELETE', url: '/v1/cluster/delete?clusterId=nope', headers: form, payload: `clusterId=${SHANGHAI}` }), [], 'no cluster nope; nothing to delete');
    expect(await h.store.getCluster(SHANGHAI)).toBeDefined();
  });

  it('keeps the task when its copies cannot be removed, with the passwords masked', async () => {
    h.control.failures.removeTask = new Error(`login failed with ${PASSWORD}`);
    const before = await h.snapshot();
    expectFailure(await del('/v1/task/delete?taskId=t1'), /removing the instances task t1 wrote failed: login failed with \*{8}; the task is kept/);
    expectFailure(await update('t1', 'DELETE'), /removing the instances task t1 wrote failed/);
    expect(await h.snapshot()).toEqual(before);
  });

  it('deleteInBatch takes repeated and comma-separated ids, removing copies first; unknown ids are ignored', async () => {
    expectOk(await del('/v1/task/deleteInBatch?taskIds=t1,nope&taskIds=t3'), [], 'no task nope; nothing to delete there');
    expect(h.control.calls).toEqual([
      { method: 'removeTask', id: 't1' },
      { method: 'removeTask', id: 't3' },
    ]);
    expect((await h.store.listTasks()).map((t) => t.id)).toEqual(['t2']);
    expectFailure(await del('/v1/task/deleteInBatch'), /taskIds is required/);
    expectFailure(await del('/v1/task/deleteInBatch?taskIds=,'), /taskIds is required/);
  });

  it('deleteInBatch stops at the first failed cleanup and says what was deleted and what was not tried', async () => {
    h.control.onCall = (call) => {
      h.control.failures.removeTask = call.id === 't2' ? new Error('destination down') : undefined;
    };
    expectFailure(await del('/v1/task/deleteInBatch?taskIds=t1&taskIds=t2&taskIds=t3'), /^deleted t1; removing the instances task t2 wrote failed: destination down.*; not tried: t3$/);
    expect((await h.store.listTasks()).map((t) => t.id)).toEqual(['t2', 't3']);
  });
});

describe('the native API next to it', () => {
  it('keeps its own error shape', async () => {
    expectError(await get('/api/v1/clusters/nope'), 404, 'cluster_not_found');
    expectError(await get('/v1/cluster/nothing'), 404, 'not_found');
  });
});
