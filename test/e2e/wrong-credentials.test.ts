import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { startConsulServer, type ConsulServer } from '../support/consul-server.js';
import { startEurekaServer, type EurekaServer } from '../support/eureka-server.js';
import { startK8sApiServer, type K8sApiServer } from '../support/k8s-api-server.js';
import { freePort } from '../support/ports.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { startRedisSentinel, type RedisSentinelSet } from '../support/redis-sentinel.js';
import { runRegsync, startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import { makeTempDir, removeTempDir } from '../support/server-process.js';
import { persistent } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** A secret nobody could mistake for anything else, and its forms a client library might send. */
function secret(what: string): string {
  return `${what}-${randomUUID()}`;
}

/** Where a secret, or one of its encodings, shows in `text`: undefined when nowhere. */
function leak(text: string, secrets: readonly string[]): string | undefined {
  for (const s of secrets) {
    for (const form of [s, encodeURIComponent(s), Buffer.from(s).toString('base64')]) {
      const at = text.indexOf(form);
      if (at >= 0) return text.slice(Math.max(0, at - 300), at + form.length + 50);
    }
  }
  return undefined;
}

/** The lines a command printed, as JSON log lines (undefined for the others). */
function logLines(output: string): Array<{ text: string; json: Record<string, unknown> | undefined }> {
  return output
    .split('\n')
    .filter((l) => l !== '')
    .map((text) => {
      try {
        return { text, json: JSON.parse(text) as Record<string, unknown> };
      } catch {
        return { text, json: undefined };
      }
    });
}

describe('a wrong Redis password', () => {
  let redis: RedisServer;
  const wrong = secret('redis-wrong');
  const right = secret('redis-right');
  beforeAll(async () => {
    redis = await startRedis();
    const admin = new Redis(redis.url);
    await admin.call('ACL', 'SETUSER', 'regsync', 'on', `>${right}`, '~*', '&*', '+@all');
    // A password for the default user too (`redis://:password@`), which shuts the admin out: its last command.
    await admin.call('ACL', 'SETUSER', 'default', 'resetpass', `>${right}`);
    admin.disconnect();
  });
  afterAll(async () => {
    await redis?.cleanup();
  });

  it('stops every command with the clear line, and no line at any level shows the password', async () => {
    const at = `127.0.0.1:${redis.port}`;
    const runs = [
      [['up', '--listen', '127.0.0.1:0'], `redis://regsync:${wrong}@${at}`],
      [['up', '--listen', '127.0.0.1:0'], `redis://:${wrong}@${at}`],
      [['worker'], `redis://regsync:${wrong}@${at}`],
      [['api', '--listen', '127.0.0.1:0'], `redis://regsync:${wrong}@${at}`],
      [['dns', '--listen', '127.0.0.1:0'], `redis://regsync:${wrong}@${at}`],
    ] as const;
    for (const [command, url] of runs) {
      const res = await runRegsync([...command, '--redis', url, '--redis-connect-timeout', '3s'], { env: { REGSYNC_LOG_LEVEL: 'trace' } });
      expect(res.code, res.output).toBe(1);
      expect(res.output).toMatch(/regsync: cannot reach Redis at redis:\/\/(regsync)?:\*\*\*@127\.0\.0\.1:\d+: authentication failed \(WRONGPASS/);
      // The refused command is logged: its name, not its password.
      expect(res.output, command[0]).toContain('"name":"hello"');
      expect(leak(res.output, [wrong, right]), `${command[0]} ${url}`).toBeUndefined();
    }
  }, 180_000);
});

describe('wrong Sentinel credentials', () => {
  let set: RedisSentinelSet;
  const wrong = secret('data-wrong');
  const wrongSentinel = secret('sentinel-wrong');
  beforeAll(async () => {
    set = await startRedisSentinel();
    const primary = new Redis({ host: '127.0.0.1', port: await set.primaryPort() });
    await primary.call('ACL', 'SETUSER', 'app', 'on', `>${secret('data-right')}`, '~*', '&*', '+@all');
    primary.disconnect();
    for (const port of set.sentinelPorts) {
      const sentinel = new Redis({ host: '127.0.0.1', port });
      await sentinel.call('ACL', 'SETUSER', 'sen', 'on', `>${secret('sentinel-right')}`, '+@all');
      sentinel.disconnect();
    }
  }, 60_000);
  afterAll(async () => {
    await set?.cleanup();
  });

  it('stops with the clear line, and neither the data nodes\' nor the sentinels\' password shows', async () => {
    const data = await runRegsync(['up', '--listen', '127.0.0.1:0', '--redis', set.url.replace('://', `://app:${wrong}@`)], { env: { REGSYNC_LOG_LEVEL: 'trace' } });
    expect(data.code, data.output).toBe(1);
    expect(data.output).toMatch(/regsync: cannot reach Redis at redis\+sentinel:\/\/app:\*\*\*@127\.0\.0\.1:\d+,.*: authentication failed/);
    expect(leak(data.output, [wrong])).toBeUndefined();

    const url = `${set.url}?sentinelUsername=sen&sentinelPassword=${wrongSentinel}`;
    const sentinels = await runRegsync(['up', '--listen', '127.0.0.1:0', '--redis', url, '--redis-connect-timeout', '2s'], { env: { REGSYNC_LOG_LEVEL: 'trace' } });
    expect(sentinels.code, sentinels.output).toBe(1);
    expect(sentinels.output).toMatch(/regsync: cannot reach Redis at redis\+sentinel:\/\/127\.0\.0\.1:\d+,.*sentinelPassword=\*\*\*: no sentinel answered/);
    expect(leak(sentinels.output, [wrongSentinel])).toBeUndefined();
  }, 60_000);
});

describe('a start while Redis does not answer', () => {
  it('prints one line for a failure that repeats, no stack below error level, and the clear line last', async () => {
    const port = await freePort();
    const res = await runRegsync(['up', '--listen', '127.0.0.1:0', '--redis', `redis://u:s3cret-pw@127.0.0.1:${port}`, '--redis-connect-timeout', '3s']);
    expect(res.code).toBe(1);
    const lines = logLines(res.output);
    expect(lines.at(-1)?.text).toBe(`regsync: cannot reach Redis at redis://u:***@127.0.0.1:${port}: connection refused (connect ECONNREFUSED 127.0.0.1:${port})`);
    const before = lines.slice(0, -1);
    // The three connections retry every 50 to 500 ms: some 30 failures in 3 s, told once (and once more at the tenth).
    const refused = before.filter((l) => l.json?.msg === 'redis connection error');
    expect(refused).toHaveLength(1);
    expect(refused[0]?.json).toMatchObject({ level: 40, redis: `redis://u:***@127.0.0.1:${port}`, err: { code: 'ECONNREFUSED' } });
    for (const line of before) {
      if ((line.json?.level as number) < 50) expect(line.text, 'a stack below error level').not.toMatch(/"stack"|\\n\s+at /);
      if (line.json?.msg === 'redis connection error') continue;
      // Nothing else about Redis but the reminder.
      if (/redis/i.test(line.text)) expect(line.json?.msg).toMatch(/^redis connection error, 10 failures since the last success$/);
    }
    expect(before.length).toBeLessThanOrEqual(3);
    expect(res.output).not.toContain('s3cret-pw');
  }, 60_000);
});

describe('clusters with wrong credentials', () => {
  const secrets = {
    nacos: secret('nacos-wrong'),
    nacosRight: secret('nacos-right'),
    consul: secret('consul-wrong'),
    consulRight: secret('consul-right'),
    eureka: secret('eureka-wrong'),
    eurekaRight: secret('eureka-right'),
    kubernetes: secret('k8s-wrong'),
    kubernetesRight: secret('k8s-right'),
    inUrl: secret('url-wrong'),
  };
  const all = Object.values(secrets);
  let redis: RedisServer;
  let open: RunningRegistry;
  let locked: RunningRegistry;
  let consul: ConsulServer;
  let eureka: EurekaServer;
  let k8s: K8sApiServer;
  let dir: string;
  let regsync: RegsyncProcess;
  const answers: string[] = [];

  /** GET of the API, its answer kept for the search. */
  const get = async (path: string): Promise<string> => {
    const res = await fetch(`${regsync.url}${path}`);
    const text = await res.text();
    answers.push(`${path}: ${text}`);
    return text;
  };
  const send = async (method: string, path: string, body: unknown): Promise<number> => {
    const res = await fetch(`${regsync.url}${path}`, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    answers.push(`${method} ${path}: ${await res.text()}`);
    return res.status;
  };

  beforeAll(async () => {
    redis = await startRedis();
    open = await startRegistry({ port: 0 });
    locked = await startRegistry({ port: 0, users: new Map([['regsync', secrets.nacosRight]]) });
    consul = await startConsulServer({ tokens: { [secrets.consulRight]: 'write' } });
    eureka = await startEurekaServer({ basicAuth: { username: 'regsync', password: secrets.eurekaRight } });
    k8s = await startK8sApiServer({ token: secrets.kubernetesRight });
    dir = makeTempDir('regsync-wrong-credentials-');
    writeFileSync(join(dir, 'kubeconfig'), k8s.kubeconfigYaml(secrets.kubernetes));
    regsync = await startRegsync(['up', '--listen', '127.0.0.1:0', '--redis', redis.url], { env: { REGSYNC_LOG_LEVEL: 'trace' } });
  }, 60_000);
  afterAll(async () => {
    await regsync?.stop();
    await Promise.all([open?.close(), locked?.close(), consul?.close(), eureka?.close(), k8s?.close()]);
    if (dir !== undefined) removeTempDir(dir);
    await redis?.cleanup();
  });

  it('fail the tasks that use them, and no log line or API answer shows a password or token', async () => {
    open.store.register('public', 'DEFAULT_GROUP', 'orders', persistent('10.70.0.1'));
    const clusters = [
      { id: 'open', kind: 'nacos', endpoints: [open.endpoint] },
      { id: 'nacos-bad', kind: 'nacos', endpoints: [locked.endpoint], username: 'regsync', password: secrets.nacos, options: { requestTimeoutMs: 2_000 } },
      { id: 'consul-bad', kind: 'consul', endpoints: [consul.endpoint], password: secrets.consul, options: { backoffMaxMs: 500 } },
      { id: 'eureka-bad', kind: 'eureka', endpoints: [eureka.endpoint], username: 'regsync', password: secrets.eureka, options: { pollIntervalMs: 200 } },
      { id: 'k8s-bad', kind: 'kubernetes', endpoints: [], options: { kubeconfig: join(dir, 'kubeconfig'), namespaceMap: { default: 'public' }, backoffInitialMs: 50, backoffMaxMs: 500 } },
    ];
    for (const c of clusters) expect(await send('POST', '/api/v1/clusters', c)).toBe(201);
    const tasks = [
      { id: 'from-nacos', source: 'nacos-bad', destination: 'open', service: 'orders' },
      { id: 'to-nacos', source: 'open', destination: 'nacos-bad', service: 'orders' },
      { id: 'from-consul', source: 'consul-bad', destination: 'open', service: 'orders' },
      { id: 'to-consul', source: 'open', destination: 'consul-bad', service: 'orders' },
      { id: 'from-eureka', source: 'eureka-bad', destination: 'open', service: 'orders' },
      { id: 'to-eureka', source: 'open', destination: 'eureka-bad', service: 'orders' },
      { id: 'from-k8s', source: 'k8s-bad', destination: 'open', service: 'orders' },
      { id: 'to-k8s', source: 'open', destination: 'k8s-bad', service: 'orders' },
    ];
    for (const t of tasks) expect(await send('POST', '/api/v1/tasks', t)).toBe(201);

    // Every task fails on its cluster's credentials, and says so.
    for (const t of tasks) {
      await waitUntil(
        async () => {
          const body = JSON.parse(await get(`/api/v1/tasks/${t.id}`)) as { status?: { error?: string | null; services?: Array<{ lastError: string | null }> } };
          return body.status?.error ?? body.status?.services?.find((s) => s.lastError !== null)?.lastError ?? undefined;
        },
        { message: `task ${t.id} to fail`, timeoutMs: 30_000 },
      );
    }
    await waitUntil(async () => (JSON.parse(await get('/api/v1/clusters:status')) as { items: Array<{ reachable?: boolean }> }).items.length > 0, { message: 'the clusters\' status' });

    for (const path of ['/api/v1/clusters', '/api/v1/clusters:status', '/api/v1/tasks', '/api/v1/tasks:summary', '/api/v1/shards', '/api/v1/workers', '/v1/cluster/list?pageNum=1&pageSize=20', '/v1/task/list?pageNum=1&pageSize=20']) {
      await get(path);
    }
    for (const c of clusters) {
      await get(`/api/v1/clusters/${c.id}`);
      await get(`/api/v1/clusters/${c.id}/history`);
    }
    for (const t of tasks) {
      for (const tail of ['', '/events', '/history', '/services', '/summary']) await get(`/api/v1/tasks/${t.id}${tail}`);
    }
    const events = answers.filter((a) => a.includes('/events:')).join('\n');
    expect(events).toMatch(/cannot|fail|refused|denied|401|403/i);

    // Credentials in an endpoint's URL (as Spring Cloud writes a Eureka zone) are refused without being quoted back.
    const inUrl = `http://regsync:${secrets.inUrl}@127.0.0.1:${eureka.endpoint.split(':')[1] as string}/eureka`;
    expect(await send('POST', '/api/v1/clusters', { id: 'eureka-url', kind: 'eureka', endpoints: [inUrl] })).toBe(400);
    await send('POST', '/v1/cluster/add', { clusterName: 'nacos-url', clusterType: 'NACOS', connectKeyList: [`http://nacos:${secrets.inUrl}@${locked.endpoint}`] });

    const output = regsync.output();
    expect(output).toMatch(/nacos-bad|consul-bad|eureka-bad/);
    for (const line of output.split('\n')) expect(leak(line, all), 'a log line').toBeUndefined();
    for (const answer of answers) expect(leak(answer, all), 'an API answer').toBeUndefined();
  }, 90_000);
});
