import type { Redis } from 'ioredis';
import { beforeEach, describe, expect, it } from 'vitest';
import { parseServiceSyncKey, serviceSyncKey, type ClusterSpec, type TaskSpec } from '../model/index.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { RegsyncStore, StoreError, type ServiceStatus } from './index.js';

let redis: Redis;
let prefix: string;
let store: RegsyncStore;
const redisServer = redisPerTest({ appendonly: true });
const connect = (): Redis => redisServer.connect();

beforeEach(() => {
  redis = redisServer.redis;
  prefix = redisServer.prefix;
  store = new RegsyncStore(redis, prefix);
});

function cluster(id: string, extra: Partial<ClusterSpec> = {}): ClusterSpec {
  return { id, kind: 'nacos', endpoints: ['127.0.0.1:8848'], labels: { region: 'eu' }, options: {}, ...extra };
}

function task(id: string, extra: Partial<TaskSpec> = {}): TaskSpec {
  return {
    id,
    source: 'a',
    destination: 'b',
    service: `svc-${id}`,
    group: 'DEFAULT_GROUP',
    namespace: 'public',
    options: {},
    state: 'running',
    createdAt: '2024-01-01T00:00:00.000Z',
    ...extra,
  };
}

function status(name: string, extra: Partial<ServiceStatus> = {}): ServiceStatus {
  return {
    service: { namespace: 'public', group: 'DEFAULT_GROUP', name },
    sourceInstances: 2,
    destinationInstances: 2,
    lastSyncAt: '2024-01-01T00:00:01.000Z',
    lagMs: 12,
    lastError: null,
    ...extra,
  };
}

async function keysOfPrefix(): Promise<string[]> {
  return (await redis.keys(`${prefix}:*`)).sort();
}

describe('clusters', () => {
  it('puts, gets, lists sorted by id and deletes', async () => {
    await store.putCluster(cluster('zeta'));
    await store.putCluster(cluster('alpha', { password: 'pw', username: 'nacos', namespace: 'dev' }));
    await store.putCluster(cluster('mid', { kind: 'zookeeper' }));

    expect(await store.getCluster('alpha')).toEqual(
      cluster('alpha', { password: 'pw', username: 'nacos', namespace: 'dev' }),
    );
    expect(await store.getCluster('nope')).toBeUndefined();
    expect((await store.listClusters()).map((c) => c.id)).toEqual(['alpha', 'mid', 'zeta']);

    expect(await store.deleteCluster('mid')).toBe(true);
    expect(await store.deleteCluster('mid')).toBe(false);
    expect((await store.listClusters()).map((c) => c.id)).toEqual(['alpha', 'zeta']);
    expect(await redis.smembers(`${prefix}:clusters`)).not.toContain('mid');
  });

  it('replaces on put and stores only ClusterSpec fields', async () => {
    await store.putCluster(cluster('c1'));
    await store.putCluster({ ...cluster('c1', { endpoints: ['10.0.0.1:8848', '10.0.0.2:8848'] }), extra: 1 } as ClusterSpec);
    expect(await store.getCluster('c1')).toEqual(cluster('c1', { endpoints: ['10.0.0.1:8848', '10.0.0.2:8848'] }));
    expect(await store.listClusters()).toHaveLength(1);
  });

  it('creates atomically: exactly one of many concurrent creators wins', async () => {
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => store.createCluster(cluster('c1', { labels: { n: String(i) } }))),
    );
    expect(results.filter((r) => r === 'created')).toHaveLength(1);
    expect(results.filter((r) => r === 'exists')).toHaveLength(9);
    const winner = results.indexOf('created');
    expect((await store.getCluster('c1'))?.labels).toEqual({ n: String(winner) });
    expect(await redis.smembers(`${prefix}:clusters`)).toEqual(['c1']);
  });

  it('says whether a put created, replaced or changed nothing, deciding atomically', async () => {
    const puts = await Promise.all(Array.from({ length: 8 }, (_, i) => store.putCluster(cluster('c1', { labels: { n: String(i) } }))));
    expect(puts.filter((r) => r === 'created')).toHaveLength(1);
    expect(puts.filter((r) => r === 'created' || r === 'replaced')).toHaveLength(8);
    const spec = cluster('c2', { labels: { b: '2', a: '1' }, options: { z: { y: 1, x: [2, 1] }, a: true } });
    expect(await store.putCluster(spec)).toBe('created');
    expect(await store.putCluster({ ...spec, labels: { a: '1', b: '2' }, options: { a: true, z: { x: [2, 1], y: 1 } } })).toBe('unchanged');
    expect(await store.putCluster({ ...spec, options: { a: true, z: { x: [1, 2], y: 1 } } })).toBe('replaced');
  });

  it('keeps stores with different prefixes apart', async () => {
    const other = new RegsyncStore(redis, `${prefix}-other`);
    await store.putCluster(cluster('c1'));
    expect(await other.listClusters()).toEqual([]);
    expect(await other.getCluster('c1')).toBeUndefined();
  });
});

describe('tasks', () => {
  it('creates by id once and lists sorted by id', async () => {
    expect(await store.createTask(task('t2'))).toBe('created');
    expect(await store.createTask(task('t1'))).toBe('created');
    expect(await store.createTask(task('t2', { service: 'other' }))).toBe('exists');
    expect((await store.getTask('t2'))?.service).toBe('svc-t2');
    expect((await store.listTasks()).map((t) => t.id)).toEqual(['t1', 't2']);
    expect(await store.getTask('nope')).toBeUndefined();
  });

  it('refuses a second task with the same selector and finds the owner', async () => {
    await store.createTask(task('t1', { service: 'orders' }));
    expect(await store.createTask(task('t2', { service: 'orders' }))).toBe('exists');
    expect(await store.getTask('t2')).toBeUndefined();
    expect(await store.findTaskBySelector(task('x', { service: 'orders' }))).toMatchObject({ id: 't1' });
    expect(await store.findTaskBySelector(task('x', { service: 'orders', group: 'G2' }))).toBeUndefined();
    // A different part of the selector makes it different work.
    expect(await store.createTask(task('t3', { service: 'orders', destination: 'c' }))).toBe('created');
  });

  it('creates atomically under concurrency, by id and by selector', async () => {
    const sameId = await Promise.all(Array.from({ length: 8 }, (_, i) => store.createTask(task('t1', { service: `s${i}` }))));
    expect(sameId.filter((r) => r === 'created')).toHaveLength(1);
    const sameSelector = await Promise.all(
      Array.from({ length: 8 }, (_, i) => store.createTask(task(`u${i}`, { service: 'shared' }))),
    );
    expect(sameSelector.filter((r) => r === 'created')).toHaveLength(1);
    expect(await store.listTasks()).toHaveLength(2);
  });

  it('creates a batch of tasks whole or not at all', async () => {
    await store.createTask(task('taken', { service: 'taken' }));
    expect(await store.createTasks([task('b1'), task('b2'), task('taken', { service: 'x' })])).toEqual({ result: 'exists', index: 2 });
    expect(await store.createTasks([task('b1'), task('b2', { service: 'taken' }), task('b3')])).toEqual({ result: 'exists', index: 1 });
    expect((await store.listTasks()).map((t) => t.id)).toEqual(['taken']);
    expect(await store.createTasks([task('b1'), task('b2')])).toEqual({ result: 'created' });
    expect((await store.listTasks()).map((t) => t.id)).toEqual(['b1', 'b2', 'taken']);
    expect(await store.findTaskBySelector(task('x', { service: 'svc-b2' }))).toMatchObject({ id: 'b2' });
  });

  it('replaces only over the version read, and says when nothing changed', async () => {
    expect(await store.replaceTask(task('t1'), undefined)).toBe('created');
    expect(await store.replaceTask(task('t1'), undefined)).toBe('changed');
    const read = await store.getVersionedTask('t1');
    expect(read?.spec).toEqual(task('t1'));
    expect(await store.replaceTask(task('t1'), read?.version)).toBe('unchanged');
    expect(await store.putTask(task('t1', { options: { maxServices: 5 } }))).toBe('replaced');
    expect(await store.replaceTask(task('t1', { options: { maxServices: 6 } }), read?.version)).toBe('changed');
    expect((await store.getTask('t1'))?.options).toEqual({ maxServices: 5 });
    expect(await store.putTask(task('t1', { options: { maxServices: 5 } }))).toBe('unchanged');
  });

  it('puts: replaces, moves the selector, refuses one taken by another task', async () => {
    await store.createTask(task('t1', { service: 'orders' }));
    await store.createTask(task('t2', { service: 'users' }));

    await store.putTask(task('t1', { service: 'payments', options: { fullSyncIntervalMs: 5000 } }));
    expect(await store.getTask('t1')).toEqual(task('t1', { service: 'payments', options: { fullSyncIntervalMs: 5000 } }));
    // The old selector is free again, the new one is taken.
    expect(await store.findTaskBySelector(task('x', { service: 'orders' }))).toBeUndefined();
    expect(await store.createTask(task('t3', { service: 'orders' }))).toBe('created');

    const error = await store.putTask(task('t1', { service: 'users' })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).code).toBe('duplicate_task');
    expect((await store.getTask('t1'))?.service).toBe('payments');

    await store.putTask(task('t9'));
    expect((await store.listTasks()).map((t) => t.id)).toEqual(['t1', 't2', 't3', 't9']);
  });

  it('sets the state and answers the task, or undefined for an unknown task', async () => {
    await store.createTask(task('t1'));
    expect(await store.setTaskState('t1', 'paused')).toEqual(task('t1', { state: 'paused' }));
    expect((await store.getTask('t1'))?.state).toBe('paused');
    expect(await store.setTaskState('t1', 'paused')).toEqual(task('t1', { state: 'paused' }));
    expect(await store.setTaskState('t1', 'running')).toEqual(task('t1'));
    expect(await store.setTaskState('nope', 'paused')).toBeUndefined();
    expect(await store.getTask('nope')).toBeUndefined();
  });

  it('never loses a concurrent put when setting the state', async () => {
    await store.createTask(task('t1'));
    await Promise.all([
      store.setTaskState('t1', 'paused'),
      store.putTask(task('t1', { options: { fullSyncIntervalMs: 9000 } })),
    ]);
    const t = await store.getTask('t1');
    // Whatever the order, the put's options survive (the state change either re-read them or was overwritten).
    expect(t?.options).toEqual({ fullSyncIntervalMs: 9000 });
  });

  it('finds the tasks using a cluster, as source or destination', async () => {
    await store.createTask(task('t1', { source: 'a', destination: 'b' }));
    await store.createTask(task('t2', { source: 'b', destination: 'c' }));
    await store.createTask(task('t3', { source: 'c', destination: 'd' }));
    expect((await store.tasksUsingCluster('b')).map((t) => t.id)).toEqual(['t1', 't2']);
    expect(await store.tasksUsingCluster('z')).toEqual([]);
  });

  it('deletes a task with its statuses, error and selector, leaving no key behind', async () => {
    await store.createTask(task('t1', { service: 'orders' }));
    await store.putServiceStatus('t1', status('orders'));
    await store.setTaskError('t1', { code: 'task_unstartable', message: 'boom' });

    expect(await store.deleteTask('t1')).toBe(true);
    expect(await store.deleteTask('t1')).toBe(false);
    expect(await store.getTask('t1')).toBeUndefined();
    expect(await store.listServiceStatus('t1')).toEqual([]);
    expect(await store.getTaskError('t1')).toBeNull();
    expect(await keysOfPrefix()).toEqual([]);
    expect(await store.createTask(task('t2', { service: 'orders' }))).toBe('created');
  });
});

describe('status', () => {
  it('keeps why instances were not copied, the causes of problems and the addresses a release removes', async () => {
    await store.createTask(task('t1'));
    const held = { removes: 2, copies: 4, since: '2024-01-01T00:00:00.000Z', confirm: 'read' as const, addresses: ['10.0.0.1:80#DEFAULT', '10.0.0.2:80#DEFAULT'] };
    const problems = [{ code: 'destination_unreadable' as const, side: 'destination' as const, cluster: 'b', message: 'no', cause: 'nacos-auth-failed' }];
    await store.putServiceStatus('t1', status('orders', { held, problems, skipped: { unhealthy: 2, marked: 1 } }));
    expect((await store.listServiceStatus('t1'))[0]).toMatchObject({ held, problems, skipped: { unhealthy: 2, marked: 1 } });
  });

  it('puts, lists sorted by service and deletes per service', async () => {
    await store.createTask(task('t1'));
    await store.putServiceStatus('t1', status('zeta'));
    await store.putServiceStatus('t1', status('alpha', { lastError: 'refused', lastSyncAt: null, lagMs: null }));
    await store.putServiceStatus('t1', status('b', { service: { namespace: 'dev', group: 'G', name: 'b' } }));
    await store.putServiceStatus('t1', status('zeta', { sourceInstances: 5 }));

    const listed = await store.listServiceStatus('t1');
    expect(listed.map((s) => `${s.service.namespace}/${s.service.group}/${s.service.name}`)).toEqual([
      'dev/G/b',
      'public/DEFAULT_GROUP/alpha',
      'public/DEFAULT_GROUP/zeta',
    ]);
    expect(listed[1]).toEqual(status('alpha', { lastError: 'refused', lastSyncAt: null, lagMs: null }));
    expect(listed[2]?.sourceInstances).toBe(5);

    expect(await store.getServiceStatus('t1', { namespace: 'dev', group: 'G', name: 'b' })).toEqual(listed[0]);
    expect(await store.getServiceStatus('t1', { namespace: 'dev', group: 'G', name: 'nope' })).toBeUndefined();
    // Many at once (one HMGET), in the order asked, undefined where there is none.
    expect(
      await store.getServiceStatuses('t1', [
        { namespace: 'public', group: 'DEFAULT_GROUP', name: 'zeta' },
        { namespace: 'dev', group: 'G', name: 'nope' },
        { namespace: 'dev', group: 'G', name: 'b' },
      ]),
    ).toEqual([listed[2], undefined, listed[0]]);
    expect(await store.getServiceStatuses('t1', [])).toEqual([]);
    await store.putServiceStatus('t1', status('digested', { sourceDigest: 'abc' }));
    expect((await store.getServiceStatus('t1', { namespace: 'public', group: 'DEFAULT_GROUP', name: 'digested' }))?.sourceDigest).toBe('abc');
    await store.deleteServiceStatus('t1', { namespace: 'public', group: 'DEFAULT_GROUP', name: 'digested' });
    // The service sync keys, as the engine builds them, from the field names alone.
    expect((await store.statusKeys('t1')).sort()).toEqual(
      listed.map((st) => serviceSyncKey({ taskId: 't1', service: st.service })).sort(),
    );

    await store.deleteServiceStatus('t1', { namespace: 'public', group: 'DEFAULT_GROUP', name: 'zeta' });
    expect(await store.listServiceStatus('t1')).toHaveLength(2);
    await store.deleteServiceStatus('t1', { namespace: 'public', group: 'DEFAULT_GROUP', name: 'zeta' });
    expect(await store.listServiceStatus('t1')).toHaveLength(2);
  });

  it('keeps names with slashes apart', async () => {
    await store.createTask(task('t1'));
    await store.putServiceStatus('t1', status('x', { service: { namespace: 'a/b', group: 'c', name: 'd' } }));
    await store.putServiceStatus('t1', status('x', { service: { namespace: 'a', group: 'b/c', name: 'd' } }));
    expect(await store.listServiceStatus('t1')).toHaveLength(2);
    expect((await store.statusKeys('t1')).map((k) => parseServiceSyncKey(k).service).sort((x, y) => x.namespace.localeCompare(y.namespace))).toEqual([
      { namespace: 'a', group: 'b/c', name: 'd' },
      { namespace: 'a/b', group: 'c', name: 'd' },
    ]);
  });

  it('writes nothing for a task that does not exist', async () => {
    await store.putServiceStatus('ghost', status('orders'));
    await store.setTaskError('ghost', { code: 'task_unstartable', message: 'boom' });
    expect(await store.listServiceStatus('ghost')).toEqual([]);
    expect(await store.getTaskError('ghost')).toBeNull();
    expect(await keysOfPrefix()).toEqual([]);
  });

  it('sets and clears the task error, with its cause', async () => {
    await store.createTask(task('t1'));
    expect(await store.getTaskError('t1')).toBeNull();
    await store.setTaskError('t1', { code: 'source_unlisted', cluster: 'a', message: 'source unreachable' });
    expect(await store.getTaskError('t1')).toBe('source unreachable');
    expect(await store.getTaskProblem('t1')).toEqual({ code: 'source_unlisted', cluster: 'a', message: 'source unreachable' });
    await store.setTaskError('t1', null);
    expect(await store.getTaskError('t1')).toBeNull();
    expect(await store.getTaskProblem('t1')).toBeNull();
  });

  it('reads a task error stored as plain text as a task_unstartable problem', async () => {
    await store.createTask(task('t1'));
    await redis.set(`${prefix}:task-error:t1`, 'cannot start: boom');
    expect(await store.getTaskProblem('t1')).toEqual({ code: 'task_unstartable', message: 'cannot start: boom' });
    expect(await store.getTaskError('t1')).toBe('cannot start: boom');
  });
});

describe('corrupt records', () => {
  it('throws a StoreError naming the key of invalid JSON', async () => {
    await redis.multi().set(`${prefix}:cluster:bad`, '{not json').sadd(`${prefix}:clusters`, 'bad').exec();
    const error = await store.getCluster('bad').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).code).toBe('corrupt_record');
    expect((error as StoreError).key).toBe(`${prefix}:cluster:bad`);
    expect((error as StoreError).message).toContain(`${prefix}:cluster:bad`);
    await expect(store.listClusters()).rejects.toThrow(`${prefix}:cluster:bad`);
  });

  it('throws for valid JSON of the wrong shape, or a record under another id', async () => {
    await redis.set(`${prefix}:task:t1`, JSON.stringify({ id: 't1', state: 'sleeping' }));
    await expect(store.getTask('t1')).rejects.toThrow(new RegExp(`${prefix}:task:t1 does not hold a valid task`));
    await redis.set(`${prefix}:task:t2`, JSON.stringify(task('t3')));
    await expect(store.getTask('t2')).rejects.toBeInstanceOf(StoreError);
    await redis.set(`${prefix}:cluster:c1`, JSON.stringify(cluster('c1', { labels: { n: 1 } as never })));
    await expect(store.getCluster('c1')).rejects.toBeInstanceOf(StoreError);
  });

  it('writes the statuses of one turn with one script per task, and keeps a write then a delete in that order', async () => {
    await store.createTask(task('t1'));
    await store.createTask(task('t2'));
    const scripts = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0) + Number(/cmdstat_eval:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
    const before = await scripts();
    const names = Array.from({ length: 40 }, (_, i) => `s${i}`);
    await Promise.all([
      ...names.map((name) => store.putServiceStatus('t1', status(name))),
      store.putServiceStatus('t2', status('only')),
      // A task that does not exist gets no status.
      store.putServiceStatus('gone', status('x')),
      // Named twice in one turn: the last write wins.
      store.putServiceStatus('t1', status('s0', { sourceInstances: 9 })),
    ]);
    expect(await scripts()).toBe(before + 3);
    const listed = await store.listServiceStatus('t1');
    expect(listed.map((s) => s.service.name).sort()).toEqual([...names].sort());
    expect(listed.find((s) => s.service.name === 's0')?.sourceInstances).toBe(9);
    expect((await store.listServiceStatus('t2')).map((s) => s.service.name)).toEqual(['only']);
    expect(await redis.exists(`${prefix}:task-status:gone`)).toBe(0);

    const written = store.putServiceStatus('t1', status('late'));
    await store.deleteServiceStatus('t1', status('late').service);
    await written;
    expect(await store.getServiceStatus('t1', status('late').service)).toBeUndefined();
  });

  it('throws for a corrupt service status, naming key and field', async () => {
    await store.createTask(task('t1'));
    await redis.hset(`${prefix}:task-status:t1`, 'public/DEFAULT_GROUP/x', '[]');
    await expect(store.listServiceStatus('t1')).rejects.toThrow(`${prefix}:task-status:t1 field public/DEFAULT_GROUP/x`);
  });
});

describe('durability', () => {
  it('gives everything back after a redis-server restart', async () => {
    await store.putCluster(cluster('a', { password: 'secret', username: 'u', namespace: 'dev' }));
    await store.putCluster(cluster('b', { kind: 'kubernetes', options: { context: 'prod' } }));
    await store.createTask(task('t1', { service: 'orders', options: { fullSyncIntervalMs: 60000 } }));
    await store.createTask(task('t2', { service: '*' }));
    await store.setTaskState('t2', 'paused');
    await store.putServiceStatus('t1', status('orders'));
    await store.setTaskError('t1', { code: 'task_unstartable', message: 'boom' });

    const before = {
      clusters: await store.listClusters(),
      tasks: await store.listTasks(),
      status: await store.listServiceStatus('t1'),
      error: await store.getTaskError('t1'),
    };
    redis.disconnect();
    await redisServer.server.restart();

    const after = new RegsyncStore(connect(), prefix);
    expect({
      clusters: await after.listClusters(),
      tasks: await after.listTasks(),
      status: await after.listServiceStatus('t1'),
      error: await after.getTaskError('t1'),
    }).toEqual(before);
    expect(before.tasks[1]?.state).toBe('paused');
    // The indexes came back too: the selector is still taken, the id too.
    expect(await after.createTask(task('t3', { service: 'orders', options: { fullSyncIntervalMs: 60000 } }))).toBe('exists');
    expect(await after.createTask(task('t1'))).toBe('exists');
    expect(await after.deleteTask('t1')).toBe(true);
    expect(await after.listServiceStatus('t1')).toEqual([]);
  });
});
