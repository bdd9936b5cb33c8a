import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterSpec, ServiceKey } from '../../src/model/index.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { formOf } from '../../test/support/http.js';
import { createSdkClient } from '../../test/support/nacos-sdk.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createNacosAdapter, type NacosAdapter } from './nacos-adapter.js';

const silent = pino({ level: 'silent' });
const HOUR = 3_600_000;

const clusterSpec = (endpoint: string, options: Record<string, unknown>): ClusterSpec => ({
  id: 'nacos-watch',
  kind: 'nacos',
  endpoints: [endpoint],
  labels: {},
  options,
});

const key = (name: string, namespace = 'public'): ServiceKey => ({ namespace, group: 'DEFAULT_GROUP', name });

/** A log that tests can read: one parsed object per line. */
function capturedLogger(): { logger: pino.Logger; entries: Array<Record<string, unknown>> } {
  const entries: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void entries.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, entries };
}

describe('NacosAdapter watch', () => {
  let registry: RunningRegistry;
  const adapters: NacosAdapter[] = [];

  const adapterWith = (options: Record<string, unknown>, logger: pino.Logger = silent) => {
    const adapter = createNacosAdapter(clusterSpec(registry.endpoint, options), { logger });
    adapters.push(adapter);
    return adapter;
  };
  const register = (name: string, ip: string, port = 8080, namespaceId = 'public') =>
    fetch(`${registry.url}/nacos/v1/ns/instance`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: formOf({ serviceName: name, ip, port, namespaceId, ephemeral: false }).toString(),
    }).then((r) => expect(r.status).toBe(200));
  const subscribed = (name: string, namespaceId = 'public') =>
    registry.pusher.subscribersOf(namespaceId, `DEFAULT_GROUP@@${name}`).length > 0;

  beforeAll(async () => {
    registry = await startRegistry({ port: 0, namespaces: [{ id: 'dev', name: 'dev', description: '' }] });
  });
  afterEach(async () => {
    await Promise.all(adapters.splice(0).map((a) => a.close()));
  });
  afterAll(async () => {
    await registry.close();
  });

  it('hears a change made by the official SDK through UDP push (v1), long before any poll', async () => {
    const adapter = adapterWith({ apiVersion: 'v1', pollIntervalMs: HOUR });
    let calls = 0;
    adapter.watch(key('pushed'), () => (calls += 1));
    // Watch, then read (as the engine does): the read subscribes to push.
    await adapter.listInstances(key('pushed'));
    expect(subscribed('pushed')).toBe(true);
    const acked = registry.pusher.stats().acked;

    const sdk = await createSdkClient(registry.endpoint);
    try {
      await sdk.registerInstance('pushed', { ip: '10.30.0.1', port: 8080, ephemeral: false });
      await waitUntil(() => calls > 0, { message: 'onChange after the SDK registered' });
    } finally {
      await sdk.close();
    }
    // It came by push: the registry counted our ack, and with an hour between polls nothing else runs.
    await waitUntil(() => registry.pusher.stats().acked > acked, { message: 'push ack counted' });
    expect(adapter.stats().push).toMatchObject({ clientIP: '127.0.0.1' });
    expect(adapter.stats().push?.acked).toBeGreaterThan(0);
    expect(registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@pushed')[0]).toMatchObject({ address: '127.0.0.1', refreshes: 1 });
  });

  it('shares one subscription and one socket among watchers; unsubscribing removes only that watcher', async () => {
    const adapter = adapterWith({ apiVersion: 'v1', pollIntervalMs: HOUR });
    let first = 0;
    let second = 0;
    let other = 0;
    const stopFirst = adapter.watch(key('shared'), () => (first += 1));
    const stopSecond = adapter.watch(key('shared'), () => (second += 1));
    adapter.watch(key('shared-other'), () => (other += 1));
    await adapter.listInstances(key('shared'));
    await adapter.listInstances(key('shared-other'));
    expect(subscribed('shared') && subscribed('shared-other')).toBe(true);
    expect(adapter.stats().watchedServices).toBe(2);
    // One subscriber per service: one list, one socket.
    const [sub] = registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@shared');
    expect(registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@shared')).toHaveLength(1);
    expect(registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@shared-other')[0]?.port).toBe(sub?.port);

    await register('shared', '10.30.1.1');
    await waitUntil(() => first === 1 && second === 1, { message: 'both watchers told' });
    expect(other).toBe(0);

    stopFirst();
    stopFirst(); // twice is harmless
    await register('shared', '10.30.1.2');
    await waitUntil(() => second === 2, { message: 'remaining watcher told' });
    expect(first).toBe(1);
    expect(adapter.stats().watchedServices).toBe(2);

    stopSecond();
    expect(adapter.stats().watchedServices).toBe(1);
    // The registry still pushes (it keeps the subscriber a while); the push is acknowledged and goes nowhere.
    const acked = adapter.stats().push?.acked ?? 0;
    await register('shared', '10.30.1.3');
    await waitUntil(() => (adapter.stats().push?.acked ?? 0) > acked, { message: 'push after unsubscribe received' });
    expect([first, second, other]).toEqual([1, 2, 0]);
  });

  it('tells the watcher of the namespace that changed', async () => {
    const adapter = adapterWith({ apiVersion: 'v1', pollIntervalMs: HOUR });
    let dev = 0;
    adapter.watch(key('ns-scoped', 'dev'), () => (dev += 1));
    await adapter.listInstances(key('ns-scoped', 'dev'));
    expect(subscribed('ns-scoped', 'dev')).toBe(true);
    await register('ns-scoped', '10.30.2.1', 8080, 'dev');
    await waitUntil(() => dev > 0, { message: 'dev watcher told' });
  });

  it('polls where push is impossible (v3), and stops polling once unwatched', async () => {
    const adapter = adapterWith({ apiVersion: 'v3', pollIntervalMs: 50 });
    let calls = 0;
    const stop = adapter.watch(key('polled'), () => (calls += 1));
    // The first poll records a baseline; keep changing the service until a later poll sees a change.
    let port = 9000;
    await waitUntil(
      async () => {
        await register('polled', '10.30.3.1', (port += 1));
        return calls > 0;
      },
      { intervalMs: 100, message: 'a poll noticed a change' },
    );
    // Nothing subscribed to push: v3 has none.
    expect(registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@polled')).toEqual([]);
    expect(adapter.stats().push).toBeUndefined();
    stop();
    expect(adapter.stats().watchedServices).toBe(0);
  });

  it('polls under v1 too: notices a change that was never pushed, and keeps the subscription fresh', async () => {
    const adapter = adapterWith({ apiVersion: 'v1', pollIntervalMs: 50 });
    let calls = 0;
    adapter.watch(key('polled-v1'), () => (calls += 1));
    await waitUntil(() => subscribed('polled-v1'), { message: 'subscribed' });
    await register('polled-v1', '10.30.6.1');
    await waitUntil(() => calls > 0, { message: 'registration noticed' });
    const seen = calls;
    // Changed behind the registry's back: no change event, so no push. Only a poll can see it.
    const stored = registry.store.getService('public', 'DEFAULT_GROUP', 'polled-v1')?.instances.get('10.30.6.1#8080#DEFAULT');
    expect(stored).toBeDefined();
    if (stored) stored.weight = 5;
    await waitUntil(() => calls > seen, { message: 'unpushed change noticed by a poll' });
    // Each poll is a v1 list with udpPort: it refreshes the push subscription (Nacos drops silent subscribers).
    // (A late notice of the registration may have satisfied the wait above before any poll ran.)
    await waitUntil(() => (registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@polled-v1')[0]?.refreshes ?? 0) > 1, {
      message: 'subscription refreshed by polls',
    });
  });

  it('keeps watching through an outage and notices what changed meanwhile', async () => {
    const flaky = await startRegistry({ port: 0 });
    const { logger, entries } = capturedLogger();
    const adapter = createNacosAdapter(clusterSpec(flaky.endpoint, { apiVersion: 'v1', pollIntervalMs: 50, requestTimeoutMs: 1000 }), { logger });
    adapters.push(adapter);
    let calls = 0;
    adapter.watch(key('outage'), () => (calls += 1));
    // Watch, then read (as the engine does): the baseline, and the push subscription.
    await adapter.listInstances(key('outage'));
    expect(flaky.pusher.subscribersOf('public', 'DEFAULT_GROUP@@outage')).toHaveLength(1);
    const port = flaky.port;
    await flaky.close();
    await waitUntil(() => entries.some((e) => e.msg === 'nacos watch poll failed; retrying at the next interval'), {
      message: 'poll failure logged',
    });
    expect(calls).toBe(0);

    const back = await startRegistry({ port });
    try {
      // The registry came back with an instance the adapter has not seen.
      back.store.register('public', 'DEFAULT_GROUP', 'outage', {
        ip: '10.30.5.1', port: 1, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {},
      });
      await waitUntil(() => calls > 0, { message: 'watcher told after the outage' });
      expect(entries.some((e) => e.msg === 'nacos watch reads again')).toBe(true);
      // One warning per outage, not one per poll.
      expect(entries.filter((e) => e.msg === 'nacos watch poll failed; retrying at the next interval')).toHaveLength(1);
      // The new registry knows the subscription again.
      await waitUntil(() => back.pusher.subscribersOf('public', 'DEFAULT_GROUP@@outage').length > 0, { message: 're-subscribed' });
    } finally {
      await adapter.close();
      await back.close();
    }
  });

  it('survives a watcher that throws', async () => {
    const adapter = adapterWith({ apiVersion: 'v1', pollIntervalMs: HOUR });
    let calls = 0;
    adapter.watch(key('throwing'), () => {
      throw new Error('watcher bug');
    });
    adapter.watch(key('throwing'), () => (calls += 1));
    await adapter.listInstances(key('throwing'));
    expect(subscribed('throwing')).toBe(true);
    await register('throwing', '10.30.4.1');
    await waitUntil(() => calls === 1, { message: 'second watcher told' });
    await register('throwing', '10.30.4.2');
    await waitUntil(() => calls === 2, { message: 'second watcher told again' });
  });
});
