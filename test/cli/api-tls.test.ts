import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync } from '../support/regsync-process.js';

describe('REST API over HTTPS, and a token on the metrics listener', () => {
  let redis: RedisServer;
  let dir: string;
  let cert: string;
  let key: string;
  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'regsync-tls-'));
    [cert, key] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  });
  afterAll(async () => {
    await redis?.cleanup();
  });

  it('serves the API over HTTPS with --tls-cert and --tls-key, and prints an https URL', async () => {
    const api = await startRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0', '--tls-cert', cert, '--tls-key', key], { ready: / on (https:\/\/\S+)/ });
    try {
      expect(api.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const dispatcher = new Agent({ connect: { ca: readFileSync(cert) } });
      const res = await fetch(`${api.url}/api/v1/clusters`, { dispatcher } as RequestInit);
      expect(res.status).toBe(200);
      // Plain HTTP to the same port gets no API answer.
      await expect(fetch(api.url.replace('https:', 'http:') + '/api/v1/clusters').then((r) => r.status)).rejects.toThrow();
      await dispatcher.close();
    } finally {
      expect(await api.stop()).toBe(0);
    }
  });

  it('refuses half a TLS setting, or a file that is no PEM, naming the flag', async () => {
    const half = await runRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0', '--tls-cert', cert]);
    expect(half.code).toBe(1);
    expect(half.output).toContain('regsync: --tls-cert and --tls-key go together');
    const notPem = await runRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0', '--tls-cert', cert, '--tls-key', join(dir, 'missing.pem')]);
    expect(notPem.output).toContain(`regsync: --tls-key ${join(dir, 'missing.pem')}: file not found`);
  });

  it('requires the bearer token on a worker\'s /metrics, never on /healthz', async () => {
    const token = 'metrics-token-0123456789';
    const worker = await startRegsync(['worker', '--redis', redis.url, '--prefix', 'tok', '--metrics-listen', '127.0.0.1:0'], { ready: /metrics on (http:\/\/\S+)\/metrics/, env: { REGSYNC_METRICS_TOKEN: token } });
    try {
      expect((await fetch(`${worker.url}/metrics`)).status).toBe(401);
      expect((await fetch(`${worker.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
      const ok = await fetch(`${worker.url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('regsync_shard_leader');
      expect((await fetch(`${worker.url}/healthz`)).status).toBe(200);
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  });
});
