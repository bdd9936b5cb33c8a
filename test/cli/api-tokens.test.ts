import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync } from '../support/regsync-process.js';

const ADMIN = 'cli-admin-token-0123456789abcdef';
const READ = 'cli-read-token-0123456789abcdef';
const ENV_READ = 'cli-env-read-token-0123456789ab';

describe('regsync up/api with API tokens', () => {
  let redis: RedisServer;
  let dir: string;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'regsync-api-tokens-'));
  });
  afterAll(async () => {
    await redis?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('exits 1 naming the file, the entry and the problem when the tokens file is wrong', async () => {
    const file = join(dir, 'bad-tokens.yaml');
    writeFileSync(file, `- {name: ops, scope: admin, token: ${ADMIN}}\n- {name: dash, scope: reader, token: ${READ}}\n`);
    const res = await runRegsync(['up', '--api-tokens-file', file, '--redis', redis.url, '--listen', '127.0.0.1:0']);
    expect(res.code).toBe(1);
    expect(res.output).toContain(`regsync: ${file}: entry 2 (name "dash"): scope must be read or admin`);
    expect(res.output).not.toContain(ADMIN);
    expect(res.output).not.toContain(READ);

    const missing = await runRegsync(['api', '--api-tokens-file', join(dir, 'none.yaml'), '--redis', redis.url, '--listen', '127.0.0.1:0']);
    expect(missing.code).toBe(1);
    expect(missing.output).toContain(`cannot read the API tokens file ${join(dir, 'none.yaml')}: no such file`);

    const rate = await runRegsync(['up', '--rate-limit', 'lots', '--redis', redis.url]);
    expect(rate.code).not.toBe(0);
    expect(rate.output).toContain('expected requests per minute');
  });

  it('requires the tokens of the file and of REGSYNC_API_TOKENS, and never logs them', async () => {
    const file = join(dir, 'tokens.yaml');
    writeFileSync(file, `- {name: ops, scope: admin, token: ${ADMIN}}\n- {name: dash, scope: read, token: ${READ}}\n`);
    const up = await startRegsync(['api', '--api-tokens-file', file, '--redis', redis.url, '--listen', '127.0.0.1:0'], {
      env: { REGSYNC_API_TOKENS: `ci:read:${ENV_READ}`, REGSYNC_LOG_LEVEL: 'info' },
    });
    try {
      const get = (token?: string) => fetch(`${up.url}/api/v1/clusters`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
      const refused = await get();
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="regsync"');
      expect(await refused.json()).toMatchObject({ error: { code: 'unauthorized' } });
      expect((await get('not-a-token-0123456789abcdef')).status).toBe(401);
      for (const token of [ADMIN, READ, ENV_READ]) expect((await get(token)).status).toBe(200);
      const whoami = await fetch(`${up.url}/api/v1/auth/whoami`, { headers: { authorization: `Bearer ${ENV_READ}` } });
      expect(await whoami.json()).toEqual({ name: 'ci', scope: 'read' });
      const create = (token: string) =>
        fetch(`${up.url}/api/v1/clusters`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ id: 'east', kind: 'nacos', endpoints: ['127.0.0.1:1'] }),
        });
      expect((await create(READ)).status).toBe(403);
      expect((await create(ADMIN)).status).toBe(201);
      expect((await fetch(`${up.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${up.url}/readyz`)).status).toBe(200);
      const output = up.output();
      expect(output).toContain('the REST API needs a bearer token');
      expect(output).toContain('request with an invalid token refused');
      for (const token of [ADMIN, READ, ENV_READ, 'not-a-token-0123456789abcdef']) expect(output).not.toContain(token);
    } finally {
      await up.stop();
    }
  });

  it('warns once at start when the API has no tokens', async () => {
    const up = await startRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0'], { env: { REGSYNC_API_TOKENS: '' } });
    try {
      expect((await fetch(`${up.url}/api/v1/auth/whoami`).then((r) => r.json())) as unknown).toEqual({ scope: 'open' });
      const warnings = up.output().split('\n').filter((l) => l.includes('no API tokens configured'));
      expect(warnings).toHaveLength(1);
    } finally {
      await up.stop();
    }
  });

  it('regsync apply sends the admin token of REGSYNC_API_TOKEN, and says what is missing without it', async () => {
    const file = join(dir, 'sync.yaml');
    writeFileSync(file, 'clusters:\n  - { id: applied, kind: nacos, endpoints: ["127.0.0.1:1"] }\n');
    const up = await startRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0'], { env: { REGSYNC_API_TOKENS: `admin:${ADMIN},read:${READ}` } });
    try {
      const without = await runRegsync(['apply', '-f', file, '--server', up.url], { env: { REGSYNC_API_TOKEN: '' } });
      expect(without.code, without.output).toBe(1);
      expect(without.output).toContain('401 unauthorized');
      expect(without.output).toContain('set REGSYNC_API_TOKEN');
      const reader = await runRegsync(['apply', '-f', file, '--server', up.url], { env: { REGSYNC_API_TOKEN: READ } });
      expect(reader.code, reader.output).toBe(1);
      expect(reader.output).toContain('403 forbidden');
      expect(reader.output).not.toContain(READ);
      const admin = await runRegsync(['apply', '-f', file, '--server', up.url], { env: { REGSYNC_API_TOKEN: ADMIN } });
      expect(admin).toMatchObject({ code: 0 });
      expect(admin.output.trim()).toBe('cluster applied created');
      // Nothing to change: reading suffices.
      expect(await runRegsync(['apply', '-f', file, '--server', up.url], { env: { REGSYNC_API_TOKEN: READ } })).toMatchObject({ code: 0, output: 'cluster applied unchanged\n' });
    } finally {
      await up.stop();
    }
  });
});
