import { execFileSync } from 'node:child_process';
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/ports.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { makeTempDir, ManagedProcess, removeTempDir, waitForReady } from '../support/server-process.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * The start script of the in-cluster Redis (components/redis-sentinel/redis-ha.sh) against a real
 * redis-server and Sentinel on loopback: the configuration it writes for each pod, and that
 * redis-server and Sentinel accept it.
 */
const SCRIPT = fileURLToPath(new URL('../../deploy/kubernetes/components/redis-sentinel/redis-ha.sh', import.meta.url));
const DOMAIN = 'redis-headless.regsync.svc.cluster.local';

function conf(mode: 'redis-conf' | 'sentinel-conf', env: Record<string, string>): string {
  return execFileSync('sh', [SCRIPT, mode], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HEADLESS_DOMAIN: DOMAIN, ...env }, encoding: 'utf8' });
}

function directive(text: string, name: string): string | undefined {
  return text
    .split('\n')
    .find((line) => line.startsWith(`${name} `))
    ?.slice(name.length + 1);
}

describe('redis-ha.sh', () => {
  const dir = makeTempDir('regsync-redis-ha-');
  const procs: ManagedProcess[] = [];
  let primary: RedisServer;
  let sentinelPort: number;
  let silentPort: number;

  async function serve(args: string[], port: number, what: string): Promise<void> {
    const logFile = join(dir, `${what}.log`);
    const proc = new ManagedProcess('redis-server', args, { logFile });
    procs.push(proc);
    const answers = async (): Promise<boolean> => {
      const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      client.on('error', () => undefined);
      try {
        return (await client.ping()) === 'PONG';
      } catch {
        return false;
      } finally {
        client.disconnect();
      }
    };
    await waitForReady(proc, answers, { what, timeoutMs: 20_000, logFiles: [logFile] });
  }

  beforeAll(async () => {
    primary = await startRedis();
    silentPort = await freePort();
    sentinelPort = await freePort();
    const sentinelConf = join(dir, 'sentinel.conf');
    writeFileSync(sentinelConf, `port ${sentinelPort}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor mymaster 127.0.0.1 ${primary.port} 1\n`);
    await serve([sentinelConf, '--sentinel'], sentinelPort, 'sentinel');
  });

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await primary?.cleanup();
    removeTempDir(dir);
  });

  it('first start, no Sentinel answering: pod 0 is the primary, the others replicate it by its pod DNS name', () => {
    const none = { SENTINEL_HOST: '127.0.0.1', SENTINEL_PORT: String(silentPort) };
    const pod0 = conf('redis-conf', { ...none, POD_NAME: 'redis-0' });
    expect(directive(pod0, 'replicaof')).toBeUndefined();
    expect(directive(pod0, 'replica-announce-ip')).toBe(`redis-0.${DOMAIN}`);
    expect(directive(pod0, 'maxmemory-policy')).toBe('noeviction');
    expect(directive(pod0, 'appendonly')).toBe('yes');
    const pod2 = conf('redis-conf', { ...none, POD_NAME: 'redis-2' });
    expect(directive(pod2, 'replicaof')).toBe(`redis-0.${DOMAIN} 6379`);
    expect(directive(conf('sentinel-conf', { ...none, POD_NAME: 'redis-1' }), 'sentinel monitor')).toBe(`mymaster redis-0.${DOMAIN} 6379 2`);
  });

  it('after a failover every pod, pod 0 included, follows the primary the Sentinels name', () => {
    const asked = { SENTINEL_HOST: '127.0.0.1', SENTINEL_PORT: String(sentinelPort) };
    expect(directive(conf('redis-conf', { ...asked, POD_NAME: 'redis-0' }), 'replicaof')).toBe(`127.0.0.1 ${primary.port}`);
    expect(directive(conf('sentinel-conf', { ...asked, POD_NAME: 'redis-0' }), 'sentinel monitor')).toBe(`mymaster 127.0.0.1 ${primary.port} 2`);
  });

  it('a recreated pod keeps its Sentinel id; another pod has another', () => {
    const none = { SENTINEL_HOST: '127.0.0.1', SENTINEL_PORT: String(silentPort) };
    const id = (pod: string) => directive(conf('sentinel-conf', { ...none, POD_NAME: pod }), 'sentinel myid');
    expect(id('redis-1')).toMatch(/^[0-9a-f]{40}$/);
    expect(id('redis-1')).toBe(id('redis-1'));
    expect(id('redis-2')).not.toBe(id('redis-1'));
  });

  it('redis-server and Sentinel accept what it writes: the replica syncs from the primary, the Sentinel monitors it', async () => {
    const asked = { SENTINEL_HOST: '127.0.0.1', SENTINEL_PORT: String(sentinelPort), DATA_DIR: dir };
    // On loopback, and announcing 127.0.0.1 instead of pod DNS names (which would be looked up):
    // later directives win in both files.
    const replicaPort = await freePort();
    const replicaConf = join(dir, 'replica.conf');
    writeFileSync(replicaConf, conf('redis-conf', { ...asked, POD_NAME: 'redis-1', REDIS_PORT: String(replicaPort) }));
    appendFileSync(replicaConf, `bind 127.0.0.1\nreplica-announce-ip 127.0.0.1\nappenddirname replica-aof\n`);
    await serve([replicaConf], replicaPort, 'replica');
    const replica = new Redis({ host: '127.0.0.1', port: replicaPort, maxRetriesPerRequest: 1 });
    const second = await freePort();
    const sentinel2Conf = join(dir, 'sentinel2.conf');
    writeFileSync(sentinel2Conf, conf('sentinel-conf', { ...asked, POD_NAME: 'redis-2' }));
    appendFileSync(sentinel2Conf, `port ${second}\nbind 127.0.0.1\nsentinel announce-ip 127.0.0.1\n`);
    await serve([sentinel2Conf, '--sentinel'], second, 'sentinel-2');
    const sentinel = new Redis({ host: '127.0.0.1', port: second, maxRetriesPerRequest: 1 });
    const writer = new Redis(primary.url, { maxRetriesPerRequest: 1 });
    try {
      await writer.set('regsync-deploy-check', 'replicated');
      await waitUntil(async () => (await replica.get('regsync-deploy-check')) === 'replicated', { message: 'the replica to sync', timeoutMs: 20_000 });
      expect(await replica.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
      expect(await sentinel.call('SENTINEL', 'get-master-addr-by-name', 'mymaster')).toEqual(['127.0.0.1', String(primary.port)]);
    } finally {
      replica.disconnect();
      sentinel.disconnect();
      writer.disconnect();
    }
  });
});
