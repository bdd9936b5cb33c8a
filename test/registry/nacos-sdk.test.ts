import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { createSdkClient, type SdkInstance, type SdkNamingClient } from '../support/nacos-sdk.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * The official Nacos Node SDK (npm `nacos`) against the embedded registry: whatever it can tell
 * apart from a real Nacos server is a bug of ours.
 */
describe('official Nacos SDK against the embedded registry', () => {
  let registry: RunningRegistry;
  const clients: SdkNamingClient[] = [];

  const client = async (options: { namespace?: string; username?: string; password?: string } = {}) => {
    const c = await createSdkClient(registry.endpoint, options);
    clients.push(c);
    return c;
  };
  const hostsOf = (list: SdkInstance[]) => list.map((h) => `${h.ip}:${h.port}`).sort();

  beforeAll(async () => {
    registry = await startRegistry({
      port: 0,
      // Short expiry so the test sees it; a long poll period so a change seen quickly came by push.
      expiry: { unhealthyAfterMs: 1_500, expireAfterMs: 3_000, sweepIntervalMs: 100 },
      beatIntervalMs: 300,
      cacheMillis: 120_000,
    });
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });

  afterAll(async () => {
    await registry.close();
  });

  it('registers an instance that getAllInstances returns with its metadata', async () => {
    const nacos = await client();
    await nacos.registerInstance('sdk-orders', {
      ip: '10.1.0.1',
      port: 8080,
      weight: 2,
      ephemeral: false,
      clusterName: 'SH',
      metadata: { site: 'x11', version: '1.0.0' },
    });
    const hosts = await nacos.getAllInstances('sdk-orders', 'DEFAULT_GROUP', '', false);
    expect(hosts).toHaveLength(1);
    expect(hosts[0]).toMatchObject({
      ip: '10.1.0.1',
      port: 8080,
      weight: 2,
      healthy: true,
      enabled: true,
      ephemeral: false,
      clusterName: 'SH',
      serviceName: 'DEFAULT_GROUP@@sdk-orders',
      instanceId: '10.1.0.1#8080#SH#DEFAULT_GROUP@@sdk-orders',
      metadata: { site: 'x11', version: '1.0.0' },
    });

    await nacos.deregisterInstance('sdk-orders', { ip: '10.1.0.1', port: 8080, ephemeral: false, clusterName: 'SH' });
    expect(registry.store.getService('public', 'DEFAULT_GROUP', 'sdk-orders')?.instances.size).toBe(0);
  });

  it('pushes a change made by another client to a subscriber over UDP', async () => {
    const provider = await client();
    const consumer = await client();
    await provider.registerInstance('sdk-push', { ip: '10.1.1.1', port: 80, ephemeral: false });

    const seen: string[][] = [];
    consumer.subscribe({ serviceName: 'sdk-push' }, (hosts) => seen.push(hostsOf(hosts)));
    await waitUntil(() => seen.some((s) => s.includes('10.1.1.1:80')), { message: 'initial host list' });
    // The SDK lists once more a second after subscribing; after that its next poll is 120 s away,
    // so whatever arrives before the timeout below can only have come by push.
    await waitUntil(() => registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@sdk-push')[0]?.refreshes === 2, {
      message: 'the SDK follow-up poll',
    });
    const acked = registry.pusher.stats().acked;

    await provider.registerInstance('sdk-push', { ip: '10.1.1.2', port: 80, ephemeral: false });
    await waitUntil(() => seen.some((s) => s.includes('10.1.1.2:80')), { message: 'pushed change' });
    expect(registry.pusher.stats().acked).toBeGreaterThan(acked);
    expect(registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@sdk-push')[0]).toMatchObject({
      address: '127.0.0.1',
      refreshes: 2,
    });
  });

  it('turns an instance unhealthy when its client stops beating, then removes it', async () => {
    const observer = await client();
    const leaving = await client();
    // A service holds ephemeral instances only, so the instance that stays is ephemeral too; it is
    // kept alive by light beats over HTTP, as a well-behaved client would.
    await observer.registerInstance('sdk-expiry', { ip: '10.1.2.1', port: 80 });
    const beat = () =>
      fetch(`${registry.url}/nacos/v1/ns/instance/beat?serviceName=sdk-expiry&ip=10.1.2.1&port=80`, { method: 'PUT' });
    const beats = setInterval(() => void beat().catch(() => {}), 200);
    try {
      await leaving.registerInstance('sdk-expiry', { ip: '10.1.2.2', port: 80 });
      await leaving.close();

      const read = async () => observer.getAllInstances('sdk-expiry', 'DEFAULT_GROUP', '', false);
      await waitUntil(async () => (await read()).find((h) => h.ip === '10.1.2.2')?.healthy === false, {
        message: 'silent instance unhealthy',
      });
      await waitUntil(async () => hostsOf(await read()).join() === '10.1.2.1:80', { message: 'silent instance removed' });
      expect((await read())[0]?.healthy).toBe(true);
    } finally {
      clearInterval(beats);
    }
  });

  it("keeps a beating client's instance alive, re-creating it from a full beat", async () => {
    const nacos = await client();
    await nacos.registerInstance('sdk-beat', { ip: '10.1.3.1', port: 80, metadata: { k: 'v' } });
    // The SDK's first beat comes about 10 s after the client starts, later than this registry's
    // 3 s expiry: the instance goes, and the SDK's full beat brings it back with its metadata.
    // From then on it beats at the 300 ms interval the registry asks for and stays healthy.
    const instance = () => registry.store.getService('public', 'DEFAULT_GROUP', 'sdk-beat')?.instances.get('10.1.3.1#80#DEFAULT');
    await waitUntil(() => instance() === undefined, { message: 'instance expired before the first beat' });
    await waitUntil(() => (instance()?.beats ?? 0) >= 5, { timeoutMs: 20_000, message: 'five beats' });
    expect(instance()).toMatchObject({ healthy: true, ephemeral: true, metadata: { k: 'v' } });
  });

  it('keeps namespaces and groups apart', async () => {
    const pub = await client();
    const dev = await client({ namespace: 'dev' });
    await pub.registerInstance('sdk-shared', { ip: '10.2.0.1', port: 1, ephemeral: false });
    await dev.registerInstance('sdk-shared', { ip: '10.2.0.2', port: 1, ephemeral: false });
    await pub.registerInstance('sdk-shared', { ip: '10.2.0.3', port: 1, ephemeral: false }, 'BLUE');

    expect(hostsOf(await pub.getAllInstances('sdk-shared', 'DEFAULT_GROUP', '', false))).toEqual(['10.2.0.1:1']);
    expect(hostsOf(await dev.getAllInstances('sdk-shared', 'DEFAULT_GROUP', '', false))).toEqual(['10.2.0.2:1']);
    expect(hostsOf(await pub.getAllInstances('sdk-shared', 'BLUE', '', false))).toEqual(['10.2.0.3:1']);
    expect(await dev.getAllInstances('sdk-shared', 'BLUE', '', false)).toEqual([]);
  });
});

describe('official Nacos SDK against a registry with users', () => {
  let registry: RunningRegistry;

  beforeAll(async () => {
    registry = await startRegistry({ port: 0, users: new Map([['nacos', 's3cret']]) });
  });
  afterAll(async () => {
    await registry.close();
  });

  it('works with the right credentials and is refused with wrong ones', async () => {
    const good = await createSdkClient(registry.endpoint, { username: 'nacos', password: 's3cret' });
    const bad = await createSdkClient(registry.endpoint, { username: 'nacos', password: 'wrong' });
    try {
      await good.registerInstance('sdk-auth', { ip: '10.3.0.1', port: 1, ephemeral: false });
      expect(hostsOf(await good.getAllInstances('sdk-auth', 'DEFAULT_GROUP', '', false))).toEqual(['10.3.0.1:1']);
      await expect(bad.registerInstance('sdk-auth', { ip: '10.3.0.2', port: 1, ephemeral: false })).rejects.toThrow();
      expect(registry.store.getService('public', 'DEFAULT_GROUP', 'sdk-auth')?.instances.size).toBe(1);
    } finally {
      await Promise.all([good.close(), bad.close()]);
    }
  });

  function hostsOf(list: SdkInstance[]) {
    return list.map((h) => `${h.ip}:${h.port}`).sort();
  }
});
