import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync, type RegsyncProcess } from '../support/regsync-process.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/nacos-sync/${name}`, import.meta.url));
const DUMP = fixture('nacos_sync.sql');

/**
 * The clusters and tasks of the fixture export (test/fixtures/nacos-sync), as nacos-sync's console
 * sent them to `/v1/cluster/add` and `/v1/task/add`. The endpoints are loopback ports nothing
 * listens on (below the kernel's range for ephemeral ports): nothing is ever copied.
 */
const CLUSTERS = [
  { clusterName: 'shanghai', clusterType: 'NACOS', connectKeyList: ['127.0.0.1:18848'] },
  { clusterName: 'beijing', clusterType: 'NACOS', connectKeyList: ['127.0.0.1:18849', '127.0.0.1:18850'], namespace: 'dev', userName: 'nacos', password: 'it\'s\\a "secret"' },
  { clusterName: '杭州-zk', clusterType: 'ZK', connectKeyList: ['127.0.0.1:12181,127.0.0.1:12182'] },
  { clusterName: 'consul-dc1', clusterType: 'CONSUL', connectKeyList: ['127.0.0.1:18500'] },
];
const ID = {
  shanghai: '28456ef8a3d2d158061fd794894d7127',
  beijing: '5612ec2238b730a4b99dd63b86d6bc07',
  zk: '298fc16e4e8c8cf05ba649d3715a3757',
  consul: '0a16a1b2ca5b70f9e303946b5104c67b',
};
const TASKS = [
  { sourceClusterId: ID.shanghai, destClusterId: ID.beijing, serviceName: 'orders', groupName: 'DEFAULT_GROUP' },
  { sourceClusterId: ID.shanghai, destClusterId: ID.zk, serviceName: 'payments' },
  { sourceClusterId: ID.beijing, destClusterId: ID.shanghai, serviceName: 'users', groupName: 'dubbo', nameSpace: 'dev' },
  { sourceClusterId: ID.consul, destClusterId: ID.shanghai, serviceName: 'inventory', groupName: 'DEFAULT_GROUP' },
];

/** `regsync export`'s text without its first line, which names the server. */
const exported = async (url: string): Promise<string> => {
  const run = await runRegsync(['export', '--server', url]);
  expect(run.code, run.output).toBe(0);
  return run.output.split('\n').filter((l) => !l.startsWith('# regsync export of')).join('\n');
};

/** The `cluster <id> <action>` / `task <id> <action>` lines of an apply. */
const results = (output: string) => output.split('\n').filter((l) => /^(cluster|task) [0-9a-f]{32} /.test(l));

describe('regsync import-nacos-sync', () => {
  let redis: RedisServer;
  /** Where nacos-sync's console API creates the clusters and tasks. */
  let viaApi: RegsyncProcess;
  /** Where the import of the export of the same rows goes. */
  let viaImport: RegsyncProcess;
  let dir: string;

  beforeAll(async () => {
    redis = await startRedis();
    const up = (prefix: string) => startRegsync(['up', '--redis', redis.url, '--listen', '127.0.0.1:0', '--prefix', prefix]);
    [viaApi, viaImport] = await Promise.all([up('nacos-api'), up('nacos-import')]);
    dir = mkdtempSync(join(tmpdir(), 'regsync-import-nacos-sync-'));
  });
  afterAll(async () => {
    await viaApi?.stop();
    await viaImport?.stop();
    await redis?.cleanup();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- nacos-sync answers are read loosely, as scripts do
  async function nacosSync(path: string, body: unknown): Promise<any> {
    const res = await fetch(`${viaApi.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    return res.json();
  }

  it('stores what nacos-sync\'s API stores for the same clusters and tasks; importing again changes nothing', async () => {
    for (const c of CLUSTERS) expect(await nacosSync('/v1/cluster/add', c), c.clusterName).toMatchObject({ success: true });
    for (const t of TASKS) expect(await nacosSync('/v1/task/add', t), t.serviceName).toMatchObject({ success: true });
    // The rows the import skips are refused by the API too.
    expect(await nacosSync('/v1/cluster/add', { clusterName: 'legacy', clusterType: 'CS', connectKeyList: ['cs.example:8080?key=1'] })).toMatchObject({ success: false });
    expect(await nacosSync('/v1/task/add', { sourceClusterId: ID.shanghai, destClusterId: ID.beijing, serviceName: 'versioned', groupName: 'DEFAULT_GROUP', version: '1.0.0' })).toMatchObject({ success: false });

    const first = await runRegsync(['import-nacos-sync', DUMP, '--apply', '--server', viaImport.url]);
    expect(first.code, first.output).toBe(0);
    expect(results(first.output).sort()).toEqual([...Object.values(ID).map((id) => `cluster ${id} created`), ...TASKS.map((_, i) => `task ${taskIds[i]} created`)].sort());
    expect(first.output).toContain('read 4 clusters and 4 tasks; skipped 4 rows (--strict refuses them)');
    expect(first.output).toMatch(/nacos_sync\.sql:\d+:\d+: task b978f1a01b59d41ef3474fdad8242d1e: task_status DELETE: nacos-sync is removing its copies; not imported/);

    const fromApi = await exported(viaApi.url);
    expect(await exported(viaImport.url)).toBe(fromApi);
    // Not two empty exports: every cluster and task is there, the password kept (not shown).
    for (const id of [...Object.values(ID), ...taskIds]) expect(fromApi).toContain(`id: ${id}`);
    expect(fromApi).toContain('nacosSyncName: 杭州-zk');
    expect(fromApi.match(/has a password, kept on the server/g)).toHaveLength(1);
    for (const url of [viaApi.url, viaImport.url]) {
      const beijing = (await (await fetch(`${url}/api/v1/clusters/${ID.beijing}`)).json()) as Record<string, unknown>;
      expect(beijing).toMatchObject({ kind: 'nacos', namespace: 'dev', username: 'nacos', hasPassword: true, options: { nacosSyncName: 'beijing' } });
      // The same password: comparing it against the stored one finds no difference.
      const compared = await fetch(`${url}/api/v1/clusters/${ID.beijing}/compare`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'nacos', endpoints: beijing.endpoints, namespace: 'dev', username: 'nacos', password: CLUSTERS[1]?.password, options: beijing.options }),
      });
      expect(await compared.json()).toEqual({ exists: true, differs: false, fields: [] });
    }

    const again = await runRegsync(['import-nacos-sync', DUMP, '--apply', '--server', viaImport.url]);
    expect(again.code, again.output).toBe(0);
    expect(results(again.output)).toHaveLength(8);
    expect(results(again.output).every((l) => l.endsWith(' unchanged'))).toBe(true);
    expect(await exported(viaImport.url)).toBe(fromApi);

    // The CSV export of the same tables, against the deployment nacos-sync's API filled: nothing to change.
    const csv = await runRegsync(['import-nacos-sync', fixture('cluster.csv'), fixture('task.csv'), '--apply', '--dry-run', '--server', viaApi.url]);
    expect(csv.code, csv.output).toBe(0);
    expect(csv.output).toContain('dry run: no changes (8 unchanged); nothing written');

    // The YAML, applied with `regsync apply` and the password from the environment: nothing to change either.
    const yaml = join(dir, 'nacos-sync.yaml');
    const written = await runRegsync(['import-nacos-sync', DUMP, '-o', yaml]);
    expect(written.code, written.output).toBe(0);
    expect(readFileSync(yaml, 'utf8')).toContain('password: ${NACOS_SYNC_PASSWORD_BEIJING_NACOS}');
    expect(readFileSync(yaml, 'utf8')).not.toContain('secret');
    const applied = await runRegsync(['apply', '-f', yaml, '--dry-run', '--exit-code', '--server', viaImport.url], { env: { NACOS_SYNC_PASSWORD_BEIJING_NACOS: CLUSTERS[1]?.password } });
    expect(applied.code, applied.output).toBe(0);
    expect(applied.output).toContain('dry run: no changes (8 unchanged); nothing written');
  });

  it('--strict refuses an export with rows it cannot import, naming each, and writes nothing', async () => {
    const out = join(dir, 'strict.yaml');
    const run = await runRegsync(['import-nacos-sync', DUMP, '--strict', '-o', out]);
    expect(run.code).toBe(1);
    expect(run.output).toContain('regsync: 4 rows cannot be imported (--strict), nothing written:');
    expect(run.output).toMatch(/nacos_sync\.sql:\d+:\d+: cluster legacy \(CS\): cluster_type: regsync does not support clusterType CS/);
    expect(run.output).toMatch(/nacos_sync\.sql:\d+:\d+: task 2e38ee36eecd0009abda61fdb6ddf9e6: version: version is not supported/);
    expect(existsSync(out)).toBe(false);
  });

  it('a broken export fails naming the file, line and column, and writes nothing', async () => {
    const run = await runRegsync(['import-nacos-sync', fixture('truncated.sql'), '--apply', '--server', viaImport.url]);
    expect(run.code).toBe(1);
    expect(run.output).toMatch(/^regsync: .*truncated\.sql:\d+:\d+: the file ends inside this string; is it truncated\?$/m);
  });
});

/** nacos-sync's ids of {@link TASKS}: md5 of `serviceName_groupName_source_dest`, with `null` for an absent group. */
const taskIds = ['e4b10ffee8912045b1f3907d105efdc6', '6a509845594243834c1c1809a2505d6b', 'bc9c4eda6d43982c50967c0909185310', '3031212cde002874db97c09a81795a2c'];
