import { Writable } from 'node:stream';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiHarness, expectError, SECRET_MARKER, type ApiHarness } from '../../test/support/api-harness.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createLogger, maskSecretsInText } from '../log.js';
import type { ApiToken } from './auth-tokens.js';

// Every secret carries the marker, so one search finds any of them.
const ADMIN: ApiToken = { name: 'ops', scope: 'admin', token: `adm-${SECRET_MARKER}-token-000001` };
const READ: ApiToken = { name: 'dash', scope: 'read', token: `rd-${SECRET_MARKER}-token-0000002` };
const WRONG = `wrong-${SECRET_MARKER}-token-00003`;
/** A registry's own access token, as an engine error might quote it. */
const REGISTRY_TOKEN = `nacos-${SECRET_MARKER}-accesstoken`;
const PASSWORDS = [`pw-${SECRET_MARKER}-east`, `pw-${SECRET_MARKER}-west`, `pw-${SECRET_MARKER}-nacos-sync`, `pw-${SECRET_MARKER}-bad`];
const SECRETS = [SECRET_MARKER, ADMIN.token, READ.token, WRONG, REGISTRY_TOKEN, ...PASSWORDS];

let server: RedisServer;
let h: ApiHarness;
const lines: string[] = [];
const answers: string[] = [];

beforeAll(async () => {
  server = await startRedis();
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter((l) => l !== ''));
      done();
    },
  });
  h = await apiHarness(server, { tokens: [ADMIN, READ], logger: createLogger('trace', sink) });
  // Code that logs request headers (none should; this checks the net under it).
  h.app.get('/api/v1/test/log-headers', async (request) => {
    request.log.info({ headers: request.headers }, 'headers seen');
    return { logged: true };
  });
});

afterAll(async () => {
  await h?.close();
  await server?.cleanup();
});

/** Sends a request and keeps its answer (status line, headers and body) for the final search. */
async function send(opts: InjectOptions): Promise<LightMyRequestResponse> {
  const res = await h.inject(opts);
  // The answer only: the request itself may carry a token (that is the client's business).
  answers.push(`${res.statusCode}\n${JSON.stringify(res.headers)}\n${res.payload}`);
  return res;
}

const admin = { authorization: `Bearer ${ADMIN.token}` };
const read = { authorization: `Bearer ${READ.token}` };

describe('secrets', () => {
  it('never appear in an answer or a log line, whatever the API is asked', async () => {
    const [east, west, nacosSync, bad] = PASSWORDS as [string, string, string, string];
    // Created, replaced, shown, listed, through both APIs.
    expect((await send({ method: 'POST', url: '/api/v1/clusters', headers: admin, payload: { id: 'east', kind: 'nacos', endpoints: ['127.0.0.1:1'], username: 'sync', password: east } })).statusCode).toBe(201);
    expect((await send({ method: 'PUT', url: '/api/v1/clusters/west', headers: admin, payload: { kind: 'nacos', endpoints: ['127.0.0.1:2'], username: 'sync', password: west } })).statusCode).toBe(201);
    expect((await send({ method: 'PUT', url: '/api/v1/clusters/west', headers: admin, payload: { kind: 'nacos', endpoints: ['127.0.0.1:3'], password: west } })).statusCode).toBe(200);
    const added = await send({ method: 'POST', url: '/v1/cluster/add', headers: admin, payload: { clusterName: 'sh', clusterType: 'NACOS', connectKeyList: ['127.0.0.1:4'], userName: 'u', password: nacosSync } });
    expect(added.json()).toMatchObject({ success: true });
    expect((await send({ method: 'GET', url: '/api/v1/clusters', headers: read })).json()).toMatchObject({ items: [{ hasPassword: true }, { hasPassword: true }, { hasPassword: true }] });
    expect((await send({ method: 'GET', url: '/api/v1/clusters/east', headers: read })).json()).toMatchObject({ id: 'east', hasPassword: true });
    expect((await send({ method: 'GET', url: '/v1/cluster/list', headers: read })).json()).toMatchObject({ success: true, totalSize: 3 });
    expect((await send({ method: 'POST', url: '/api/v1/tasks', headers: admin, payload: { id: 'e2w', source: 'east', destination: 'west', service: 'orders' } })).statusCode).toBe(201);
    expect((await send({ method: 'GET', url: '/api/v1/tasks/e2w', headers: read })).statusCode).toBe(200);

    // Refused bodies that carry a password.
    expectError(await send({ method: 'POST', url: '/api/v1/clusters', headers: admin, payload: { id: 'x', kind: 'nacos', endpoints: ['h:1'], password: bad, colour: bad } }), 400, 'invalid_request');
    expectError(await send({ method: 'POST', url: '/api/v1/clusters', headers: admin, payload: { id: 'x', kind: 'nacos', endpoints: ['h:1'], password: bad.repeat(80) } }), 400, 'invalid_request');
    expectError(await send({ method: 'POST', url: '/api/v1/clusters', headers: { ...admin, 'content-type': 'application/json' }, payload: `{"id": "x", "password": "${bad}",` }), 400, 'invalid_json');
    expectError(await send({ method: 'POST', url: '/api/v1/clusters', headers: admin, payload: { id: 'x', kind: 'nacos', endpoints: ['h:1'], password: bad, options: { pad: 'x'.repeat(70_000) } } }), 413, 'body_too_large');
    expect((await send({ method: 'POST', url: '/v1/cluster/add', headers: admin, payload: { clusterName: 'x', password: bad, extra: bad } })).json()).toMatchObject({ success: false });

    // Wrong, missing and under-scoped tokens, with passwords in the bodies; a token where none belongs.
    expectError(await send({ method: 'POST', url: '/api/v1/clusters', headers: { authorization: `Bearer ${WRONG}` }, payload: { id: 'x', kind: 'nacos', endpoints: ['h:1'], password: bad } }), 401, 'unauthorized');
    expectError(await send({ method: 'GET', url: '/api/v1/clusters', headers: { authorization: `Basic ${Buffer.from(`u:${ADMIN.token}`).toString('base64')}` } }), 401, 'unauthorized');
    expectError(await send({ method: 'GET', url: `/api/v1/clusters?access_token=${ADMIN.token}` }), 401, 'unauthorized');
    // A URL carrying a password, logged as a field by whoever logs it.
    h.app.log.warn({ url: `/x?user=a&password=${bad}`, nested: { line: `Authorization: Bearer ${READ.token}` } }, 'a field quoting secrets');
    expectError(await send({ method: 'PUT', url: '/api/v1/clusters/east', headers: read, payload: { kind: 'nacos', endpoints: ['h:1'], password: bad } }), 403, 'forbidden');
    expect((await send({ method: 'POST', url: '/v1/cluster/add', headers: { authorization: `Bearer ${WRONG}` }, payload: { clusterName: 'y', password: bad } })).statusCode).toBe(401);

    // Code logging every request header: the credentials are redacted.
    expect((await send({ method: 'GET', url: '/api/v1/test/log-headers', headers: { ...admin, cookie: `session=${READ.token}` } })).statusCode).toBe(200);

    // The engine fails quoting what a registry said, password and credentials included.
    h.control.failures.removeTask = new Error(
      `DELETE http://127.0.0.1:1/nacos/v1/ns/instance?username=sync&password=${east}&accessToken=${REGISTRY_TOKEN} failed: 403 (Authorization: Bearer ${REGISTRY_TOKEN})`,
    );
    expectError(await send({ method: 'DELETE', url: '/api/v1/tasks/e2w', headers: admin }), 502, 'cleanup_failed');
    delete h.control.failures.removeTask;

    // Redis goes away: unexpected failures are logged with their error, and answered without details.
    h.redis.disconnect();
    expectError(await send({ method: 'PUT', url: '/api/v1/clusters/east', headers: admin, payload: { kind: 'nacos', endpoints: ['h:1'], password: east } }), 500, 'internal');

    // The log saw all of that: the lines the search below relies on are there.
    await waitUntil(() => lines.some((l) => l.includes('request failed')), { message: 'the 500 to be logged' });
    const logged = lines.join('\n');
    expect(logged).toContain('request with an invalid token refused');
    expect(logged).toContain('change with a read token refused');
    expect(logged).toContain('headers seen');
    expect(logged).toContain('removing the copies of a task failed');
    expect(logged).toContain('a field quoting secrets');
    expect(logged).toContain('[redacted]');
    expect(answers.length).toBeGreaterThan(20);

    for (const secret of SECRETS) {
      const inLog = lines.find((l) => l.includes(secret));
      expect(inLog, `a log line shows ${secret}`).toBeUndefined();
      const inAnswer = answers.find((a) => a.includes(secret));
      expect(inAnswer, `an answer shows ${secret}`).toBeUndefined();
    }
  });
});

describe('maskSecretsInText', () => {
  it('masks the values of secret-named pairs and bearer credentials', () => {
    expect(maskSecretsInText('GET /x?username=a&password=hunter2&b=1')).toBe('GET /x?username=a&password=[redacted]&b=1');
    expect(maskSecretsInText('{"accessToken":"abc.def","x":1}')).toBe('{"accessToken":"[redacted]","x":1}');
    expect(maskSecretsInText('Authorization: Bearer abc-123-def-456==')).toBe('Authorization: Bearer [redacted]');
    expect(maskSecretsInText('api_key: k1, secret=s2')).toBe('api_key: [redacted], secret=[redacted]');
    expect(maskSecretsInText('task t1 has scope read')).toBe('task t1 has scope read');
    expect(maskSecretsInText('the API needs a bearer token (except probes)')).toBe('the API needs a bearer token (except probes)');
  });
});
