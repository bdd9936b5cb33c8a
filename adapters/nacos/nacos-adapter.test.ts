import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterSpec, Instance, ServiceKey } from '../../src/model/index.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { formOf } from '../../test/support/http.js';
import { createNacosAdapter, type NacosAdapter } from './nacos-adapter.js';
import { NacosApplyError } from './nacos-apply-error.js';
import { NacosRequestError } from './nacos-request-error.js';

const silent = pino({ level: 'silent' });

const clusterSpec = (endpoints: string[], options: Record<string, unknown>): ClusterSpec => ({
  id: 'nacos-test',
  kind: 'nacos',
  endpoints,
  labels: {},
  options,
});

const instance = (over: Partial<Instance> = {}): Instance => ({
  ip: '10.20.0.1',
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: {},
  ...over,
});

const byAddress = (a: Instance, b: Instance) => a.ip.localeCompare(b.ip) || a.port - b.port || a.cluster.localeCompare(b.cluster);

/** An endpoint nothing listens on: a registry that was started and closed. */
async function deadEndpoint(): Promise<string> {
  const gone = await startRegistry({ port: 0 });
  await gone.close();
  return gone.endpoint;
}

/** The adapter contract, run against the embedded registry once per API dialect. */
describe.each(['v1', 'v3'] as const)('NacosAdapter over %s', (apiVersion) => {
  let registry: RunningRegistry;
  let adapter: NacosAdapter;
  let dead: string;

  beforeAll(async () => {
    registry = await startRegistry({ port: 0, beatIntervalMs: 1234, namespaces: [{ id: 'dev', name: 'dev', description: '' }] });
    adapter = createNacosAdapter(clusterSpec([registry.endpoint], { apiVersion, servicePageSize: 100 }), { logger: silent });
    dead = await deadEndpoint();
  });
  afterAll(async () => {
    await adapter?.close();
    await registry?.close();
  });

  const key = (name: string, group = 'DEFAULT_GROUP', namespace = 'public'): ServiceKey => ({ namespace, group, name });
  const stored = (k: ServiceKey) =>
    [...(registry.store.getService(k.namespace, k.group, k.name)?.instances.values() ?? [])].map((i) => `${i.ip}:${i.port}#${i.clusterName}`).sort();
  const post = (path: string, params: Record<string, string | number | boolean>) =>
    fetch(`${registry.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: formOf(params).toString(),
    });

  it('uses the configured API version', async () => {
    expect(await adapter.resolveApiVersion()).toBe(apiVersion);
  });

  it('lists every service of exactly one group, across pages', async () => {
    const seed = (namespaceId: string, group: string, count: number, prefix = 'svc') => {
      for (let n = 0; n < count; n += 1) {
        registry.store.register(namespaceId, group, `${prefix}-${n}`, {
          ip: '10.20.1.1', port: 1, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {},
        });
      }
    };
    seed('public', 'PAGED', 1200);
    // Groups whose names contain PAGED: v3 filters groups by substring, the adapter must not.
    seed('public', 'PAGED-2', 7, 'decoy');
    seed('public', 'XPAGED', 3, 'xdecoy');
    seed('dev', 'PAGED', 2, 'dev');

    const services = await adapter.listServices({ namespace: 'public', group: 'PAGED' });
    expect(services).toHaveLength(1200);
    expect(new Set(services.map((s) => s.name))).toEqual(new Set(Array.from({ length: 1200 }, (_, n) => `svc-${n}`)));
    expect(services.every((s) => s.namespace === 'public' && s.group === 'PAGED')).toBe(true);

    expect((await adapter.listServices({ namespace: 'dev', group: 'PAGED' })).map((s) => s.name).sort()).toEqual(['dev-0', 'dev-1']);
    // The empty namespace is public; keys come back as asked.
    const viaEmpty = await adapter.listServices({ namespace: '', group: 'XPAGED' });
    expect(viaEmpty.map((s) => s.name).sort()).toEqual(['xdecoy-0', 'xdecoy-1', 'xdecoy-2']);
    expect(viaEmpty[0]).toMatchObject({ namespace: '', group: 'XPAGED' });
    expect(await adapter.listServices({ namespace: 'public', group: 'NO-SUCH-GROUP' })).toEqual([]);
  });

  it('maps every field of a listed instance', async () => {
    const common = { serviceName: 'mapped', groupName: 'G-MAP', namespaceId: 'dev', ephemeral: false };
    expect((await post('/nacos/v1/ns/instance', {
      ...common, ip: '10.20.2.1', port: 8081, weight: 2.5, healthy: false, clusterName: 'BJ',
      metadata: JSON.stringify({ zone: 'a', n: 1, on: true, nested: { x: 1 } }),
    })).status).toBe(200);
    expect((await post('/nacos/v1/ns/instance', { ...common, ip: '10.20.2.2', port: 8082, enabled: false })).status).toBe(200);

    const listed = (await adapter.listInstances(key('mapped', 'G-MAP', 'dev'))).sort(byAddress);
    const first = instance({
      ip: '10.20.2.1',
      port: 8081,
      weight: 2.5,
      healthy: false,
      ephemeral: false,
      cluster: 'BJ',
      metadata: { zone: 'a', n: '1', on: 'true', nested: '{"x":1}' },
    });
    const disabled = instance({ ip: '10.20.2.2', port: 8082, enabled: false, ephemeral: false });
    // The v1 list leaves disabled instances out, as Nacos' own client list does; the v3 admin list keeps them.
    expect(listed).toEqual(apiVersion === 'v1' ? [first] : [first, disabled]);
  });

  it('reads a service that does not exist as empty', async () => {
    expect(await adapter.listInstances(key('never-registered'))).toEqual([]);
  });

  it('registers, updates and removes instances with every field', async () => {
    const k = key('applied', 'G-APPLY', 'dev');
    const a = instance({ ip: '10.20.3.1', weight: 2, cluster: 'SH', metadata: { 'regsync.task': 't1', v: '1' } });
    const b = instance({ ip: '10.20.3.2', healthy: false, enabled: false });
    await adapter.apply(k, { upsert: [a, b], remove: [] });
    expect(stored(k)).toEqual(['10.20.3.1:8080#SH', '10.20.3.2:8080#DEFAULT']);
    const storedB = registry.store.getService('dev', 'G-APPLY', 'applied')?.instances.get('10.20.3.2#8080#DEFAULT');
    expect(storedB).toMatchObject({ healthy: false, enabled: false, ephemeral: true, weight: 1 });
    expect((await adapter.listInstances(k)).sort(byAddress)).toEqual(apiVersion === 'v1' ? [a] : [a, b]);

    const a2 = { ...a, weight: 7, metadata: { 'regsync.task': 't1', v: '2' } };
    await adapter.apply(k, { upsert: [a2], remove: [b] });
    expect(await adapter.listInstances(k)).toEqual([a2]);
    expect(stored(k)).toEqual(['10.20.3.1:8080#SH']);

    // Removing what is already gone succeeds: apply is idempotent.
    await adapter.apply(k, { upsert: [], remove: [b, a2] });
    await adapter.apply(k, { upsert: [], remove: [a2] });
    expect(await adapter.listInstances(k)).toEqual([]);
  });

  it('tries every write and reports each failure', async () => {
    const k = key('partly');
    const good = instance({ ip: '10.20.4.1' });
    const bad = instance({ ip: '10.20.4.2', cluster: 'no_underscores' });
    const error = await adapter.apply(k, { upsert: [bad, good], remove: [] }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(NacosApplyError);
    const applyError = error as NacosApplyError;
    expect(applyError).toMatchObject({ name: 'NacosApplyError', code: 'nacos-apply-failed', attempted: 2 });
    expect(applyError.failures).toHaveLength(1);
    expect(applyError.failures[0]).toMatchObject({ op: 'register', instance: '10.20.4.2:8080#no_underscores' });
    expect(applyError.failures[0]?.error).toBeInstanceOf(NacosRequestError);
    expect(applyError.failures[0]?.error).toMatchObject({ status: 400, code: 'nacos-http-error' });
    expect(applyError.message).toMatch(/1 of 2 writes to public\/DEFAULT_GROUP@@partly failed/);
    expect(applyError.message).toMatch(/cluster name can only have these characters/);
    expect(stored(k)).toEqual(['10.20.4.1:8080#DEFAULT']);
  });

  it('rejects reads, writes and beats when the registry cannot be reached', async () => {
    const offline = createNacosAdapter(clusterSpec([dead], { apiVersion }), { logger: silent });
    try {
      const k = key('anything');
      for (const attempt of [
        () => offline.listInstances(k),
        () => offline.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' }),
        () => offline.apply(k, { upsert: [instance()], remove: [] }),
        () => offline.heartbeat(k, instance()),
      ]) {
        const err = await attempt().then(() => undefined, (e: unknown) => e);
        const cause = err instanceof NacosApplyError ? err.failures[0]?.error : err;
        expect(cause).toBeInstanceOf(NacosRequestError);
        expect(cause).toMatchObject({ code: 'nacos-unreachable', endpoint: dead, clusterId: 'nacos-test' });
        expect((cause as Error).message).toContain(dead);
      }
      // An empty plan needs no server.
      await offline.apply(k, { upsert: [], remove: [] });
    } finally {
      await offline.close();
    }
  });

  it('tries the endpoints in turn', async () => {
    const failover = createNacosAdapter(clusterSpec([dead, registry.endpoint], { apiVersion }), { logger: silent });
    try {
      await failover.apply(key('failover'), { upsert: [instance({ ip: '10.20.5.1' })], remove: [] });
      expect(await failover.listInstances(key('failover'))).toEqual([instance({ ip: '10.20.5.1' })]);
    } finally {
      await failover.close();
    }
  });

  it('renews instances, and says unknown once the registry lost one', async () => {
    const k = key('beaten', 'G-BEAT');
    const live = instance({ ip: '10.20.6.1', metadata: { m: '1' } });
    await adapter.apply(k, { upsert: [live], remove: [] });
    const beats = () => registry.store.getService('public', 'G-BEAT', 'beaten')?.instances.get('10.20.6.1#8080#DEFAULT')?.beats;

    expect(await adapter.heartbeat(k, live)).toBe('ok');
    expect(beats()).toBe(1);
    expect(await adapter.heartbeat(k, live)).toBe('ok');
    expect(beats()).toBe(2);
    // v1 answers clientBeatInterval; v3 does not, the default stays.
    expect(adapter.heartbeatIntervalMs).toBe(apiVersion === 'v1' ? 1234 : 5000);

    registry.store.deregister('public', 'G-BEAT', 'beaten', '10.20.6.1', 8080, 'DEFAULT');
    expect(await adapter.heartbeat(k, live)).toBe('unknown');
    expect(beats()).toBeUndefined();

    // What the engine does with `unknown`: register again, then beats work.
    await adapter.apply(k, { upsert: [live], remove: [] });
    expect(await adapter.heartbeat(k, live)).toBe('ok');
    expect(beats()).toBe(1);
  });

  it('does not beat persistent instances', async () => {
    const k = key('persistent-beat');
    const kept = instance({ ip: '10.20.7.1', ephemeral: false });
    await adapter.apply(k, { upsert: [kept], remove: [] });
    expect(await adapter.heartbeat(k, kept)).toBe('ok');
    expect(registry.store.getService('public', 'DEFAULT_GROUP', 'persistent-beat')?.instances.get('10.20.7.1#8080#DEFAULT')?.beats).toBe(0);
  });

  it('rejects every call once closed, and closes twice without harm', async () => {
    const closing = createNacosAdapter(clusterSpec([registry.endpoint], { apiVersion }), { logger: silent });
    expect(await closing.listInstances(key('closing'))).toEqual([]);
    await closing.close();
    await closing.close();
    await expect(closing.listInstances(key('closing'))).rejects.toMatchObject({ code: 'nacos-closed' });
    expect(closing.watch(key('closing'), () => {})).toBeTypeOf('function');
    expect(closing.stats().watchedServices).toBe(0);
  });
});

describe('NacosAdapter v1 full beats', () => {
  it('lets the registry re-create a lost instance from a full beat when light beats are off', async () => {
    const registry = await startRegistry({ port: 0 });
    const adapter = createNacosAdapter(clusterSpec([registry.endpoint], { apiVersion: 'v1', lightBeats: false }), { logger: silent });
    try {
      const k: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 'full-beat' };
      const live = instance({ ip: '10.20.8.1', weight: 3, metadata: { m: 'x' } });
      await adapter.apply(k, { upsert: [live], remove: [] });
      expect(await adapter.heartbeat(k, live)).toBe('ok');
      registry.store.deregister('public', 'DEFAULT_GROUP', 'full-beat', '10.20.8.1', 8080, 'DEFAULT');
      expect(await adapter.heartbeat(k, live)).toBe('ok');
      expect(await adapter.listInstances(k)).toEqual([live]);
    } finally {
      await adapter.close();
      await registry.close();
    }
  });
});
