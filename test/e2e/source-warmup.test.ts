import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, CreateMode, State, type Client } from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { startConsulServer, type ConsulServer } from '../support/consul-server.js';
import { startEurekaServer, type EurekaServer } from '../support/eureka-server.js';
import { startK8sApiServer, type K8sApiServer } from '../support/k8s-api-server.js';
import { addRegistry, api, copiesIn, defineTask, persistent, startFixture, startSync, stopFixture, testLogger, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';
import { startZooKeeper, type ZooKeeperServer } from '../support/zookeeper.js';

/** Promisifies one node-zookeeper-client call. */
function zk<T>(call: (cb: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}

/*
 * A source that restarts empty and fills back up, per kind, end to end (real Redis, regsync, the
 * kind's registry, a Nacos destination): while the source warms up, not one copy is removed,
 * whatever the partial reads say; the status says that a warm-up holds removals and until when;
 * once it ended, the copies of instances that never came back are removed, by a reconcile the
 * warm-up queued (the task's full sync is far off).
 */

/** Short enough for a test, long enough for the refill below to happen within it. */
const WARMUP_S = 8;
/** Three services of two instances each (none above the mass-deletion guard's 4 copies), per kind. */
const SERVICES = ['a', 'b', 'c'] as const;
/** What comes back after the restart, one by one: a whole, one of b, nothing of c. */
const BACK: ReadonlyArray<[(typeof SERVICES)[number], number]> = [
  ['a', 1],
  ['a', 2],
  ['b', 1],
];
const KINDS = ['eureka', 'nacos', 'zookeeper', 'consul', 'kubernetes'] as const;
type Kind = (typeof KINDS)[number];
/** A service's name in a kind's source, and of its copies. */
const nameOf = (kind: Kind, service: string) => `warm-${kind}-${service}`;
/** Made-up addresses, never contacted: 10.7<kind>.<service>.<n>. */
const ipOf = (kind: Kind, service: string, n: number) => `10.${70 + KINDS.indexOf(kind)}.${SERVICES.indexOf(service as (typeof SERVICES)[number]) + 1}.${n}`;

/** One kind's source, as the scenario drives it. */
interface WarmupSource {
  /** The cluster's definition (its id is the kind's name). */
  cluster: Record<string, unknown>;
  /** Registers instance `n` (1 or 2) of a service (its name in the source: {@link nameOf}) at {@link ipOf}. */
  register(service: string, n: number): Promise<void>;
  /** Restarts the registry with nothing registered. */
  restartEmpty(): Promise<void>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read API answers loosely
type Status = any;

describe('a source restarted empty warms up before anything is removed', () => {
  let fx: SyncFixture;
  let dest: RunningRegistry;
  let url: string;

  beforeAll(async () => {
    fx = await startFixture();
    dest = await addRegistry(fx, 'dest');
    // The scenarios poll the task's status often, five kinds in a row: no API rate limit in the way.
    url = (await startSync(fx, testLogger(), { apiRateLimit: false })).url as string;
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'dest', kind: 'nacos', endpoints: [dest.endpoint], options: { apiVersion: 'v1' } })).status).toBe(201);
  });
  afterAll(async () => {
    if (fx) await stopFixture(fx);
  });

  const copiesOf = (kind: Kind) =>
    SERVICES.flatMap((s) => copiesIn(dest, nameOf(kind, s)))
      .map((i) => i.ip)
      .sort();
  const statuses = async (task: string): Promise<Status[]> => (await api(url, 'GET', `/api/v1/tasks/${task}`)).body.status.services;

  /** The scenario: 6 copies, the source restarted empty, 3 instances back one by one, 3 never. */
  async function refill(kind: Kind, source: WarmupSource, task: Record<string, unknown> = {}): Promise<void> {
    expect((await api(url, 'POST', '/api/v1/clusters', source.cluster)).status).toBe(201);
    for (const service of SERVICES) for (const n of [1, 2]) await source.register(service, n);
    await defineTask(url, `warm-${kind}`, kind, 'dest', '*', { options: { include: ['warm-*'] }, ...task });
    const all = SERVICES.flatMap((s) => [1, 2].map((n) => ipOf(kind, s, n))).sort();
    await waitUntil(() => copiesOf(kind).length === 6, { message: `6 copies from ${kind}`, timeoutMs: 20_000 });

    // Watch the destination throughout: every change it makes visible.
    let fewest = 6;
    let warmupEnds = Number.POSITIVE_INFINITY;
    const watch = () => {
      if (Date.now() < warmupEnds) fewest = Math.min(fewest, copiesOf(kind).length);
    };
    dest.store.on('change', watch);
    try {
      await source.restartEmpty();
      // The status says that a warm-up holds removals, and until when.
      const held = await waitUntil(async () => (await statuses(`warm-${kind}`)).find((s) => s.warmup)?.warmup, { message: 'a warm-up holding removals', timeoutMs: 20_000, intervalMs: 100 });
      expect(held).toMatchObject({ cluster: kind, reason: expect.stringMatching(/^(drop|outage)$/), until: expect.any(String), removes: expect.any(Number) });
      warmupEnds = Date.parse(held.until);
      const holding = (await statuses(`warm-${kind}`)).find((s) => s.warmup);
      expect(holding.problems).toContainEqual(expect.objectContaining({ code: 'source_warming_up', side: 'source', cluster: kind, message: expect.stringContaining(`held until ${held.until}`) }));
      expect(copiesOf(kind)).toEqual(all);

      // Back one by one, each read by regsync before the next.
      const back = new Map<string, number>();
      for (const [service, n] of BACK) {
        await source.register(service, n);
        back.set(service, (back.get(service) ?? 0) + 1);
        await waitUntil(async () => (await statuses(`warm-${kind}`)).find((s) => s.service.endsWith(`/${nameOf(kind, service)}`))?.sourceInstances === back.get(service), {
          message: `${service} read with ${back.get(service)} back`,
          timeoutMs: 20_000,
          intervalMs: 100,
        });
      }
      // Those that never came back are removed once the warm-up is over, and only then.
      const expected = BACK.map(([service, n]) => ipOf(kind, service, n)).sort();
      await waitUntil(() => copiesOf(kind).join() === expected.join(), { message: 'the copies of what never came back removed', timeoutMs: (WARMUP_S + 20) * 1000 });
      expect(Date.now()).toBeGreaterThanOrEqual(warmupEnds);
      expect(fewest).toBe(6);
      await waitUntil(async () => (await statuses(`warm-${kind}`)).every((s) => s.warmup === undefined), { message: 'no warm-up in the status any more', intervalMs: 100 });
    } finally {
      dest.store.off('change', watch);
    }
  }

  describe('Eureka', () => {
    let eureka: EurekaServer;
    beforeAll(async () => {
      eureka = await startEurekaServer();
    });
    afterAll(async () => {
      await eureka?.close();
    });

    it('holds removals while clients register again one by one after a restart that lost every registration', async () => {
      const register = async (service: string, n: number) => {
        const ip = ipOf('eureka', service, n);
        const name = nameOf('eureka', service);
        const app = name.toUpperCase();
        const instance = {
          instanceId: `${ip}:${name}:8080`,
          hostName: ip,
          app,
          ipAddr: ip,
          vipAddress: name,
          status: 'UP',
          port: { $: 8080, '@enabled': 'true' },
          dataCenterInfo: { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: 'MyOwn' },
        };
        const res = await fetch(`http://${eureka.endpoint}/eureka/apps/${app}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ instance }) });
        expect(res.status).toBe(204);
      };
      await refill('eureka', {
        cluster: { id: 'eureka', kind: 'eureka', endpoints: [eureka.endpoint], options: { pollIntervalMs: 200, readCacheMs: 0, warmupSeconds: WARMUP_S } },
        register,
        restartEmpty: async () => {
          await eureka.stop();
          await eureka.start({ empty: true });
        },
      });
    });
  });

  describe('Nacos', () => {
    let src: RunningRegistry;
    beforeAll(async () => {
      src = await startRegistry({ port: 0, grpc: { pushMergeWindowMs: 50 } });
    });
    afterAll(async () => {
      await src?.close();
    });

    it('holds removals while a standalone server restarted empty gets its instances back', async () => {
      await refill('nacos', {
        cluster: { id: 'nacos', kind: 'nacos', endpoints: [src.endpoint], options: { apiVersion: 'grpc', grpcPort: src.grpcPort, warmupSeconds: WARMUP_S } },
        register: async (service, n) => void src.store.register('public', 'DEFAULT_GROUP', nameOf('nacos', service), persistent(ipOf('nacos', service, n))),
        restartEmpty: async () => {
          const { port, grpcPort } = src;
          await src.close();
          src = await startRegistry({ port, grpcPort: grpcPort as number, grpc: { pushMergeWindowMs: 50 } });
        },
      });
    });
  });

  describe('ZooKeeper', () => {
    let server: ZooKeeperServer;
    /** One session per provider, as every Spring Cloud instance has its own; each owns its ephemeral node. */
    const sessions: Client[] = [];
    beforeAll(async () => {
      server = await startZooKeeper();
    });
    afterAll(async () => {
      for (const c of sessions.splice(0)) c.close();
      await server?.cleanup();
    });

    it('holds removals while the providers\' sessions are established again one by one', async () => {
      const register = async (service: string, n: number) => {
        const client = createClient(server.connectString, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 });
        client.connect();
        sessions.push(client);
        await waitUntil(() => client.getState() === State.SYNC_CONNECTED, { message: 'provider session connected' });
        const name = nameOf('zookeeper', service);
        const id = `${service}-${n}`;
        const node = { name, id, address: ipOf('zookeeper', service, n), port: 8080, sslPort: null, payload: null, registrationTimeUTC: Date.now(), serviceType: 'DYNAMIC' };
        await zk<string>((cb) => client.mkdirp(`/services/${name}`, cb));
        await zk<string>((cb) => client.create(`/services/${name}/${id}`, Buffer.from(JSON.stringify(node)), CreateMode.EPHEMERAL, cb));
      };
      await refill('zookeeper', {
        cluster: {
          id: 'zookeeper',
          kind: 'zookeeper',
          endpoints: [server.connectString],
          options: { layout: 'curator', sessionTimeoutMs: 4_000, connectTimeoutMs: 3_000, spinDelayMs: 200, warmupSeconds: WARMUP_S },
        },
        register,
        // The server stops, its providers give up meanwhile, and it comes back: it expires their
        // sessions (all at once, a session timeout later) and their ephemeral nodes go with them.
        restartEmpty: async () => {
          await server.stop();
          for (const c of sessions.splice(0)) c.close();
          await server.restart();
        },
      });
    });
  });

  describe('Consul', () => {
    let consul: ConsulServer;
    beforeAll(async () => {
      consul = await startConsulServer();
    });
    afterAll(async () => {
      await consul?.close();
    });

    it('holds removals while the agents put their services back into a catalog that lost them', async () => {
      const id = (service: string, n: number) => `${nameOf('consul', service)}-${n}`;
      const register = async (service: string, n: number) =>
        consul.catalogRegister({ Node: `agent-${n}`, Address: `10.73.0.${n}`, Service: { ID: id(service, n), Service: nameOf('consul', service), Address: ipOf('consul', service, n), Port: 8080 } });
      await refill('consul', {
        cluster: { id: 'consul', kind: 'consul', endpoints: [consul.endpoint], options: { backoffMaxMs: 500, warmupSeconds: WARMUP_S } },
        register,
        // The servers come back without the catalog (a restart of a dev agent, a lost raft state): the agents' anti-entropy fills it again.
        restartEmpty: async () => {
          await consul.stop();
          for (const service of SERVICES) for (const n of [1, 2]) consul.catalogDeregister({ Node: `agent-${n}`, ServiceID: id(service, n) });
          await consul.start();
        },
      });
    });
  });

  describe('Kubernetes', () => {
    let k8s: K8sApiServer;
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'regsync-warmup-'));
      k8s = await startK8sApiServer();
      await writeFile(join(dir, 'kubeconfig'), k8s.kubeconfigYaml());
    });
    afterAll(async () => {
      await k8s?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('holds removals while the EndpointSlices are rebuilt pod by pod after an etcd restore', async () => {
      /** The ready pods of each service, as the EndpointSlice controller writes them (one slice per service). */
      const ready = new Map<string, number[]>();
      const writeSlice = (service: string) => {
        const name = nameOf('kubernetes', service);
        k8s.put('endpointslices', {
          metadata: { name: `${name}-x`, namespace: 'default', labels: { 'kubernetes.io/service-name': name, 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io' } },
          addressType: 'IPv4',
          ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
          endpoints: (ready.get(service) ?? []).map((n) => ({
            addresses: [ipOf('kubernetes', service, n)],
            conditions: { ready: true, serving: true, terminating: false },
            targetRef: { kind: 'Pod', name: `${name}-${n}`, namespace: 'default' },
          })),
        });
      };
      const register = async (service: string, n: number) => {
        const name = nameOf('kubernetes', service);
        if (!k8s.get('services', 'default', name)) {
          k8s.put('services', { metadata: { name, namespace: 'default' }, spec: { selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] } });
        }
        ready.set(service, [...(ready.get(service) ?? []), n]);
        writeSlice(service);
      };
      await refill('kubernetes', {
        cluster: {
          id: 'kubernetes',
          kind: 'kubernetes',
          endpoints: [],
          options: { kubeconfig: join(dir, 'kubeconfig'), namespaceMap: { default: 'public' }, backoffInitialMs: 50, backoffMaxMs: 500, warmupSeconds: WARMUP_S },
        },
        register,
        // The API server is away while etcd is restored from a backup that has the Services but
        // no ready endpoints; watches from before it answer 410, and the slices refill as pods get ready.
        restartEmpty: async () => {
          k8s.setUnavailable(true);
          ready.clear();
          for (const service of SERVICES) writeSlice(service);
          k8s.compact();
          k8s.setUnavailable(false);
        },
      });
    });
  });
});
