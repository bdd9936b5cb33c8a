import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ClusterSpec, ServiceKey } from '../../src/model/index.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { NacosAuthError } from './nacos-auth-error.js';
import { createNacosAdapter, type NacosAdapter } from './nacos-adapter.js';
import { NacosRequestError } from './nacos-request-error.js';

const PASSWORD = 'pw-S3cret-Value';
const k: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 'secured' };
const instance = { ip: '10.50.0.1', port: 80, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: {} };

/** Every log line, raw, to check what was (not) written. */
function capturedLogger(): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) }), lines };
}

describe.each(['v1', 'v3', 'auto'] as const)('NacosAdapter authentication (%s)', (apiVersion) => {
  let registry: RunningRegistry;
  let log: ReturnType<typeof capturedLogger>;
  const adapters: NacosAdapter[] = [];

  const spec = (over: Partial<ClusterSpec> = {}): ClusterSpec => ({
    id: 'nacos-auth',
    kind: 'nacos',
    endpoints: [registry.endpoint],
    username: 'nacos',
    password: PASSWORD,
    labels: {},
    options: { apiVersion },
    ...over,
  });
  const adapterWith = (over: Partial<ClusterSpec> = {}) => {
    const adapter = createNacosAdapter(spec(over), { logger: log.logger });
    adapters.push(adapter);
    return adapter;
  };

  beforeEach(async () => {
    log = capturedLogger();
    registry = await startRegistry({ port: 0, users: new Map([['nacos', PASSWORD]]), tokenTtlSeconds: 2 });
  });
  afterEach(async () => {
    await Promise.all(adapters.splice(0).map((a) => a.close()));
    await registry.close();
    // Whatever happened, neither the password nor a token reached the log.
    const text = log.lines.join('');
    expect(text).not.toContain(PASSWORD);
    expect(text).not.toMatch(/accessToken=|Bearer /);
  });

  it('logs in and keeps working past token expiry by refreshing ahead of it', async () => {
    const adapter = adapterWith();
    await adapter.apply(k, { upsert: [instance], remove: [] });
    // The unauthenticated v1 probe answers 403 on a secured server: v1 is served.
    expect(await adapter.resolveApiVersion()).toBe(apiVersion === 'auto' ? 'v1' : apiVersion);
    const failures: unknown[] = [];
    // Keep using the adapter until it has logged in three times: well past the first token's 2 s.
    await waitUntil(
      async () => {
        await adapter.listInstances(k).then(
          (list) => expect(list).toHaveLength(1),
          (err: unknown) => failures.push(err),
        );
        await adapter.heartbeat(k, instance).catch((err: unknown) => failures.push(err));
        return adapter.stats().logins >= 3;
      },
      { timeoutMs: 20_000, intervalMs: 100, message: 'three logins' },
    );
    expect(failures).toEqual([]);
    // Refreshed ahead of expiry: the registry never had to refuse a token.
    expect(log.lines.some((l) => l.includes('nacos refused the token'))).toBe(false);
  });

  it('logs in again once when the registry forgets its token, and retries the request', async () => {
    const adapter = adapterWith();
    expect(await adapter.listInstances(k)).toEqual([]);
    expect(adapter.stats().logins).toBe(1);
    // A restart forgets every token; the adapter's token still looks fresh to the adapter.
    const port = registry.port;
    await registry.close();
    registry = await startRegistry({ port, users: new Map([['nacos', PASSWORD]]), tokenTtlSeconds: 60 });
    expect(await adapter.listInstances(k)).toEqual([]);
    expect(adapter.stats().logins).toBe(2);
    expect(log.lines.some((l) => l.includes('nacos refused the token'))).toBe(true);
  });

  it('fails clearly on a wrong password, naming the user but not the password', async () => {
    const adapter = adapterWith({ password: 'not-the-password' });
    const err = await adapter.listInstances(k).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(NacosAuthError);
    expect(err).toMatchObject({ code: 'nacos-auth-failed', username: 'nacos', status: 403, endpoint: registry.endpoint });
    expect((err as Error).message).toMatch(/login as 'nacos' at .* failed: HTTP 403 unknown user!/);
    expect((err as Error).message).not.toContain('not-the-password');
  });

  it('reports the refusal of a secured registry when no credentials are given', async () => {
    const adapter = adapterWith({ username: undefined, password: undefined });
    const err = await adapter.listInstances(k).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(NacosRequestError);
    expect(err).toMatchObject({ code: 'nacos-http-error', status: 403 });
  });
});
