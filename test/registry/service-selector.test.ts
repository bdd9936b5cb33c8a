import { createSocket, type Socket } from 'node:dgram';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CmdbCache, FileCmdbProvider } from '../../src/cmdb/index.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { NACOS_SCENARIO_YAML } from '../support/cmdb-fixtures.js';
import { formOf, type ParamValues } from '../support/http.js';
import { createSdkClient, type SdkInstance, type SdkNamingClient } from '../support/nacos-sdk.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * Service create/update/get and label selectors over real HTTP, with labels from a real CMDB file
 * (`FileCmdbProvider` + `CmdbCache`). Instance and consumer IPs are label lookup keys only: nothing
 * here ever sends a packet to them; pushes go to sockets on 127.0.0.1.
 */

const SITE_SELECTOR = JSON.stringify({ type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.site' });
const PROVIDERS = ['11.11.11.11', '22.22.22.22'];

let dir: string;
const closers: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'regsync-selector-'));
});
afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await rm(dir, { recursive: true, force: true });
});

/** A CMDB cache over a YAML file, loaded before it is returned. */
async function cmdbFrom(name: string, yaml: string): Promise<CmdbCache> {
  const path = join(dir, name);
  await writeFile(path, yaml);
  const provider = new FileCmdbProvider({ path });
  await provider.start();
  const cache = new CmdbCache({ provider });
  await cache.start();
  closers.push(() => provider.close(), () => cache.stop());
  return cache;
}

async function registryWith(options: Parameters<typeof startRegistry>[0]): Promise<RunningRegistry> {
  const registry = await startRegistry({ port: 0, ...options });
  closers.push(() => registry.close());
  return registry;
}

function client(registry: RunningRegistry) {
  const send = async (method: string, path: string, params: ParamValues = {}) => {
    const res = await fetch(`${registry.url}${path}?${formOf(params)}`, { method });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) as Record<string, unknown> };
  };
  const hostIps = (body: { hosts?: Array<{ ip: string }> }) => (body.hosts ?? []).map((h) => h.ip).sort();
  return {
    send,
    register: (serviceName: string, ip: string, extra: ParamValues = {}) =>
      send('POST', '/nacos/v1/ns/instance', { serviceName, ip, port: 8080, ...extra }),
    /** The IPs a v1 list shows, for a consumer named by `clientIP` (or none). */
    v1Ips: async (serviceName: string, clientIP?: string) =>
      hostIps((await send('GET', '/nacos/v1/ns/instance/list', { serviceName, ...(clientIP ? { clientIP } : {}) })).json()),
    /** The IPs a v2 list shows, for a consumer named by `ip` (or none). */
    v2Ips: async (serviceName: string, ip?: string) =>
      hostIps((await send('GET', '/nacos/v2/ns/instance/list', { serviceName, ...(ip ? { ip } : {}) })).json().data as { hosts: Array<{ ip: string }> }),
    detail: async (serviceName: string, extra: ParamValues = {}) => send('GET', '/nacos/v1/ns/service', { serviceName, ...extra }),
  };
}

describe('label selector with labels from the CMDB', () => {
  let registry: RunningRegistry;
  let api: ReturnType<typeof client>;

  beforeAll(async () => {
    registry = await registryWith({ cmdb: await cmdbFrom('scenario.yaml', NACOS_SCENARIO_YAML) });
    api = client(registry);
  });

  it('selects the providers of the consumer\'s site on the v1 and v2 lists (selector set by POST)', async () => {
    expect((await api.send('POST', '/nacos/v1/ns/service', { serviceName: 'sel-cmdb', selector: SITE_SELECTOR })).text).toBe('ok');
    for (const ip of PROVIDERS) expect((await api.register('sel-cmdb', ip)).text).toBe('ok');

    expect(await api.v1Ips('sel-cmdb', '33.33.33.33')).toEqual(['11.11.11.11']);
    expect(await api.v1Ips('sel-cmdb', '44.44.44.44')).toEqual(['22.22.22.22']);
    expect(await api.v1Ips('sel-cmdb', '55.55.55.55')).toEqual(PROVIDERS);
    expect(await api.v1Ips('sel-cmdb', '66.66.66.66')).toEqual(PROVIDERS);
    expect(await api.v1Ips('sel-cmdb')).toEqual(PROVIDERS);

    expect(await api.v2Ips('sel-cmdb', '33.33.33.33')).toEqual(['11.11.11.11']);
    expect(await api.v2Ips('sel-cmdb', '44.44.44.44')).toEqual(['22.22.22.22']);
    expect(await api.v2Ips('sel-cmdb', '55.55.55.55')).toEqual(PROVIDERS);
    expect(await api.v2Ips('sel-cmdb')).toEqual(PROVIDERS);
  });

  it('applies a selector set later by PUT, keeps it across registrations, and drops it again', async () => {
    for (const ip of PROVIDERS) await api.register('sel-put', ip);
    expect(await api.v1Ips('sel-put', '33.33.33.33')).toEqual(PROVIDERS);

    const exists = await api.send('POST', '/nacos/v1/ns/service', { serviceName: 'sel-put', selector: SITE_SELECTOR });
    expect(exists.status).toBe(400);
    expect(exists.text).toContain('specified service DEFAULT_GROUP@@sel-put already exists!');

    expect((await api.send('PUT', '/nacos/v1/ns/service', { serviceName: 'sel-put', protectThreshold: 0, selector: SITE_SELECTOR })).text).toBe('ok');
    expect(await api.v1Ips('sel-put', '33.33.33.33')).toEqual(['11.11.11.11']);
    // A new registration (and a re-registration) leaves the service's selector alone.
    await api.register('sel-put', '22.22.22.23');
    await api.register('sel-put', '11.11.11.11', { weight: 3 });
    expect(await api.v1Ips('sel-put', '33.33.33.33')).toEqual(['11.11.11.11']);
    expect((await api.detail('sel-put')).json().selector).toMatchObject({ type: 'label', labels: ['site'] });

    await api.send('PUT', '/nacos/v1/ns/service', { serviceName: 'sel-put', protectThreshold: 0, selector: '{"type":"none"}' });
    expect(await api.v1Ips('sel-put', '33.33.33.33')).toEqual(['11.11.11.11', '22.22.22.22', '22.22.22.23']);
  });

  it('filters clusters and health before and after the selector, like Nacos', async () => {
    await api.send('POST', '/nacos/v1/ns/service', { serviceName: 'sel-filters', selector: SITE_SELECTOR });
    await api.register('sel-filters', '11.11.11.11', { clusterName: 'A', ephemeral: false });
    await api.register('sel-filters', '22.22.22.22', { clusterName: 'B', ephemeral: false, healthy: false });
    const ips = async (params: ParamValues) =>
      ((await api.send('GET', '/nacos/v1/ns/instance/list', { serviceName: 'sel-filters', ...params })).json().hosts as Array<{ ip: string }>).map((h) => h.ip);
    // Only cluster B is asked for: nothing there matches 33's site, so all of B.
    expect(await ips({ clientIP: '33.33.33.33', clusters: 'B' })).toEqual(['22.22.22.22']);
    // 44 sees 22 only, which is unhealthy: healthyOnly then leaves nothing.
    expect(await ips({ clientIP: '44.44.44.44', healthyOnly: true })).toEqual([]);
    expect(await ips({ clientIP: '55.55.55.55', healthyOnly: true })).toEqual(['11.11.11.11']);
  });

  it('never applies the selector on the v3 lists', async () => {
    const v3 = async (path: string) =>
      ((await api.send('GET', path, { serviceName: 'sel-cmdb', clientIP: '33.33.33.33', ip: '33.33.33.33' })).json().data as Array<{ ip: string }>)
        .map((h) => h.ip)
        .sort();
    expect(await v3('/nacos/v3/admin/ns/instance/list')).toEqual(PROVIDERS);
    expect(await v3('/nacos/v3/client/ns/instance/list')).toEqual(PROVIDERS);
  });

  it('answers the v2 list wrapped, with the ServiceInfo of the v1 list, and v2 errors', async () => {
    const v2 = (await api.send('GET', '/nacos/v2/ns/instance/list', { serviceName: 'sel-cmdb', ip: '44.44.44.44' })).json();
    const v1 = (await api.send('GET', '/nacos/v1/ns/instance/list', { serviceName: 'sel-cmdb', clientIP: '44.44.44.44' })).json();
    expect(v2).toMatchObject({ code: 0, message: 'success' });
    expect(v2.data).toEqual(v1);
    expect(v2.data).toMatchObject({ name: 'DEFAULT_GROUP@@sel-cmdb', groupName: 'DEFAULT_GROUP', hosts: [expect.objectContaining({ ip: '22.22.22.22' })] });

    const missing = await api.send('GET', '/nacos/v2/ns/instance/list', { ip: '44.44.44.44' });
    expect(missing.status).toBe(400);
    expect(missing.json()).toMatchObject({ code: 10000, message: 'parameter missing' });
    expect(String(missing.json().data)).toContain("'serviceName'");
  });
});

describe('label selector with provider labels from instance metadata', () => {
  let api: ReturnType<typeof client>;
  let cmdb: CmdbCache;

  beforeAll(async () => {
    // The same CMDB without the providers: their labels must come from the metadata of the copies.
    const consumersOnly = NACOS_SCENARIO_YAML.replace(/^\s+(11\.11\.11\.11|22\.22\.22\.22):.*\n/gm, '');
    cmdb = await cmdbFrom('consumers.yaml', consumersOnly);
    api = client(await registryWith({ cmdb }));
  });

  it('matches consumers against the providers\' metadata', async () => {
    expect(cmdb.labelsOf('11.11.11.11')).toEqual({});
    expect(cmdb.labelsOf('33.33.33.33')).toEqual({ site: 'x11' });

    await api.register('sel-meta', '11.11.11.11', { metadata: '{"site":"x11"}' });
    await api.register('sel-meta', '22.22.22.22', { metadata: '{"site":"x12"}' });
    await api.send('PUT', '/nacos/v1/ns/service', { serviceName: 'sel-meta', protectThreshold: 0, selector: SITE_SELECTOR });

    expect(await api.v1Ips('sel-meta', '33.33.33.33')).toEqual(['11.11.11.11']);
    expect(await api.v1Ips('sel-meta', '44.44.44.44')).toEqual(['22.22.22.22']);
    expect(await api.v1Ips('sel-meta', '55.55.55.55')).toEqual(PROVIDERS);
    expect(await api.v1Ips('sel-meta')).toEqual(PROVIDERS);
    expect(await api.v2Ips('sel-meta', '44.44.44.44')).toEqual(['22.22.22.22']);
  });

  it('without a CMDB, consumers have no labels and see every provider', async () => {
    const bare = client(await registryWith({}));
    await bare.send('POST', '/nacos/v1/ns/service', { serviceName: 'sel-bare', selector: SITE_SELECTOR });
    await bare.register('sel-bare', '11.11.11.11', { metadata: '{"site":"x11"}' });
    await bare.register('sel-bare', '22.22.22.22', { metadata: '{"site":"x12"}' });
    expect(await bare.v1Ips('sel-bare', '33.33.33.33')).toEqual(PROVIDERS);
  });
});

describe('service create, update, get and delete', () => {
  let registry: RunningRegistry;
  let api: ReturnType<typeof client>;

  beforeAll(async () => {
    registry = await registryWith({});
    api = client(registry);
  });

  it('round-trips a service through POST, GET and PUT in the Nacos 2.x detail shape', async () => {
    const created = await api.send('POST', '/nacos/v1/ns/service', {
      serviceName: 'svc-round',
      groupName: 'G1',
      namespaceId: 'team-a',
      protectThreshold: 0.25,
      metadata: 'owner=team-a,tier=gold',
      selector: SITE_SELECTOR,
      healthCheckMode: 'server', // a 1.x field: accepted and ignored
    });
    expect(created).toMatchObject({ status: 200, text: 'ok' });

    const detail = await api.detail('G1@@svc-round', { namespaceId: 'team-a' });
    expect(detail.status).toBe(200);
    expect(detail.json()).toEqual({
      namespaceId: 'team-a',
      groupName: 'G1',
      name: 'svc-round',
      protectThreshold: 0.25,
      metadata: { owner: 'team-a', tier: 'gold' },
      selector: { type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.site', labels: ['site'], contextType: 'CMDB' },
      clusters: [],
    });

    // Created empty, it is listed, and can receive instances that keep its settings.
    expect((await api.send('GET', '/nacos/v1/ns/service/list', { pageNo: 1, pageSize: 10, groupName: 'G1', namespaceId: 'team-a' })).json()).toEqual({
      count: 1,
      doms: ['svc-round'],
    });
    await api.register('svc-round', '10.9.0.1', { groupName: 'G1', namespaceId: 'team-a', clusterName: 'C1' });
    expect((await api.detail('svc-round', { groupName: 'G1', namespaceId: 'team-a' })).json()).toMatchObject({
      protectThreshold: 0.25,
      metadata: { owner: 'team-a', tier: 'gold' },
      selector: { type: 'label' },
      clusters: [{ name: 'C1', healthChecker: null, metadata: {} }],
    });

    // An update replaces the settings whole: what it leaves out is gone.
    const updated = await api.send('PUT', '/nacos/v1/ns/service', {
      serviceName: 'svc-round',
      groupName: 'G1',
      namespaceId: 'team-a',
      protectThreshold: '0.8',
      metadata: '{"owner":"team-b"}',
    });
    expect(updated.text).toBe('ok');
    expect((await api.detail('G1@@svc-round', { namespaceId: 'team-a' })).json()).toMatchObject({
      protectThreshold: 0.8,
      metadata: { owner: 'team-b' },
      selector: { type: 'none' },
    });
    expect(registry.store.getService('team-a', 'G1', 'svc-round')?.instances.size).toBe(1);
  });

  it('answers unknown services and missing parameters with 400, as Nacos does', async () => {
    const cases: Array<[string, ParamValues, string]> = [
      ['GET', { serviceName: 'svc-none' }, 'service not found'],
      ['PUT', { serviceName: 'svc-none', protectThreshold: 0 }, 'service DEFAULT_GROUP@@svc-none not found!'],
      ['DELETE', { serviceName: 'svc-none' }, 'service DEFAULT_GROUP@@svc-none not found!'],
      ['POST', {}, "Param 'serviceName' is required."],
      ['GET', {}, "Param 'serviceName' is required."],
    ];
    for (const [method, params, message] of cases) {
      const res = await api.send(method, '/nacos/v1/ns/service', params);
      expect(res.status, `${method} ${JSON.stringify(params)}`).toBe(400);
      expect(res.text).toContain(message);
    }
    await api.send('POST', '/nacos/v1/ns/service', { serviceName: 'svc-put' });
    const noThreshold = await api.send('PUT', '/nacos/v1/ns/service', { serviceName: 'svc-put', selector: SITE_SELECTOR });
    expect(noThreshold.status).toBe(400);
    expect(noThreshold.text).toContain("Param 'protectThreshold' is required.");
    expect((await api.detail('svc-put')).json().selector).toEqual({ type: 'none' });
  });

  it('rejects bad selectors, thresholds and metadata, storing nothing', async () => {
    const cases: Array<[ParamValues, string]> = [
      [{ selector: JSON.stringify({ type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.zone' }) }, "'CONSUMER.label.site=PROVIDER.label.zone'"],
      [{ selector: JSON.stringify({ type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.site & site = x11' }) }, "clause 'site=x11'"],
      [{ selector: JSON.stringify({ type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.site &' }) }, "clause '' is empty"],
      [{ selector: JSON.stringify({ type: 'cmdb', expression: 'x' }) }, 'not match any type of selector!'],
      [{ selector: JSON.stringify({ expression: 'CONSUMER.label.site = PROVIDER.label.site' }) }, 'not match any type of selector!'],
      [{ selector: 'label:site' }, 'selector format incorrect'],
      [{ protectThreshold: 'high' }, "Param 'protectThreshold' must be a number from 0 to 1"],
      [{ protectThreshold: 1.5 }, "Param 'protectThreshold' must be a number from 0 to 1"],
      [{ protectThreshold: -0.1 }, "Param 'protectThreshold' must be a number from 0 to 1"],
      [{ metadata: 'a=b=c' }, 'metadata format incorrect'],
      [{ metadata: '["a"]' }, 'metadata format incorrect'],
      [{ serviceName: 'a@@b@@c' }, "Param 'serviceName' is illegal"],
    ];
    for (const [params, message] of cases) {
      const res = await api.send('POST', '/nacos/v1/ns/service', { serviceName: 'svc-bad', ...params });
      expect(res.status, JSON.stringify(params)).toBe(400);
      expect(res.text, JSON.stringify(params)).toContain(message);
    }
    expect(registry.store.getService('public', 'DEFAULT_GROUP', 'svc-bad')).toBeUndefined();

    // A bad update leaves the stored selector as it was.
    await api.send('POST', '/nacos/v1/ns/service', { serviceName: 'svc-keep', selector: SITE_SELECTOR, metadata: '{"k":"v"}' });
    const bad = await api.send('PUT', '/nacos/v1/ns/service', {
      serviceName: 'svc-keep',
      protectThreshold: 0,
      selector: JSON.stringify({ type: 'label', expression: 'CONSUMER.label.a = PROVIDER.label.b' }),
    });
    expect(bad.status).toBe(400);
    expect((await api.detail('svc-keep')).json()).toMatchObject({ metadata: { k: 'v' }, selector: { type: 'label', labels: ['site'] } });
  });

  it('deletes an empty service only', async () => {
    await api.send('POST', '/nacos/v1/ns/service', { serviceName: 'svc-del' });
    await api.register('svc-del', '10.9.1.1');
    const busy = await api.send('DELETE', '/nacos/v1/ns/service', { serviceName: 'svc-del' });
    expect(busy.status).toBe(400);
    expect(busy.text).toContain("is not empty, can't be delete");
    await api.send('DELETE', '/nacos/v1/ns/instance', { serviceName: 'svc-del', ip: '10.9.1.1', port: 8080 });
    expect((await api.send('DELETE', '/nacos/v1/ns/service', { serviceName: 'svc-del' })).text).toBe('ok');
    expect((await api.detail('svc-del')).status).toBe(400);
  });
});

/**
 * The `clientIP` the official SDK sends: what the `address` module it loads answers for `ip()`
 * (resolved from the SDK's own files, so it is the module instance the SDK uses); undefined on a host
 * without a non-internal IPv4 address.
 */
function sdkClientIp(): string | undefined {
  const here = createRequire(import.meta.url);
  const proxy = here.resolve('nacos-naming/lib/naming/proxy.js', { paths: [dirname(here.resolve('nacos'))] });
  return (createRequire(proxy)('address') as { ip(): string | undefined }).ip();
}

interface Packet {
  lastRefTime: number;
  info: { lastRefTime: number; hosts: Array<{ ip: string }> };
}

describe('UDP push of a service with a selector', () => {
  let registry: RunningRegistry;
  let api: ReturnType<typeof client>;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    registry = await registryWith({ cmdb: await cmdbFrom('push.yaml', NACOS_SCENARIO_YAML), push: { ackTimeoutMs: 200 } });
    api = client(registry);
  });
  afterEach(async () => {
    await Promise.all(sockets.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  });

  /** A push receiver on 127.0.0.1 that acknowledges every packet. */
  const receiver = async () => {
    const packets: Packet[] = [];
    const socket = createSocket('udp4');
    socket.on('message', (msg, from) => {
      const raw = msg[0] === 0x1f && msg[1] === 0x8b ? gunzipSync(msg) : msg;
      const packet = JSON.parse(raw.toString()) as { lastRefTime: number; data: string };
      packets.push({ lastRefTime: packet.lastRefTime, info: JSON.parse(packet.data) as Packet['info'] });
      socket.send(JSON.stringify({ type: 'push-ack', lastRefTime: packet.lastRefTime, data: '' }), from.port, from.address);
    });
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    sockets.push(socket);
    return { port: socket.address().port, packets };
  };
  /** The hosts of the push that carries the service's current state. */
  const pushedNow = async (packets: Packet[], what: string) => {
    const current = registry.store.getService('public', 'DEFAULT_GROUP', 'sel-push')?.lastRefTime;
    const packet = await waitUntil(() => packets.find((p) => p.info.lastRefTime === current), { message: what });
    return packet.info.hosts.map((h) => h.ip).sort();
  };

  it('pushes each subscriber the selection for the clientIP it listed with', async () => {
    await api.send('POST', '/nacos/v1/ns/service', { serviceName: 'sel-push', selector: SITE_SELECTOR });
    const x11 = await receiver();
    const x12 = await receiver();
    const anonymous = await receiver();
    await api.send('GET', '/nacos/v1/ns/instance/list', { serviceName: 'sel-push', udpPort: x11.port, clientIP: '33.33.33.33' });
    await api.send('GET', '/nacos/v1/ns/instance/list', { serviceName: 'sel-push', udpPort: x12.port, clientIP: '44.44.44.44' });
    await api.send('GET', '/nacos/v1/ns/instance/list', { serviceName: 'sel-push', udpPort: anonymous.port });
    expect(registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@sel-push').map((s) => [s.address, s.consumerIp])).toEqual(
      expect.arrayContaining([
        ['127.0.0.1', '33.33.33.33'],
        ['127.0.0.1', '44.44.44.44'],
        ['127.0.0.1', undefined],
      ]),
    );

    for (const ip of PROVIDERS) await api.register('sel-push', ip);
    expect(await pushedNow(x11.packets, 'push to the x11 consumer')).toEqual(['11.11.11.11']);
    expect(await pushedNow(x12.packets, 'push to the x12 consumer')).toEqual(['22.22.22.22']);
    expect(await pushedNow(anonymous.packets, 'push to the consumer without clientIP')).toEqual(PROVIDERS);

    // Dropping the selector is a change too: everybody is pushed every provider.
    await api.send('PUT', '/nacos/v1/ns/service', { serviceName: 'sel-push', protectThreshold: 0 });
    expect(await pushedNow(x11.packets, 'push after the selector went')).toEqual(PROVIDERS);
    expect(await pushedNow(x12.packets, 'push after the selector went')).toEqual(PROVIDERS);
  });
});

describe('official Nacos SDK as the consumer of a service with a selector', () => {
  // The SDK reports this machine's address as clientIP; the CMDB labels that address x12.
  const sdkIp = sdkClientIp();
  let registry: RunningRegistry;
  let api: ReturnType<typeof client>;
  let sdk: SdkNamingClient | undefined;
  const ipsOf = (hosts: SdkInstance[]) => hosts.map((h) => h.ip).sort();

  beforeAll(async () => {
    if (sdkIp === undefined) return;
    const yaml = `${NACOS_SCENARIO_YAML}    "${sdkIp}": {site: x12}\n`;
    // A long poll period: a change the SDK sees quickly came by push.
    registry = await registryWith({ cmdb: await cmdbFrom('sdk.yaml', yaml), cacheMillis: 120_000 });
    api = client(registry);
  });
  afterAll(async () => {
    await sdk?.close();
  });

  it.skipIf(sdkIp === undefined)('lists and is pushed the providers of its own site', async () => {
    await api.send('POST', '/nacos/v1/ns/service', { serviceName: 'sel-sdk', selector: SITE_SELECTOR });
    for (const ip of PROVIDERS) await api.register('sel-sdk', ip, { ephemeral: false });
    sdk = await createSdkClient(registry.endpoint);
    expect(ipsOf(await sdk.getAllInstances('sel-sdk', 'DEFAULT_GROUP', '', false))).toEqual(['22.22.22.22']);

    const seen: string[][] = [];
    sdk.subscribe({ serviceName: 'sel-sdk' }, (hosts) => seen.push(ipsOf(hosts)));
    await waitUntil(() => seen.at(-1)?.join() === '22.22.22.22', { message: 'the SDK subscription\'s first list' });
    expect(registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@sel-sdk')[0]).toMatchObject({ address: '127.0.0.1', consumerIp: sdkIp });

    await api.send('PUT', '/nacos/v1/ns/service', { serviceName: 'sel-sdk', protectThreshold: 0 });
    await waitUntil(() => seen.at(-1)?.join() === PROVIDERS.join(), { message: 'pushed list without the selector' });
  });
});
