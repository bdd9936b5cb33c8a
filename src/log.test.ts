import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisPerTest } from '../test/support/redis-per-test.js';
import { waitUntil } from '../test/support/wait-until.js';
import { createLogger, maskSecretsInText, redactRedisArgs, rememberSecrets, REDACTED } from './log.js';

const server = redisPerTest();

/** A logger at `level` writing into the returned list, one parsed line each. */
function capture(level: 'warn' | 'debug' | 'info'): { log: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter((l) => l !== ''));
      done();
    },
  });
  return { log: createLogger(level, sink), lines };
}

/** The first error an ioredis client gets from the test's redis-server with `password`, which is refused. */
async function refusedLogin(username: string | undefined, password: string): Promise<Error> {
  const client = new Redis({ host: '127.0.0.1', port: server.server.port, username, password, retryStrategy: () => null, maxRetriesPerRequest: 0, lazyConnect: true });
  let seen: Error | undefined;
  client.on('error', (err: Error) => {
    seen ??= err;
  });
  await client.connect().catch((err: Error) => {
    seen ??= err;
  });
  await waitUntil(() => seen !== undefined, { message: 'the login refused' });
  client.disconnect();
  return seen as Error;
}

describe('log lines of Redis errors', () => {
  it('never show the password a refused HELLO or AUTH carried, and keep the command name', async () => {
    await server.redis.call('ACL', 'SETUSER', 'app', 'on', '>right-password-1', '~*', '+@all');
    const { log, lines } = capture('warn');
    const hello = await refusedLogin('app', 'pw-wrong-hello-4711');
    // ioredis puts the refused command, password included, on the error.
    expect(JSON.stringify((hello as { command?: unknown }).command)).toContain('pw-wrong-hello-4711');
    log.warn({ err: hello }, 'redis connection error');
    log.warn({ error: hello, nested: { cause: hello } }, 'the same error under other names');
    log.warn(hello, 'the error itself');
    expect(lines).toHaveLength(3);
    for (const line of lines) {
      expect(line).not.toContain('pw-wrong-hello-4711');
      expect(line).toContain('WRONGPASS');
    }
    expect(JSON.parse(lines[0] as string).err.command).toEqual({ name: 'hello', args: ['3', 'AUTH', 'app', REDACTED] });
  });
});

describe('redactRedisArgs', () => {
  it('hides every credential position of the commands that carry one, and nothing else', () => {
    expect(redactRedisArgs('auth', ['pw'])).toEqual([REDACTED]);
    expect(redactRedisArgs('AUTH', ['user', 'pw'])).toEqual(['user', REDACTED]);
    expect(redactRedisArgs('hello', ['3', 'AUTH', 'default', 'pw', 'SETNAME', 'x'])).toEqual(['3', 'AUTH', 'default', REDACTED, 'SETNAME', 'x']);
    expect(redactRedisArgs('migrate', ['h', '6379', '', '0', '5000', 'AUTH', 'pw', 'KEYS', 'a'])).toEqual(['h', '6379', '', '0', '5000', 'AUTH', REDACTED, 'KEYS', 'a']);
    expect(redactRedisArgs('migrate', ['h', '6379', 'k', '0', '5000', 'auth2', 'u', 'pw'])).toEqual(['h', '6379', 'k', '0', '5000', 'auth2', 'u', REDACTED]);
    expect(redactRedisArgs('config', ['SET', 'requirepass', 'pw', 'masterauth', 'pw2'])).toEqual(['SET', 'requirepass', REDACTED, 'masterauth', REDACTED]);
    expect(redactRedisArgs('acl', ['SETUSER', 'u', 'on', '>pw', '<old', '#abc', '~*'])).toEqual(['SETUSER', 'u', 'on', REDACTED, REDACTED, REDACTED, '~*']);
    expect(redactRedisArgs('sentinel', ['SET', 'mymaster', 'auth-pass', 'pw'])).toEqual(['SET', 'mymaster', 'auth-pass', REDACTED]);
    expect(redactRedisArgs('sentinel', ['CONFIG', 'SET', 'sentinel-pass', 'pw'])).toEqual(['CONFIG', 'SET', 'sentinel-pass', REDACTED]);
    expect(redactRedisArgs('set', ['key', 'value'])).toEqual(['key', 'value']);
  });
});

describe('maskSecretsInText', () => {
  it('masks URL passwords, basic credentials and the secrets the process remembered', () => {
    expect(maskSecretsInText('cannot reach redis://app:pw-1@10.0.0.1:6379/0 and http://u:p@h/x')).toBe('cannot reach redis://app:***@10.0.0.1:6379/0 and http://u:***@h/x');
    expect(maskSecretsInText('no user info in http://h:8080/x@y')).toBe('no user info in http://h:8080/x@y');
    expect(maskSecretsInText('Authorization: Basic dXNlcjpwYXNzd29yZA==')).toBe(`Authorization: Basic ${REDACTED}`);
    rememberSecrets('tok-remembered-9321', 'short', undefined);
    expect(maskSecretsInText('403 for token tok-remembered-9321 on /v1/kv')).toBe(`403 for token ${REDACTED} on /v1/kv`);
    rememberSecrets('p@ss word/remembered');
    expect(maskSecretsInText(`GET /x/${encodeURIComponent('p@ss word/remembered')}`)).toBe(`GET /x/${REDACTED}`);
    // Too short to mask by value: every "short" in every line would go.
    expect(maskSecretsInText('a short line')).toBe('a short line');
  });
});

describe('stacks', () => {
  it('are written at error level, and not below it unless the logger runs at debug', () => {
    const { log, lines } = capture('info');
    log.warn({ err: new Error('connect ECONNREFUSED') }, 'a warning');
    log.info({ err: new Error('retrying') }, 'an info');
    log.error({ err: new Error('broken') }, 'an error');
    const [warn, info, error] = lines.map((l) => JSON.parse(l) as { err: { message: string; stack?: string } });
    expect(warn?.err).toMatchObject({ message: 'connect ECONNREFUSED' });
    expect(warn?.err.stack).toBeUndefined();
    expect(info?.err.stack).toBeUndefined();
    expect(error?.err.stack).toContain('log.test.ts');

    const debug = capture('debug');
    debug.log.warn({ err: new Error('connect ECONNREFUSED') }, 'a warning');
    expect((JSON.parse(debug.lines[0] as string) as { err: { stack?: string } }).err.stack).toContain('log.test.ts');
  });
});
