import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { clusterSpecOf, nacosSyncClusterId, nacosSyncTaskId } from '../nacos-sync/nacos-sync-wire.js';
import { expandString } from './apply-command.js';
import { ImportNacosSyncError } from './import-nacos-sync-error.js';
import { importRows, importYaml, readExportFiles } from './import-nacos-sync.js';
import { readSqlDump } from './import-nacos-sync-sql.js';

const CLUSTER_COLUMNS = '(cluster_id, cluster_name, cluster_type, connect_key_list, user_name, password, namespace)';
const TASK_COLUMNS = '(task_id, source_cluster_id, dest_cluster_id, service_name, group_name, name_space, version, task_status)';
const q = (v: string | null) => (v === null ? 'NULL' : `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`);
const clusterRow = (name: string, type: string, keys: string, more: { id?: string; user?: string; password?: string; namespace?: string } = {}) =>
  `(${[more.id ?? nacosSyncClusterId(name, type), name, type, keys, more.user ?? null, more.password ?? null, more.namespace ?? null].map(q).join(', ')})`;
const taskRow = (service: string, group: string | null, source: string, dest: string, more: { id?: string; namespace?: string; status?: string } = {}) =>
  `(${[more.id ?? nacosSyncTaskId(service, group, source, dest), source, dest, service, group, more.namespace ?? null, null, more.status ?? 'SYNC'].map(q).join(', ')})`;
const dump = (clusters: string[], tasks: string[]) =>
  [`INSERT INTO cluster ${CLUSTER_COLUMNS} VALUES ${clusters.join(',\n')};`, ...(tasks.length > 0 ? [`INSERT INTO task ${TASK_COLUMNS} VALUES ${tasks.join(',\n')};`] : [])].join('\n');

const A = nacosSyncClusterId('a', 'NACOS');
const B = nacosSyncClusterId('b', 'NACOS');

describe('importRows', () => {
  it('maps a cluster row as /v1/cluster/add would store it', async () => {
    const text = dump([clusterRow('a', 'NACOS', '["http://10.0.0.1", "10.0.0.2:8848"]', { user: 'u', password: 'p', namespace: 'ns' })], []);
    const result = await importRows(readSqlDump(text, 'd.sql').rows);
    const spec = clusterSpecOf({ clusterName: 'a', clusterType: 'NACOS', connectKeyList: ['http://10.0.0.1', '10.0.0.2:8848'], userName: 'u', password: 'p', namespace: 'ns' });
    expect(result.clusters).toEqual([{ id: spec.id, kind: spec.kind, endpoints: spec.endpoints, namespace: 'ns', username: 'u', password: 'p', options: spec.options }]);
    expect(result.problems).toEqual([]);
  });

  it('reports rows nacos-sync would not have written, or regsync cannot take, naming the column', async () => {
    const text = dump(
      [
        clusterRow('a', 'NACOS', '["10.0.0.1:8848"]'),
        clusterRow('a', 'NACOS', '["10.0.0.9:8848"]'),
        clusterRow('b', 'NACOS', '["10.0.0.2:8848"]', { id: 'f'.repeat(32) }),
        clusterRow('c', 'NACOS', '[10.0.0.3]'),
        clusterRow('d', 'NACOS', '10.0.0.4:8848,10.0.0.5:8848'),
        clusterRow('e', 'NACOS', '["10.0.0.6:8848/nacos"]'),
      ],
      [
        taskRow('s', 'g', A, nacosSyncClusterId('d', 'NACOS'), { id: '0'.repeat(32) }),
        taskRow('s', 'g', A, 'f'.repeat(32)),
        taskRow('s', 'g', A, '1'.repeat(32)),
        taskRow('s', 'g', A, A),
        taskRow('s', 'g', A, nacosSyncClusterId('d', 'NACOS'), { status: 'PAUSE' }),
      ],
    );
    const result = await importRows(readSqlDump(text, 'd.sql').rows);
    expect(result.clusters.map((c) => [c.options.nacosSyncName, c.endpoints])).toEqual([
      ['a', ['10.0.0.1:8848']],
      ['d', ['10.0.0.4:8848', '10.0.0.5:8848']],
    ]);
    expect(result.tasks).toEqual([]);
    expect(result.problems).toEqual([
      `d.sql:2:1: cluster a (NACOS): cluster ${A} is in the export twice (also at d.sql:1:119); the first is imported`,
      `d.sql:3:2: cluster b (NACOS): cluster_id: is not nacos-sync's id for this name and type (md5 of "b_NACOS" is ${B}); nacos-sync never writes such a row`,
      'd.sql:4:52: cluster c (NACOS): connect_key_list: is not a JSON list of "host:port" strings, as nacos-sync writes it',
      'd.sql:6:52: cluster e (NACOS): connect_key_list: connectKeyList entry 10.0.0.6:8848/nacos must be host:port; paths and parameters are not supported',
      `d.sql:7:132: task ${'0'.repeat(32)}: task_id: is not nacos-sync's id for this service, group and clusters (${nacosSyncTaskId('s', 'g', A, nacosSyncClusterId('d', 'NACOS'))}); nacos-sync never writes such a row`,
      `d.sql:8:74: task ${nacosSyncTaskId('s', 'g', A, 'f'.repeat(32))}: dest_cluster_id: names the cluster at d.sql:3:1, which is not imported`,
      `d.sql:9:74: task ${nacosSyncTaskId('s', 'g', A, '1'.repeat(32))}: dest_cluster_id: names no cluster of the export (${'1'.repeat(32)})`,
      `d.sql:10:1: task ${nacosSyncTaskId('s', 'g', A, A)}: source and destination are both ${A}; a task copies between two clusters`,
      `d.sql:11:132: task ${nacosSyncTaskId('s', 'g', A, nacosSyncClusterId('d', 'NACOS'))}: task_status: is PAUSE; nacos-sync's tasks are SYNC or DELETE`,
    ]);
    await expect(importRows(readSqlDump(text, 'd.sql').rows, { strict: true })).rejects.toThrow(ImportNacosSyncError);
  });

  it('checks rows with the nacos-sync routes\' schemas, naming the column', async () => {
    const text = dump([clusterRow('n'.repeat(300), 'NACOS', '["10.0.0.1:8848"]'), clusterRow('a', 'NACOS', '["10.0.0.1:8848"]'), clusterRow('b', 'NACOS', '["10.0.0.2:8848"]')], [taskRow('two words', 'g', A, B)]);
    const result = await importRows(readSqlDump(text, 'd.sql').rows);
    expect(result.problems).toEqual([
      expect.stringMatching(/^d\.sql:1:\d+: cluster n+ \(NACOS\): cluster_name: clusterName must NOT have more than 255 characters$/),
      expect.stringMatching(/^d\.sql:4:\d+: task \w+: service_name: serviceName must be a service name without whitespace or "\*", or "\*" alone for every service$/),
    ]);
    expect(result.clusters.map((c) => c.id)).toEqual([A, B]);
  });

  it('maps tasks as /v1/task/add would: blank group is DEFAULT_GROUP, the namespace defaults to the source\'s; one task per service', async () => {
    const text = dump(
      [clusterRow('a', 'NACOS', '["10.0.0.1:8848"]', { namespace: 'dev' }), clusterRow('b', 'NACOS', '["10.0.0.2:8848"]')],
      [taskRow('orders', null, A, B), taskRow('orders', 'DEFAULT_GROUP', A, B), taskRow('users', 'g', B, A, { namespace: 'prod' }), taskRow('gone', 'g', B, A, { status: 'DELETE' })],
    );
    const result = await importRows(readSqlDump(text, 'd.sql').rows);
    expect(result.tasks).toEqual([
      { id: nacosSyncTaskId('orders', null, A, B), source: A, destination: B, service: 'orders', group: 'DEFAULT_GROUP', namespace: 'dev' },
      { id: nacosSyncTaskId('users', 'g', B, A), source: B, destination: A, service: 'users', group: 'g', namespace: 'prod' },
    ]);
    expect(result.problems).toEqual([
      expect.stringMatching(/^d\.sql:4:1: task \w+: syncs dev\/DEFAULT_GROUP\/orders from \w+ to \w+, as task \w+ at d\.sql:3:\d+ does; the first is imported$/),
    ]);
    expect(result.notes).toEqual([expect.stringMatching(/^d\.sql:6:1: task \w+: task_status DELETE: nacos-sync is removing its copies; not imported$/)]);
  });

  it('imports what H2 2.3 wrote (SCRIPT, and CSVWRITE of both tables) the same way', async () => {
    const fixture = (name: string) => fileURLToPath(new URL(`../../test/fixtures/nacos-sync/${name}`, import.meta.url));
    const script = await importRows(readExportFiles([fixture('h2-script.sql')]).rows);
    const csv = await importRows(readExportFiles([fixture('h2-cluster.csv'), fixture('h2-task.csv')]).rows);
    expect(script.problems).toEqual([]);
    expect(script.clusters).toEqual([
      { id: nacosSyncClusterId('shanghai', 'NACOS'), kind: 'nacos', endpoints: ['127.0.0.1:18848'], options: { nacosSyncName: 'shanghai' } },
      { id: nacosSyncClusterId('杭州-zk', 'ZK'), kind: 'zookeeper', endpoints: ['127.0.0.1:12181', '127.0.0.1:12182'], username: 'u', password: 'it\'s\\a "x"', options: { nacosSyncName: '杭州-zk' } },
    ]);
    expect(script.tasks).toEqual([
      { id: '6a509845594243834c1c1809a2505d6b', source: nacosSyncClusterId('shanghai', 'NACOS'), destination: nacosSyncClusterId('杭州-zk', 'ZK'), service: 'payments', group: 'DEFAULT_GROUP', namespace: 'public' },
    ]);
    expect({ ...csv, where: undefined }).toEqual({ ...script, where: undefined });
  });

  it('writes YAML that apply reads back literally: ${ escaped, passwords as variables unless asked', async () => {
    const text = dump([clusterRow('x${HOME}', 'NACOS', '["10.0.0.1:8848"]', { password: 'pw' }), clusterRow('x${HOME}', 'ZK', '["10.0.0.2:2181"]', { password: 'pw2' })], []);
    const result = await importRows(readSqlDump(text, 'd.sql').rows);
    const yaml = parse(importYaml(result, ['d.sql'])) as { clusters: Array<{ password: string; options: { nacosSyncName: string } }> };
    expect(yaml.clusters.map((c) => expandString(c.options.nacosSyncName, { HOME: '/root' }, 'test'))).toEqual(['x${HOME}', 'x${HOME}']);
    expect(yaml.clusters.map((c) => c.password)).toEqual(['${NACOS_SYNC_PASSWORD_X_HOME_NACOS}', '${NACOS_SYNC_PASSWORD_X_HOME_ZOOKEEPER}']);
    const clear = parse(importYaml(result, ['d.sql'], true)) as { clusters: Array<{ password: string }> };
    expect(clear.clusters.map((c) => c.password)).toEqual(['pw', 'pw2']);
  });
});
