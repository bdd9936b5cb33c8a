import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import {
  addRegistry,
  api,
  copiesIn,
  instancesIn,
  registerNative,
  startFixture,
  startSync,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** How scripts written for nacos-sync compute its ids (`SkyWalkerUtil`): md5 of the fields joined by "_". */
function md5(...parts: string[]): string {
  return createHash('md5').update(parts.join('_')).digest('hex');
}

/**
 * A script written for nacos-sync's console API, run unchanged against regsync: two embedded
 * registries, regsync in-process, and only nacos-sync's routes and shapes (`/v1/cluster/*`,
 * `/v1/task/*`, `{success, resultCode, resultMessage, ...}`).
 */
describe('a script written for nacos-sync', () => {
  let fx: SyncFixture;
  let shanghai: RunningRegistry;
  let beijing: RunningRegistry;
  let url: string;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    shanghai = await addRegistry(fx, 'shanghai');
    beijing = await addRegistry(fx, 'beijing');
    url = (await startSync(fx)).url as string;
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await stopFixture(fx);
  });

  /** Calls nacos-sync's API the way its console and scripts do, and expects `success: true`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- scripts read answers loosely
  async function nacosSync(method: string, path: string, body?: unknown): Promise<any> {
    const res = await api(url, method, path, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body, `${method} ${path}`).toMatchObject({ success: true, resultCode: 'SUCCESS' });
    return res.body;
  }

  it('adds clusters and a task, sees the copy, deletes the task and its copies, deletes a cluster', async () => {
    // Clusters: POST /v1/cluster/add with a JSON body; GET /v1/cluster/types and /v1/cluster/list.
    expect((await nacosSync('GET', '/v1/cluster/types')).types).toContain('NACOS');
    await nacosSync('POST', '/v1/cluster/add', { clusterName: 'shanghai', clusterType: 'NACOS', connectKeyList: [shanghai.endpoint] });
    await nacosSync('POST', '/v1/cluster/add', { clusterName: 'beijing', clusterType: 'NACOS', connectKeyList: [beijing.endpoint] });
    const clusters = await nacosSync('GET', '/v1/cluster/list?pageNum=1&pageSize=10');
    expect(clusters.totalSize).toBe(2);
    const idOf = (name: string): string => clusters.clusterModels.find((c: { clusterName: string }) => c.clusterName === name).clusterId;
    // The ids are nacos-sync's: scripts that compute them keep working.
    expect(idOf('shanghai')).toBe(md5('shanghai', 'NACOS'));
    expect(idOf('beijing')).toBe(md5('beijing', 'NACOS'));
    const detail = await nacosSync('GET', `/v1/cluster/detail?clusterId=${idOf('beijing')}`);
    expect(detail.clusterModel).toMatchObject({ clusterName: 'beijing', clusterType: 'NACOS', connectKeyList: JSON.stringify([beijing.endpoint]) });

    // An instance nacos-sync once copied from beijing (its marks name beijing's nacos-sync id),
    // then one of shanghai's own: only the latter may reach beijing.
    natives.push(await registerNative(() => shanghai, 'orders', '10.40.0.2', 8080, { syncSource: 'NACOS', sourceClusterId: idOf('beijing') }));
    natives.push(await registerNative(() => shanghai, 'orders', '10.40.0.1', 8080, { app: 'orders' }));

    // Task: POST /v1/task/add; the task id is nacos-sync's.
    const taskId = md5('orders', 'DEFAULT_GROUP', idOf('shanghai'), idOf('beijing'));
    await nacosSync('POST', '/v1/task/add', { sourceClusterId: idOf('shanghai'), destClusterId: idOf('beijing'), serviceName: 'orders', groupName: 'DEFAULT_GROUP' });
    await waitUntil(() => copiesIn(beijing, 'orders').length === 1, { message: 'the copy in beijing' });
    expect(copiesIn(beijing, 'orders')[0]).toMatchObject({ ip: '10.40.0.1', port: 8080, healthy: true, metadata: { app: 'orders', [MARK_TASK]: taskId } });
    // The reconcile that wrote the copy read both instances; nacos-sync's own copy stayed out.
    expect(instancesIn(beijing, 'orders').map((i) => i.ip)).toEqual(['10.40.0.1']);

    const tasks = await nacosSync('GET', '/v1/task/list?pageNum=1&pageSize=10&serviceName=orders');
    expect(tasks).toMatchObject({ totalPage: 1, totalSize: 1, currentSize: 1 });
    expect(tasks.taskModels).toEqual([
      { taskId, sourceClusterId: idOf('shanghai'), destClusterId: idOf('beijing'), serviceName: 'orders', groupName: 'DEFAULT_GROUP', taskStatus: 'SYNC' },
    ]);
    expect((await nacosSync('GET', `/v1/task/detail?taskId=${taskId}`)).taskModel).toMatchObject({ taskId, taskStatus: 'SYNC' });

    // A cluster in use cannot go; nacos-sync's failure shape says why.
    const refused = await api(url, 'DELETE', `/v1/cluster/delete?clusterId=${idOf('beijing')}`);
    expect(refused.body).toMatchObject({ success: false, resultCode: 'SYSTEM_ERROR', resultMessage: expect.stringContaining(taskId) });

    // DELETE /v1/task/delete?taskId=: the copies go, then the task.
    await nacosSync('DELETE', `/v1/task/delete?taskId=${taskId}`);
    await waitUntil(() => copiesIn(beijing, 'orders').length === 0, { message: 'the copy removed from beijing' });
    expect((await nacosSync('GET', '/v1/task/list?pageNum=1&pageSize=10')).totalSize).toBe(0);
    expect((await api(url, 'GET', `/v1/task/detail?taskId=${taskId}`)).body).toMatchObject({ success: false });

    // POST /v1/task/addAll: every service of every group, Dubbo consumer entries left out.
    natives.push(await registerNative(() => shanghai, 'payments', '10.40.1.1', 8080));
    natives.push(await registerNative(() => shanghai, 'consumers:com.acme.Orders::', '10.40.1.2', 8080));
    await nacosSync('POST', '/v1/task/addAll', { sourceClusterId: idOf('shanghai'), destClusterId: idOf('beijing') });
    await waitUntil(() => copiesIn(beijing, 'orders').length === 1 && copiesIn(beijing, 'payments').length === 1, { message: 'every service copied' });
    expect(copiesIn(beijing, 'consumers:com.acme.Orders::')).toEqual([]);
    const all = await nacosSync('GET', '/v1/task/list?pageNum=1&pageSize=10');
    expect(all.taskModels).toHaveLength(1);
    await nacosSync('DELETE', `/v1/task/deleteInBatch?taskIds=${all.taskModels[0].taskId}`);
    await waitUntil(() => copiesIn(beijing, 'orders').length === 0 && copiesIn(beijing, 'payments').length === 0, { message: 'addAll copies removed' });

    // DELETE /v1/cluster/delete?clusterId=.
    await nacosSync('DELETE', `/v1/cluster/delete?clusterId=${idOf('beijing')}`);
    const left = await nacosSync('GET', '/v1/cluster/list?pageNum=1&pageSize=10');
    expect(left.clusterModels.map((c: { clusterName: string }) => c.clusterName)).toEqual(['shanghai']);
  });
});
