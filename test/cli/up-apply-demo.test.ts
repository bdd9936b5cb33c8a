import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync, type RegsyncProcess } from '../support/regsync-process.js';

const run = promisify(execFile);

describe('regsync up + regsync apply', () => {
  let redis: RedisServer;
  let up: RegsyncProcess;
  let dir: string;

  beforeAll(async () => {
    redis = await startRedis();
    up = await startRegsync(['up', '--redis', redis.url, '--listen', '127.0.0.1:0']);
    dir = mkdtempSync(join(tmpdir(), 'regsync-apply-'));
  });
  afterAll(async () => {
    await up?.stop();
    await redis?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('applies clusters and tasks from YAML, idempotently', async () => {
    const file = join(dir, 'sync.yaml');
    writeFileSync(
      file,
      [
        'clusters:',
        '  - { id: east, kind: nacos, endpoints: ["127.0.0.1:1"] }',
        '  - { id: west, kind: nacos, endpoints: ["127.0.0.1:2"] }',
        '---',
        'tasks:',
        '  - { id: east-to-west, source: east, destination: west, service: orders }',
      ].join('\n'),
    );
    const first = await runRegsync(['apply', '-f', file, '--server', up.url]);
    expect(first).toMatchObject({ code: 0 });
    expect(first.output.trim().split('\n')).toEqual(['cluster east created', 'cluster west created', 'task east-to-west created']);
    const again = await runRegsync(['apply', '-f', dir, '--server', up.url]);
    expect(again.output.trim().split('\n')).toEqual(['cluster east unchanged', 'cluster west unchanged', 'task east-to-west unchanged']);

    const task = (await (await fetch(`${up.url}/api/v1/tasks/east-to-west`)).json()) as Record<string, unknown>;
    expect(task).toMatchObject({ source: 'east', destination: 'west', service: 'orders', group: 'DEFAULT_GROUP', namespace: 'public' });
  });

  it('names the file and the problem when a file is wrong', async () => {
    const file = join(dir, 'bad.yml');
    writeFileSync(file, 'clusters:\n  - kind: nacos\n');
    const res = await runRegsync(['apply', '-f', file, '--server', up.url]);
    expect(res.code).toBe(1);
    expect(res.output).toContain(`${file} (document 1): clusters[0] needs an id`);
    rmSync(file);
  });

  it('refuses a cluster option its kind does not have, naming it, and stores nothing', async () => {
    const file = join(dir, 'typo.yml');
    writeFileSync(file, 'clusters:\n  - { id: typo, kind: nacos, endpoints: ["127.0.0.1:3"], options: { apiVerison: v1 } }\n');
    const res = await runRegsync(['apply', '-f', file, '--server', up.url]);
    rmSync(file);
    expect(res.code).toBe(1);
    expect(res.output).toContain('body.options.apiVerison: not an option of nacos clusters');
    expect((await fetch(`${up.url}/api/v1/clusters/typo`)).status).toBe(404);
  });

  it('reports an unreachable API clearly', async () => {
    const res = await runRegsync(['apply', '-f', join(dir, 'sync.yaml'), '--server', 'http://127.0.0.1:1']);
    expect(res.code).toBe(1);
    expect(res.output).toContain('cannot reach the regsync API at http://127.0.0.1:1');
  });
});

describe('regsync demo', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.cleanup();
  });

  it.each([1, 2])('syncs two registries both ways and tells what moved where (run %i on the same Redis: from a clean state)', async () => {
    const demo = await startRegsync(
      ['demo', '--shanghai-port', '0', '--beijing-port', '0', '--listen', '127.0.0.1:0', '--dns-listen', '127.0.0.1:0', '--redis', redis.url],
      { ready: /Ctrl-C stops everything/ },
    );
    try {
      const out = demo.output();
      expect(out).toMatch(/beijing\s+orders\s+10\.0\.1\.11:8080\s+copy from shanghai \(task orders-sh-to-bj\)/);
      expect(out).toMatch(/shanghai\s+orders\s+10\.0\.2\.21:8080\s+copy from beijing \(task orders-bj-to-sh\)/);
      expect(out).toMatch(/beijing\s+payments\s+10\.0\.1\.31:9090\s+copy from shanghai/);
      expect(out).toMatch(/shanghai\s+orders\s+10\.0\.1\.11:8080\s+registered here/);
      // Copies carry CMDB and cluster labels, and the selector routes each consumer to its site.
      expect(out).toMatch(/beijing\s+orders\s+10\.0\.1\.11:8080\s+copy from shanghai \(task orders-sh-to-bj\)\s+site=sh zone=sh-a region=cn-east/);
      expect(out).toMatch(/beijing\s+consumer 10\.0\.1\.200 \(site sh\) gets 10\.0\.1\.11:8080\n/);
      expect(out).toMatch(/beijing\s+consumer 10\.0\.2\.200 \(site bj\) gets 10\.0\.2\.21:8080\n/);
      // The same service over DNS, and a shanghai consumer's view of it through the subnet dig sends.
      expect(out).toContain('orders.svc.regsync.internal A -> 10.0.1.11, 10.0.2.21');
      const dashboard = /regsync dashboard\s+(http:\/\/\S+)/.exec(out)?.[1];
      expect((await fetch(dashboard as string)).headers.get('content-type')).toMatch(/^text\/html/);
      const port = /dig @127\.0\.0\.1 -p (\d+) orders\.svc\.regsync\.internal \+short\n/.exec(out)?.[1];
      expect(port).toBeDefined();
      const dig = await run('dig', ['@127.0.0.1', '-p', port as string, '+short', '+time=5', '+tries=1', '+subnet=10.0.1.200/32', 'orders.svc.regsync.internal']);
      expect(dig.stdout.trim()).toBe('10.0.1.11');
      expect(out).not.toMatch(/warning|strict mode/i);
      // Nothing of an earlier run: no cluster of its registries (gone now) is tried, no source seems to have emptied.
      expect(out).not.toMatch(/ECONNREFUSED|dropped to zero instances/);
    } finally {
      expect(await demo.stop()).toBe(0);
    }
  });
});

describe('regsync up without --redis', () => {
  it('runs its own redis-server under --data-dir on a port that stays, holds the dir, and keeps state across restarts', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'regsync-data-'));
    const args = ['up', '--listen', '127.0.0.1:0', '--data-dir', dataDir];
    const env = { REGSYNC_REDIS_URL: '' };
    const redisUrlOf = (out: string) => /; local redis-server (redis:\/\/127\.0\.0\.1:\d+) \(data in /.exec(out)?.[1];
    try {
      const first = await startRegsync(args, { env });
      const firstRedis = redisUrlOf(first.output());
      expect(firstRedis).toBeDefined();
      // A second `up` on the same data dir stops at once, naming the one that holds it.
      const second = await runRegsync([...args.slice(0, 2), '127.0.0.1:0', ...args.slice(3)], { env });
      expect(second.code).toBe(1);
      expect(second.output).toMatch(new RegExp(`regsync: data dir ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by another regsync \\(pid \\d+, since `));
      const created = await fetch(`${first.url}/api/v1/clusters`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: 'kept', kind: 'nacos', endpoints: ['127.0.0.1:1'] }),
      });
      expect(created.status).toBe(201);
      expect(await first.stop()).toBe(0);

      const restarted = await startRegsync(args, { env });
      try {
        expect(redisUrlOf(restarted.output())).toBe(firstRedis);
        const list = (await (await fetch(`${restarted.url}/api/v1/clusters`)).json()) as { items: Array<{ id: string }> };
        expect(list.items.map((c) => c.id)).toEqual(['kept']);
      } finally {
        expect(await restarted.stop()).toBe(0);
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
