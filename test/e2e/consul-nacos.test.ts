import { createHash } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import Consul from 'consul';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyServiceId } from '../../adapters/consul/index.js';
import { MARK_ORIGIN, MARK_PATH, MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startConsulServer, type ConsulServer } from '../support/consul-server.js';
import { scrape } from '../support/prometheus.js';
import { addRegistry, api, copiesIn, countChanges, defineClusters, defineTask, instancesIn, nativesIn, persistent, registerNative, startFixture, startSync, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** A service's status in a task, as the API shows it. */
interface ServiceStatus {
  service: string;
  sourceInstances: number;
  destinationInstances: number;
  lastSyncAt: string | null;
  lagMs: number | null;
  lastError: string | null;
  problems: Array<{ code: string; side: string; cluster: string; message: string }>;
  skipped?: Record<string, number>;
}

/** One entry of `health.service` as the npm client hands it over. */
interface HealthEntry {
  Node: { Node: string; Address: string };
  Service: { ID: string; Service: string; Address: string; Port: number; Tags: string[]; Meta: Record<string, string> };
  Checks: Array<{ CheckID: string; Status: string; ServiceID: string; Output: string }>;
}

/** Long enough that only a watch, never a periodic full sync, can bring a change within a test. */
const WATCH_ONLY = { options: { fullSyncIntervalMs: 3_600_000 } };

/**
 * Consul <-> Nacos through regsync, end to end: a real regsync node on real Redis, an embedded
 * Nacos registry, and the test Consul, which applications (and the checks below) reach with the
 * real npm `consul` client exactly as a Consul user's code does: agent registrations with TTL
 * checks they pass, catalog registrations, `health.service` reads with `passing`.
 */
describe('Consul <-> Nacos', () => {
  let fx: SyncFixture;
  let consulServer: ConsulServer;
  let consul: Consul;
  let aclServer: ConsulServer | undefined;
  let starServer: ConsulServer | undefined;
  const natives: NativeInstance[] = [];
  let nacos: RunningRegistry;
  let url: string;

  const status = async (task: string, name: string): Promise<ServiceStatus | undefined> =>
    ((await api(url, 'GET', `/api/v1/tasks/${task}`)).body.status.services as ServiceStatus[]).find((s) => s.service === `public/DEFAULT_GROUP/${name}`);
  const copyIps = (name: string) => copiesIn(nacos, name).map((i) => i.ip).sort();
  const nativeIps = (name: string) => nativesIn(nacos, name).map((i) => i.ip).sort();
  const passing = async (name: string): Promise<HealthEntry[]> => (await consul.health.service({ service: name, passing: true })) as HealthEntry[];

  beforeAll(async () => {
    consulServer = await startConsulServer();
    consul = new Consul({ host: '127.0.0.1', port: consulServer.port });
    fx = await startFixture();
    nacos = await addRegistry(fx, 'nacos');
    url = (await startSync(fx)).url as string;
    await defineClusters(url, fx);
    // A short source warm-up: removals after the outage below wait 2 s, not Consul's 90 (see source-warmup.test.ts).
    const res = await api(url, 'POST', '/api/v1/clusters', { id: 'consul', kind: 'consul', endpoints: [consulServer.endpoint], options: { backoffMaxMs: 500, warmupSeconds: 2 } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await stopFixture(fx);
    consul?.destroy();
    await consulServer?.close();
    await aclServer?.close();
    await starServer?.close();
  });

  it('Consul -> Nacos: an agent registration appears with its tags and meta once its TTL check passes, leaves when it goes critical or is deregistered', async () => {
    await consul.agent.service.register({
      name: 'web',
      id: 'web-1',
      address: '10.70.0.1',
      port: 8080,
      tags: ['v1', 'env=prod'],
      meta: { version: '1.4.2', owner: 'team-a' },
      check: { name: 'web alive', ttl: '10m' } as never,
    });
    await defineTask(url, 'c2n', 'consul', 'nacos', 'web');
    // A TTL check starts critical: the instance is read, and skipped as unhealthy.
    await waitUntil(async () => (await status('c2n', 'web'))?.skipped?.unhealthy === 1, { message: 'the critical instance skipped' });
    expect(copiesIn(nacos, 'web')).toEqual([]);

    await consul.agent.check.pass('service:web-1');
    await waitUntil(() => copiesIn(nacos, 'web').length === 1, { message: 'the copy in Nacos' });
    expect(copiesIn(nacos, 'web')[0]).toMatchObject({
      ip: '10.70.0.1',
      port: 8080,
      healthy: true,
      metadata: {
        version: '1.4.2',
        owner: 'team-a',
        // key=value tags read as nacos-sync reads them, and every tag kept.
        env: 'prod',
        'consul.tags': 'v1,env=prod',
        [MARK_ORIGIN]: 'consul',
        [MARK_PATH]: 'consul',
        [MARK_TASK]: 'c2n',
      },
    });
    expect(Object.keys(copiesIn(nacos, 'web')[0]?.metadata ?? {}).sort()).toEqual(['consul.tags', 'env', 'owner', MARK_ORIGIN, MARK_PATH, MARK_TASK, 'version'].sort());

    await consul.agent.check.fail('service:web-1');
    await waitUntil(() => copiesIn(nacos, 'web').length === 0, { message: 'the copy removed once the check is critical' });

    await consul.agent.check.pass('service:web-1');
    await waitUntil(() => copiesIn(nacos, 'web').length === 1, { message: 'the copy back once the check passes again' });
    // Warning is not passing (`includeWarning` is off by default): no copy either.
    await consul.agent.check.warn('service:web-1');
    await waitUntil(() => copiesIn(nacos, 'web').length === 0, { message: 'the copy removed once the check warns' });
    await consul.agent.check.pass('service:web-1');
    await waitUntil(() => copiesIn(nacos, 'web').length === 1, { message: 'the copy back once the check passes' });

    await consul.agent.service.deregister('web-1');
    await waitUntil(() => copiesIn(nacos, 'web').length === 0, { message: 'the copy removed after the deregistration' });
    await waitUntil(async () => (await status('c2n', 'web'))?.sourceInstances === 0, { message: 'the status counts no source instance' });
    expect((await status('c2n', 'web'))?.lastError).toBeNull();
  });

  it('Nacos -> Consul: the copy reads back through health.service with passing, on node regsync, meta encoded, and goes when deleted in Nacos', async () => {
    // A Consul user's code watching the service, as the npm client's blocking watch does.
    const watch = consul.watch({ method: consul.health.service, options: { service: 'orders', passing: true, wait: '5s' } as never });
    const seen: HealthEntry[][] = [];
    watch.on('change', (data: HealthEntry[]) => seen.push(data));
    watch.on('error', () => undefined);
    let entry: HealthEntry;
    try {
      await waitUntil(() => seen.length >= 1, { message: 'the first answer of the watch' });
      expect(seen[0]).toEqual([]);
      nacos.store.register('public', 'DEFAULT_GROUP', 'orders', { ...persistent('10.70.1.1', { version: 'v2', 'spring.boot.version': '3.2.0', 'management.port': '9001' }), port: 9000 });
      await defineTask(url, 'n2c', 'nacos', 'consul', 'orders');
      await waitUntil(() => seen.at(-1)?.length === 1, { message: 'the watch sees the copy' });
      entry = seen.at(-1)?.[0] as HealthEntry;
    } finally {
      watch.end();
    }
    expect(await passing('orders')).toEqual([entry]);
    const id = copyServiceId('orders', { ip: '10.70.1.1', port: 9000, cluster: 'DEFAULT' });
    expect(entry.Node.Node).toBe('regsync');
    expect(entry.Service).toMatchObject({ ID: id, Service: 'orders', Address: '10.70.1.1', Port: 9000, Tags: [] });
    expect(entry.Service.Meta).toEqual({
      'external-source': 'regsync',
      'regsync-origin': 'nacos',
      'regsync-path': 'nacos',
      'regsync-task': 'n2c',
      // Consul refuses dots in meta keys: they are written encoded.
      __spring_2Eboot_2Eversion: '3.2.0',
      __management_2Eport: '9001',
      version: 'v2',
      // Persistent in Nacos: kept so that a copy back would be persistent too.
      'regsync-ephemeral': 'false',
    });
    expect(entry.Checks.map((c) => ({ CheckID: c.CheckID, Status: c.Status, ServiceID: c.ServiceID }))).toEqual([{ CheckID: `regsync:${id}`, Status: 'passing', ServiceID: id }]);
    expect(entry.Checks[0]?.Output).toBe('copied by regsync from nacos');
    // The catalog lists the service with the regsync node, as consul-k8s lists its k8s-sync node.
    expect(await consul.catalog.service.nodes('orders')).toMatchObject([{ Node: 'regsync', NodeMeta: { 'external-source': 'regsync' }, ServiceID: id }]);

    // A metadata change in Nacos reaches the copy (nacos-sync registers new addresses only).
    const orders = (metadata: Record<string, string>, healthy = true) => ({ ...persistent('10.70.1.1', metadata), port: 9000, healthy });
    nacos.store.register('public', 'DEFAULT_GROUP', 'orders', orders({ version: 'v3', 'spring.boot.version': '3.2.0' }));
    await waitUntil(async () => (await passing('orders'))[0]?.Service.Meta.version === 'v3', { message: 'the new metadata in Consul' });
    expect((await passing('orders'))[0]?.Service.Meta).not.toHaveProperty('__management_2Eport');
    // Unhealthy in Nacos: nobody should route to it, in Consul either.
    nacos.store.register('public', 'DEFAULT_GROUP', 'orders', orders({ version: 'v3' }, false));
    await waitUntil(async () => (await consul.health.service('orders')).length === 0, { message: 'the copy of an unhealthy instance gone' });
    nacos.store.register('public', 'DEFAULT_GROUP', 'orders', orders({ version: 'v3' }));
    await waitUntil(async () => (await passing('orders')).length === 1, { message: 'the copy back once healthy' });

    nacos.store.deregister('public', 'DEFAULT_GROUP', 'orders', '10.70.1.1', 9000, 'DEFAULT');
    await waitUntil(async () => (await consul.health.service('orders')).length === 0, { message: 'the copy gone from Consul' });
    expect(await consul.catalog.service.nodes('orders')).toEqual([]);
  });

  it('Nacos -> Consul: a copy deregistered behind regsync\'s back is registered again by the next full sync', async () => {
    nacos.store.register('public', 'DEFAULT_GROUP', 'ledger', { ...persistent('10.70.9.1'), port: 7600 });
    await defineTask(url, 'n2c-ledger', 'nacos', 'consul', 'ledger', { options: { fullSyncIntervalMs: 1_000 } });
    const [entry] = await waitUntil(async () => {
      const found = await passing('ledger');
      return found.length === 1 ? found : undefined;
    }, { message: 'the copy in Consul' });
    // An operator cleans up the catalog with the npm client.
    await consul.catalog.deregister({ node: 'regsync', serviceid: (entry as HealthEntry).Service.ID });
    expect(await consul.health.service('ledger')).toEqual([]);
    await waitUntil(async () => (await passing('ledger')).length === 1, { message: 'the copy registered again' });
    expect((await passing('ledger'))[0]?.Service).toMatchObject({ ID: (entry as HealthEntry).Service.ID, Address: '10.70.9.1', Port: 7600 });
    expect((await api(url, 'DELETE', '/api/v1/tasks/n2c-ledger')).status).toBe(204);
    expect(await consul.health.service('ledger')).toEqual([]);
  });

  it('an application that moves from Nacos to Consul at the same address: regsync\'s copy goes once the Nacos instance does', async () => {
    nacos.store.register('public', 'DEFAULT_GROUP', 'migrate', { ...persistent('10.70.10.1'), port: 7700 });
    await defineTask(url, 'n2c-migrate', 'nacos', 'consul', 'migrate');
    await waitUntil(async () => (await passing('migrate')).length === 1, { message: 'the copy in Consul' });
    // The application now registers itself with its Consul agent, at the same address.
    await consul.agent.service.register({ name: 'migrate', id: 'migrate-1', address: '10.70.10.1', port: 7700, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
    const nodesOf = async () => (await consul.health.service('migrate')).map((e: HealthEntry) => e.Node.Node).sort();
    expect(await nodesOf()).toEqual(['consul-agent-1', 'regsync']);
    // And leaves Nacos.
    nacos.store.deregister('public', 'DEFAULT_GROUP', 'migrate', '10.70.10.1', 7700, 'DEFAULT');
    await waitUntil(async () => (await nodesOf()).join() === 'consul-agent-1', { message: "regsync's copy removed, the application's registration left" });
    await consul.agent.service.deregister('migrate-1');
    expect(await consul.health.service('migrate')).toEqual([]);
  });

  it('Consul <-> Nacos both ways on one service: each side holds its own instance and one copy of the other, and full syncs write nothing', async () => {
    await consul.agent.service.register({ name: 'both', id: 'both-1', address: '10.70.7.1', port: 7400, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
    // An application of the Nacos side, registered and beating as the Nacos SDKs do.
    const native = await registerNative(() => nacos, 'both', '10.70.7.2', 7400);
    natives.push(native);
    await defineTask(url, 'c2n-both', 'consul', 'nacos', 'both');
    await defineTask(url, 'n2c-both', 'nacos', 'consul', 'both');
    await waitUntil(async () => copyIps('both').join() === '10.70.7.1' && (await passing('both')).length === 2, { message: 'a copy on each side' });
    const consulSide = async () => (await passing('both')).map((e) => `${e.Node.Node} ${e.Service.Address}`).sort();
    expect(await consulSide()).toEqual(['consul-agent-1 10.70.7.1', 'regsync 10.70.7.2']);
    expect(nativeIps('both')).toEqual(['10.70.7.2']);

    const tasks = ['c2n-both', 'n2c-both'];
    await waitUntil(async () => {
      for (const t of tasks) if ((await status(t, 'both'))?.lastSyncAt == null) return false;
      return true;
    }, { message: 'both tasks reconciled' });
    const nacosChanges = countChanges(nacos);
    const consulPuts = consulServer.requests.filter((r) => r.method === 'PUT').length;
    const since = Date.now();
    for (const t of tasks) expect((await api(url, 'POST', `/api/v1/tasks/${t}/resync`)).status).toBe(202);
    await waitUntil(async () => {
      for (const t of tasks) if (Date.parse((await status(t, 'both'))?.lastSyncAt ?? '0') < since) return false;
      return true;
    }, { message: 'both tasks reconciled again' });
    // Each task skips the other's copy as already marked with its destination.
    expect(await status('c2n-both', 'both')).toMatchObject({ sourceInstances: 2, destinationInstances: 1, skipped: { marked: 1 } });
    expect(await status('n2c-both', 'both')).toMatchObject({ sourceInstances: 2, destinationInstances: 1, skipped: { marked: 1 } });
    expect([nacosChanges.count(), consulServer.requests.filter((r) => r.method === 'PUT').length - consulPuts]).toEqual([0, 0]);
    expect(copyIps('both')).toEqual(['10.70.7.1']);
    expect(await consulSide()).toEqual(['consul-agent-1 10.70.7.1', 'regsync 10.70.7.2']);
  });

  it('a blocking query answered after a change brings a new Consul instance to Nacos (latency printed)', async () => {
    await consul.agent.service.register({ name: 'pay', id: 'pay-1', address: '10.70.2.1', port: 7000, check: { name: 'pay alive', ttl: '10m', status: 'passing' } as never });
    const waiting = consulServer.waitingQueries();
    await defineTask(url, 'c2n-pay', 'consul', 'nacos', 'pay', WATCH_ONLY);
    await waitUntil(() => copiesIn(nacos, 'pay').length === 1, { message: 'the first copy' });
    await waitUntil(() => consulServer.waitingQueries() > waiting, { message: 'the watch of pay blocking' });

    let arrived: number | undefined;
    const onChange = () => {
      if (arrived === undefined && copyIps('pay').includes('10.70.2.2')) arrived = performance.now();
    };
    nacos.store.on('change', onChange);
    try {
      const started = performance.now();
      await consul.agent.service.register({ name: 'pay', id: 'pay-2', address: '10.70.2.2', port: 7000, check: { name: 'pay alive', ttl: '10m', status: 'passing' } as never });
      await waitUntil(() => arrived !== undefined, { message: 'the new instance copied to Nacos' });
      const task = await status('c2n-pay', 'pay');
      console.log(`consul blocking query -> nacos: ${((arrived as number) - started).toFixed(1)} ms from the registration to the copy (engine lagMs ${task?.lagMs})`);
    } finally {
      nacos.store.off('change', onChange);
    }
    expect(copyIps('pay')).toEqual(['10.70.2.1', '10.70.2.2']);
  });

  it('a stale index (Consul restored from a snapshot: the index goes backwards) restarts the watch, and the next change arrives', async () => {
    await consul.agent.service.register({ name: 'stale', id: 'stale-1', address: '10.70.3.1', port: 7100, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
    const waiting = consulServer.waitingQueries();
    await defineTask(url, 'c2n-stale', 'consul', 'nacos', 'stale', WATCH_ONLY);
    await waitUntil(() => copiesIn(nacos, 'stale').length === 1, { message: 'the first copy' });
    await waitUntil(() => consulServer.waitingQueries() > waiting, { message: 'the watch of stale blocking' });
    const blocked = consulServer.waitingQueries();
    const before = consulServer.index();
    const seen = consulServer.requests.length;
    const ofStale = () => consulServer.requests.slice(seen).filter((r) => r.path === '/v1/health/service/stale');

    consulServer.resetIndex(3);
    // Every waiting query is answered with a lower index; the loop starts over with a query that
    // does not block, then blocks again, on the new index.
    await waitUntil(() => ofStale().some((r) => !r.blocking) && consulServer.waitingQueries() >= blocked, { message: 'the watch started over and blocking again' });
    await consul.agent.service.register({ name: 'stale', id: 'stale-2', address: '10.70.3.2', port: 7100, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
    expect(consulServer.index()).toBeLessThan(before);

    await waitUntil(() => copiesIn(nacos, 'stale').length === 2, { message: 'the change after the reset copied' });
    expect(copyIps('stale')).toEqual(['10.70.3.1', '10.70.3.2']);
    // The query that the change answered waited on an index of after the reset.
    const last = ofStale().filter((r) => r.blocking).at(-1);
    expect(Number(last?.query.index)).toBeLessThan(before);
  });

  it('nacos-sync API: /v1/cluster/add with CONSUL and /v1/task/add sync Consul -> Nacos', async () => {
    const nacosSync = async (method: string, path: string, body?: unknown) => {
      const res = await api(url, method, path, body);
      expect(res.body, `${method} ${path}`).toMatchObject({ success: true, resultCode: 'SUCCESS' });
      return res.body;
    };
    const md5 = (...parts: string[]) => createHash('md5').update(parts.join('_')).digest('hex');
    expect((await nacosSync('GET', '/v1/cluster/types')).types).toContain('CONSUL');
    await nacosSync('POST', '/v1/cluster/add', { clusterName: 'consul-dc1', clusterType: 'CONSUL', connectKeyList: [consulServer.endpoint] });
    await nacosSync('POST', '/v1/cluster/add', { clusterName: 'nacos-bj', clusterType: 'NACOS', connectKeyList: [nacos.endpoint] });
    const consulId = md5('consul-dc1', 'CONSUL');
    const nacosId = md5('nacos-bj', 'NACOS');
    expect((await nacosSync('GET', `/v1/cluster/detail?clusterId=${consulId}`)).clusterModel).toMatchObject({ clusterName: 'consul-dc1', clusterType: 'CONSUL' });

    // Catalog registrations, as external services are registered in Consul: one with its own
    // address, one that leaves it to its node's.
    await consul.catalog.register({ node: 'legacy-db-host', address: '10.70.4.9', service: { id: 'legacy-1', service: 'legacy', address: '10.70.4.1', port: 5432, tags: ['primary', 'zone=a'] } });
    await consul.catalog.register({ node: 'legacy-db-host', address: '10.70.4.9', service: { id: 'legacy-2', service: 'legacy', port: 5433 } });
    // And one that nacos-sync itself copied from that Nacos cluster (its marks as k=v tags, no check).
    await consul.agent.service.register({
      name: 'legacy',
      id: '10.70.4.5#5432#DEFAULT#DEFAULT_GROUP@@legacy',
      address: '10.70.4.5',
      port: 5432,
      tags: [`sourceClusterId=${nacosId}`, `destClusterId=${consulId}`, 'syncSource=NACOS'],
    });
    await nacosSync('POST', '/v1/task/add', { sourceClusterId: consulId, destClusterId: nacosId, serviceName: 'legacy', groupName: 'DEFAULT_GROUP' });
    const taskId = md5('legacy', 'DEFAULT_GROUP', consulId, nacosId);
    await waitUntil(() => copiesIn(nacos, 'legacy').length === 2, { message: 'the copies in Nacos' });
    expect(copiesIn(nacos, 'legacy').find((i) => i.port === 5432)).toMatchObject({ ip: '10.70.4.1', metadata: { zone: 'a', 'consul.tags': 'primary,zone=a', [MARK_ORIGIN]: consulId, [MARK_TASK]: taskId } });
    expect(copiesIn(nacos, 'legacy').find((i) => i.port === 5433)?.ip).toBe('10.70.4.9');
    // nacos-sync's copy of a Nacos instance does not go back to that Nacos.
    await waitUntil(async () => (await status(taskId, 'legacy'))?.skipped?.foreign === 1, { message: "nacos-sync's copy skipped as foreign" });
    expect(instancesIn(nacos, 'legacy').map((i) => i.ip).sort()).toEqual(['10.70.4.1', '10.70.4.9']);
    expect((await nacosSync('GET', `/v1/task/detail?taskId=${taskId}`)).taskModel).toMatchObject({ taskId, taskStatus: 'SYNC' });

    await nacosSync('DELETE', `/v1/task/delete?taskId=${taskId}`);
    await waitUntil(() => copiesIn(nacos, 'legacy').length === 0, { message: 'the copy removed with the task' });
  });

  it('a `*` task follows the services of a Consul as they appear and go, leaving out Consul\'s own, through the agent that answers', async () => {
    starServer = await startConsulServer();
    const app = new Consul({ host: '127.0.0.1', port: starServer.port });
    // The cluster's first agent accepts connections and drops them at once.
    const dead = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
    const deadEndpoint = `127.0.0.1:${(dead.address() as AddressInfo).port}`;
    try {
      const register = (name: string, n: number) =>
        app.agent.service.register({ name, id: `${name}-${n}`, address: `10.70.8.${n}`, port: 7500, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
      await register('star-a', 1);
      await register('star-b', 2);
      const cluster = { id: 'consul-star', kind: 'consul', endpoints: [deadEndpoint, starServer.endpoint], options: { backoffMaxMs: 500 } };
      expect((await api(url, 'POST', '/api/v1/clusters', cluster)).status).toBe(201);
      await defineTask(url, 'c2n-star', 'consul-star', 'nacos', '*', WATCH_ONLY);
      await waitUntil(() => copyIps('star-a').length === 1 && copyIps('star-b').length === 1, { message: 'both services copied' });
      const synced = async () => ((await api(url, 'GET', '/api/v1/tasks/c2n-star')).body.status.services as ServiceStatus[]).map((x) => x.service).sort();
      expect(await synced()).toEqual(['public/DEFAULT_GROUP/star-a', 'public/DEFAULT_GROUP/star-b']);
      expect(instancesIn(nacos, 'consul')).toEqual([]);

      // A new service: the blocking query on the catalog's service list brings it.
      await register('star-c', 3);
      await waitUntil(() => copyIps('star-c').join() === '10.70.8.3', { message: 'the new service copied' });
      // A service whose last instance goes: gone from the catalog, its copy removed.
      await app.agent.service.deregister('star-a-1');
      await waitUntil(() => copyIps('star-a').length === 0, { message: 'the copy of the service that went removed' });
      expect(copyIps('star-b')).toEqual(['10.70.8.2']);
    } finally {
      app.destroy();
      await new Promise((resolve) => dead.close(resolve));
    }
  });

  it('ACLs: copies written and read with the cluster\'s token; a token that may no longer read the source removes nothing and says so', async () => {
    aclServer = await startConsulServer({ tokens: { 'regsync-token': 'write', 'app-token': 'write', 'reader-token': 'read' } });
    const client = (token?: string) => new Consul({ host: '127.0.0.1', port: (aclServer as ConsulServer).port, ...(token === undefined ? {} : { defaults: { token } }) });
    const [app, reader, anonymous] = [client('app-token'), client('reader-token'), client()];
    const cluster = { kind: 'consul', endpoints: [aclServer.endpoint], options: { backoffMaxMs: 500 } };
    try {
      expect((await api(url, 'POST', '/api/v1/clusters', { id: 'consul-acl', ...cluster, password: 'regsync-token' })).status).toBe(201);

      // Nacos -> Consul: written with the token; a reader sees the copy, the anonymous token nothing.
      nacos.store.register('public', 'DEFAULT_GROUP', 'billing', persistent('10.70.6.1'));
      await defineTask(url, 'n2c-acl', 'nacos', 'consul-acl', 'billing');
      await waitUntil(async () => (await reader.health.service({ service: 'billing', passing: true })).length === 1, { message: 'the copy, read with a read token' });
      expect(await anonymous.health.service({ service: 'billing', passing: true })).toEqual([]);
      const writes = aclServer.requests.filter((r) => r.method === 'PUT' && r.path.startsWith('/v1/catalog/'));
      expect(writes.length).toBeGreaterThan(0);
      expect(new Set(writes.map((r) => r.token))).toEqual(new Set(['regsync-token']));

      // Consul -> Nacos: an application registers with its own token.
      await app.agent.service.register({ name: 'inventory', id: 'inventory-1', address: '10.70.6.2', port: 7300, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
      await defineTask(url, 'c2n-acl', 'consul-acl', 'nacos', 'inventory', { options: { fullSyncIntervalMs: 1_000 } });
      await waitUntil(() => copyIps('inventory').join() === '10.70.6.2', { message: 'the copy in Nacos' });

      // The token removed from the cluster: Consul answers every read as the anonymous token sees
      // it, empty (filtered by ACLs). That is no proof the instances went: the copies stay.
      expect((await api(url, 'PUT', '/api/v1/clusters/consul-acl', { ...cluster, password: null })).status).toBe(200);
      const refused = await waitUntil(async () => {
        const s = await status('c2n-acl', 'inventory');
        return s?.problems.some((p) => p.code === 'source_unreadable') ? s : undefined;
      }, { message: 'the status says the source cannot be read' });
      expect(refused.lastError).toMatch(/ACL/);
      const failed = async () => (await scrape(`${url}/metrics`)).value('regsync_reconciles_total', { task: 'c2n-acl', outcome: 'failed' }) ?? 0;
      const failedBefore = await failed();
      await waitUntil(async () => (await failed()) >= failedBefore + 2, { message: 'two more failed reconciles' });
      expect(copyIps('inventory')).toEqual(['10.70.6.2']);

      expect((await api(url, 'PUT', '/api/v1/clusters/consul-acl', { ...cluster, password: 'regsync-token' })).status).toBe(200);
      await waitUntil(async () => (await status('c2n-acl', 'inventory'))?.lastError === null, { message: 'the status clear with the token back' });
      expect(copyIps('inventory')).toEqual(['10.70.6.2']);
    } finally {
      for (const c of [app, reader, anonymous]) c.destroy();
    }
  });

  it('Consul unreachable, then back: nothing is deleted while it is down, and what changed meanwhile arrives after', async () => {
    for (const n of [1, 2]) {
      await consul.agent.service.register({ name: 'cart', id: `cart-${n}`, address: `10.70.5.${n}`, port: 7200, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
    }
    await defineTask(url, 'c2n-cart', 'consul', 'nacos', 'cart', { options: { fullSyncIntervalMs: 1_000 } });
    // And a task that has only its watch.
    await consul.agent.service.register({ name: 'till', id: 'till-1', address: '10.70.5.11', port: 7200, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
    await defineTask(url, 'c2n-till', 'consul', 'nacos', 'till', WATCH_ONLY);
    await waitUntil(() => copiesIn(nacos, 'cart').length === 2 && copiesIn(nacos, 'till').length === 1, { message: 'the copies' });

    await consulServer.stop();
    const down = await waitUntil(async () => {
      const s = await status('c2n-cart', 'cart');
      return s?.problems.some((p) => p.code === 'source_unreadable') ? s : undefined;
    }, { message: 'the status says the source is unreadable' });
    expect(down.lastError).toContain('cannot read source consul');
    expect(down.problems).toContainEqual(expect.objectContaining({ code: 'source_unreadable', side: 'source', cluster: 'consul' }));
    // While it is down, the state changes (on the servers, which the test writes directly).
    consulServer.catalogDeregister({ Node: 'consul-agent-1', ServiceID: 'cart-1' });
    consulServer.catalogRegister({ Node: 'consul-agent-1', SkipNodeUpdate: true, Service: { ID: 'cart-3', Service: 'cart', Address: '10.70.5.3', Port: 7200 } });
    // More failed reconciles (full syncs every second), and the copies are all still there.
    const failed = async () => (await scrape(`${url}/metrics`)).value('regsync_reconciles_total', { task: 'c2n-cart', outcome: 'failed' }) ?? 0;
    const failedBefore = await failed();
    await waitUntil(async () => (await failed()) >= failedBefore + 2, { message: 'two more failed reconciles' });
    expect((await status('c2n-cart', 'cart'))?.problems.map((p) => p.code)).toEqual(['source_unreadable']);
    expect(copyIps('cart')).toEqual(['10.70.5.1', '10.70.5.2']);

    const back = performance.now();
    await consulServer.start();
    await waitUntil(() => copyIps('cart').join() === '10.70.5.2,10.70.5.3', { message: 'the changes made during the outage arrive' });
    console.log(`consul outage: the changes made while down reached nacos ${(performance.now() - back).toFixed(0)} ms after consul answered again (full sync every 1000 ms)`);
    await waitUntil(async () => (await status('c2n-cart', 'cart'))?.lastError === null, { message: 'the status clear again' });
    // The blocking queries are back too: a change reaches a task that has only its watch.
    await consul.agent.service.register({ name: 'till', id: 'till-2', address: '10.70.5.12', port: 7200, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
    await waitUntil(() => copyIps('till').join() === '10.70.5.11,10.70.5.12', { message: 'a change after the outage, through the watch' });
  });
});
