import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync, type RegsyncProcess } from '../support/regsync-process.js';

const TASKS_DIR = fileURLToPath(new URL('../../tasks/', import.meta.url));

/** A proxy in front of the API that records every request's method and path: what `apply` sent. */
async function countingProxy(target: string): Promise<{ url: string; requests: string[]; close(): Promise<void> }> {
  const requests: string[] = [];
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method ?? ''} ${req.url ?? ''}`);
    const out = request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const writes = (requests: readonly string[]) => requests.filter((r) => !r.startsWith('GET ') && !/^POST \/api\/v1\/(clusters|tasks)\/[^/]+\/compare$/.test(r));
const lines = (output: string) => output.trim().split('\n');

describe('regsync apply --dry-run / --prune, regsync export', () => {
  let redis: RedisServer;
  let up: RegsyncProcess;
  let proxy: Awaited<ReturnType<typeof countingProxy>>;
  let dir: string;
  /** Embedded registries the clusters point at, so that deleting a task can remove its copies. */
  const registries: RunningRegistry[] = [];
  const at = (i: number) => registries[i]?.endpoint ?? '';

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${up.url}${path}`, { method, ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }) });
    return { status: res.status, body: res.status === 204 ? undefined : ((await res.json()) as Record<string, unknown>) };
  };
  const ids = async (what: 'clusters' | 'tasks') => ((await api('GET', `/api/v1/${what}`)).body as { items: Array<{ id: string }> }).items.map((i) => i.id).sort();
  const file = (name: string, text: string[]) => {
    const path = join(dir, name);
    writeFileSync(path, text.join('\n'));
    return path;
  };

  beforeAll(async () => {
    redis = await startRedis();
    up = await startRegsync(['up', '--redis', redis.url, '--listen', '127.0.0.1:0']);
    proxy = await countingProxy(up.url);
    for (let i = 0; i < 4; i += 1) registries.push(await startRegistry({ port: 0 }));
  });
  afterAll(async () => {
    for (const r of registries) await r.close();
    await proxy?.close();
    await up?.stop();
    await redis?.cleanup();
  });
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'regsync-apply-ops-'));
    for (const id of await ids('tasks')) expect(await api('DELETE', `/api/v1/tasks/${id}`)).toEqual({ status: 204, body: undefined });
    for (const id of await ids('clusters')) expect((await api('DELETE', `/api/v1/clusters/${id}`)).status).toBe(204);
    proxy.requests.length = 0;
    return () => rmSync(dir, { recursive: true, force: true });
  });

  const base = () => [
    'clusters:',
    `  - { id: east, kind: nacos, endpoints: ["${at(0)}"], labels: { region: e } }`,
    `  - { id: west, kind: nacos, endpoints: ["${at(1)}"] }`,
    'tasks:',
    '  - { id: east-to-west, source: east, destination: west, service: orders }',
  ];

  it('--dry-run on new and on unchanged files reports without writing; a change names its fields', async () => {
    const path = file('sync.yaml', base());
    const first = await runRegsync(['apply', '-f', path, '--dry-run', '--server', proxy.url]);
    expect(first.code).toBe(0);
    expect(lines(first.output)).toEqual([
      'cluster east created (dry run)',
      'cluster west created (dry run)',
      'task east-to-west created (dry run)',
      'dry run: 3 changes pending (3 created, 0 updated, 0 deleted, 0 unchanged); nothing written',
    ]);
    expect(writes(proxy.requests)).toEqual([]);
    expect(await ids('clusters')).toEqual([]);

    expect((await runRegsync(['apply', '-f', path, '--server', up.url])).code).toBe(0);
    proxy.requests.length = 0;
    for (let run = 0; run < 2; run += 1) {
      const again = await runRegsync(['apply', '-f', path, '--dry-run', '--exit-code', '--server', proxy.url]);
      expect(again.code).toBe(0);
      expect(lines(again.output)).toEqual(['cluster east unchanged', 'cluster west unchanged', 'task east-to-west unchanged', 'dry run: no changes (3 unchanged); nothing written']);
    }
    expect(proxy.requests.length).toBeGreaterThan(0);
    expect(writes(proxy.requests)).toEqual([]);

    const changed = file('sync.yaml', [...base().slice(0, 2), `  - { id: west, kind: nacos, endpoints: ["${at(2)}"], password: pw }`, ...base().slice(3, 4), '  - { id: east-to-west, source: east, destination: west, service: orders, options: { fullSyncIntervalMs: 60000 } }']);
    const diff = await runRegsync(['apply', '-f', changed, '--dry-run', '--exit-code', '--server', proxy.url]);
    expect(diff.code).toBe(2);
    expect(lines(diff.output)).toEqual([
      'cluster east unchanged',
      'cluster west updated: endpoints, password (dry run)',
      'task east-to-west updated: options (dry run)',
      'dry run: 2 changes pending (0 created, 2 updated, 0 deleted, 1 unchanged); nothing written',
    ]);
    expect(writes(proxy.requests)).toEqual([]);
    expect((await api('GET', '/api/v1/clusters/west')).body).toMatchObject({ endpoints: [at(1)], hasPassword: false });

    // A task without a namespace takes its source's: moving the source moves the task.
    const moved = file('sync.yaml', [base()[0] as string, `  - { id: east, kind: nacos, endpoints: ["${at(0)}"], namespace: prod, labels: { region: e } }`, ...base().slice(2)]);
    const move = await runRegsync(['apply', '-f', moved, '--dry-run', '--server', proxy.url]);
    expect(lines(move.output)).toEqual([
      'cluster east updated: namespace (dry run)',
      'cluster west unchanged',
      'task east-to-west updated: namespace (dry run)',
      'dry run: 2 changes pending (0 created, 2 updated, 0 deleted, 1 unchanged); nothing written',
    ]);
    expect(writes(proxy.requests)).toEqual([]);
  });

  it('export then apply is a no-op that keeps passwords and paused tasks', async () => {
    expect((await api('POST', '/api/v1/clusters', { id: 'east', kind: 'nacos', endpoints: [at(0)], namespace: 'prod', labels: { site: 'a' } })).status).toBe(201);
    // With a password; no task uses it, so nobody logs in to the (open) embedded registry.
    expect((await api('POST', '/api/v1/clusters', { id: 'locked', kind: 'nacos', endpoints: [at(2)], username: 'u', password: 's3cret' })).status).toBe(201);
    expect((await api('POST', '/api/v1/clusters', { id: 'west', kind: 'nacos', endpoints: [at(1)], options: { pollIntervalMs: 5000 } })).status).toBe(201);
    expect((await api('POST', '/api/v1/tasks', { id: 'all-east-west', source: 'east', destination: 'west', service: '*', options: { exclude: ['tmp-*'], mapping: { prefix: 'e-' } } })).status).toBe(201);
    expect((await api('POST', '/api/v1/tasks', { id: 'orders-west-east', source: 'west', destination: 'east', service: 'orders' })).status).toBe(201);
    expect((await api('POST', '/api/v1/tasks/orders-west-east/pause')).status).toBe(200);

    const out = join(dir, 'exported.yaml');
    // --server takes host:port alone as http://host:port.
    const exported = await runRegsync(['export', '--server', up.url.replace(/^http:\/\//, ''), '-o', out]);
    expect(exported).toMatchObject({ code: 0 });
    const text = readFileSync(out, 'utf8');
    expect(text).not.toContain('s3cret');
    expect(text).toMatch(/# has a password, kept on the server/);
    expect(text).toMatch(/# paused/);

    proxy.requests.length = 0;
    const applied = await runRegsync(['apply', '-f', out, '--server', proxy.url]);
    expect(applied.code).toBe(0);
    expect(lines(applied.output)).toEqual(['cluster east unchanged', 'cluster locked unchanged', 'cluster west unchanged', 'task all-east-west unchanged', 'task orders-west-east unchanged']);
    expect(writes(proxy.requests)).toEqual([]);
    // The stored password still matches: comparing it answers no difference.
    expect((await api('POST', '/api/v1/clusters/locked/compare', { kind: 'nacos', endpoints: [at(2)], username: 'u', password: 's3cret' })).body).toMatchObject({ differs: false });
    expect((await api('GET', '/api/v1/tasks/orders-west-east')).body).toMatchObject({ state: 'paused' });
    // The same state exports to the same text.
    expect((await runRegsync(['export', '--server', up.url])).output).toBe(text);
  });

  it('takes the repo\'s tasks/ folder as the README shows, skipping the CMDB data file with a note', async () => {
    // A dry run: the demo's clusters point at 127.0.0.1:8848/8849, which this test does not own.
    const res = await runRegsync(['apply', '-f', TASKS_DIR, '--dry-run', '--server', proxy.url]);
    expect(res.code).toBe(0);
    expect(lines(res.output)).toEqual([
      `skipped ${join(TASKS_DIR, 'demo-cmdb.yaml')}: a CMDB data file, not clusters or tasks`,
      'cluster shanghai created (dry run)',
      'cluster beijing created (dry run)',
      'task orders-sh-to-bj created (dry run)',
      'task orders-bj-to-sh created (dry run)',
      'task payments-sh-to-bj created (dry run)',
      'dry run: 5 changes pending (5 created, 0 updated, 0 deleted, 0 unchanged); nothing written',
    ]);
    expect(writes(proxy.requests)).toEqual([]);
  });

  it('checks every entry of every file before writing: each problem names its file, document and entry, and nothing is written', async () => {
    const good = file('a-good.yaml', base());
    const bad = file('b-bad.yaml', [
      'clusters:',
      `  - { id: north, kind: nacos, endpoints: ["${at(2)}"], colour: blue }`,
      '---',
      'tasks:',
      '  - { id: to-nowhere, source: east, destination: nowhere, service: orders }',
      '  - { id: new-to-east, source: north, destination: east, service: orders, options: { fullSyncIntervalMS: 1000 } }',
    ]);
    const res = await runRegsync(['apply', '-f', dir, '--server', proxy.url]);
    expect(res.code).toBe(1);
    expect(res.output).toContain('3 problems, nothing written:');
    expect(res.output).toContain(`${bad} (document 1): clusters[0] (id north): body.colour is not a known field`);
    expect(res.output).toContain(`${bad} (document 2): tasks[0] (id to-nowhere): no cluster nowhere, neither in the files nor stored`);
    expect(res.output).toContain(`${bad} (document 2): tasks[1] (id new-to-east): body.options.fullSyncIntervalMS is not a known field`);
    expect(writes(proxy.requests)).toEqual([]);
    expect(await ids('clusters')).toEqual([]);

    file('c-twice.yaml', ['tasks:', '  - { id: east-to-west, source: west, destination: east, service: x }']);
    rmSync(bad);
    const twice = await runRegsync(['apply', '-f', dir, '--server', proxy.url]);
    expect(twice.code).toBe(1);
    expect(twice.output).toContain(`c-twice.yaml (document 1): tasks[0] (id east-to-west): task id east-to-west is declared twice (also at ${good} (document 1): tasks[0] (id east-to-west))`);
    expect(writes(proxy.requests)).toEqual([]);
  });

  it('refuses a task that would sync a service another task syncs, unless that one moves or is pruned', async () => {
    expect((await runRegsync(['apply', '-f', file('sync.yaml', base()), '--server', up.url])).code).toBe(0);
    const renamed = file('sync.yaml', [...base().slice(0, 4), '  - { id: orders-east-west, source: east, destination: west, service: orders, namespace: public }']);
    proxy.requests.length = 0;
    const refused = await runRegsync(['apply', '-f', renamed, '--server', proxy.url]);
    expect(refused.code).toBe(1);
    expect(refused.output).toContain(`${renamed} (document 1): tasks[0] (id orders-east-west): stored task east-to-west already syncs public/DEFAULT_GROUP/orders from east to west; nothing written`);
    expect(writes(proxy.requests)).toEqual([]);

    // With --prune the old task goes first, and the new one takes the service over.
    const pruned = await runRegsync(['apply', '-f', renamed, '--prune', '--server', up.url]);
    expect(pruned.code).toBe(0);
    expect(lines(pruned.output)).toEqual(['cluster east unchanged', 'cluster west unchanged', 'task east-to-west deleted', 'task orders-east-west created']);
    expect(await ids('tasks')).toEqual(['orders-east-west']);

    // Two tasks of the files on one service: both named.
    const twice = file('sync.yaml', [...base(), '  - { id: again, source: east, destination: west, service: orders }']);
    const dup = await runRegsync(['apply', '-f', twice, '--server', up.url]);
    expect(dup.code).toBe(1);
    expect(dup.output).toContain(`${twice} (document 1): tasks[1] (id again): syncs the same service as ${twice} (document 1): tasks[0] (id east-to-west)`);
  });

  it('--prune deletes only what the files no longer name, of the kinds they declare, keeping clusters in use', async () => {
    const all = file('all.yaml', [
      ...base(),
      '  - { id: west-to-east, source: west, destination: east, service: orders }',
      '  - { id: old-to-west, source: east, destination: west, service: old }',
    ]);
    file('extra.yaml', ['clusters:', `  - { id: spare, kind: nacos, endpoints: ["${at(2)}"] }`, `  - { id: used, kind: nacos, endpoints: ["${at(3)}"] }`, 'tasks:', '  - { id: used-to-west, source: used, destination: west, service: u }']);
    expect((await runRegsync(['apply', '-f', dir, '--server', up.url])).code).toBe(0);
    rmSync(join(dir, 'extra.yaml'));
    // A stored task the files do not name still uses `used` once tasks are not pruned.
    const clustersOnly = file('clusters-only.yaml', base().slice(0, 3));
    rmSync(all);

    proxy.requests.length = 0;
    const dry = await runRegsync(['apply', '-f', clustersOnly, '--prune', '--dry-run', '--server', proxy.url]);
    expect(dry.code).toBe(0);
    expect(lines(dry.output)).toEqual([
      'kept cluster used: not in the files, but task used-to-west uses it',
      'cluster east unchanged',
      'cluster west unchanged',
      'cluster spare deleted (dry run)',
      'dry run: 1 change pending (0 created, 0 updated, 1 deleted, 2 unchanged); nothing written',
    ]);
    expect(writes(proxy.requests)).toEqual([]);

    const withTasks = file('clusters-only.yaml', base());
    const pruned = await runRegsync(['apply', '-f', withTasks, '--prune', '--server', proxy.url]);
    expect(pruned.code).toBe(0);
    expect(lines(pruned.output)).toEqual([
      'cluster east unchanged',
      'cluster west unchanged',
      'task old-to-west deleted',
      'task used-to-west deleted',
      'task west-to-east deleted',
      'task east-to-west unchanged',
      'cluster spare deleted',
      'cluster used deleted',
    ]);
    expect(await ids('tasks')).toEqual(['east-to-west']);
    expect(await ids('clusters')).toEqual(['east', 'west']);
    // Without --prune nothing is deleted.
    const plain = file('clusters-only.yaml', base().slice(0, 3));
    expect(lines((await runRegsync(['apply', '-f', plain, '--server', up.url])).output)).toEqual(['cluster east unchanged', 'cluster west unchanged']);
    expect(await ids('tasks')).toEqual(['east-to-west']);
  });
});
