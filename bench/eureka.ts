import { infoOf } from '../adapters/eureka/eureka-meta.js';
import { DEFAULT_EUREKA_OPTIONS } from '../adapters/eureka/eureka-options.js';
import { startEurekaServer, type EurekaRequestRecord, type EurekaServer } from '../test/support/eureka-server.js';
import { countSince, measureForeign, type ForeignBenchResult, type ForeignOptions, type ForeignRegistry } from './foreign-registry.js';
import { CLUSTER, PORT, ipOf, serviceName } from './instances.js';

/*
 * The Eureka phase (`--only eureka`, see foreign-registry.ts): regsync's cold sync into and out of
 * a test Eureka (test/support/eureka-server.ts, REST API v2, JSON, reads live), next to what it
 * takes when written to directly.
 *
 *   raw            `POST /eureka/apps/{APP}`s of services x instances copies with the adapter's own
 *                  InstanceInfo (`infoOf`, eureka-write-load.ts), `writeConcurrency` (16) in flight
 *   Nacos -> Eureka  until Eureka A holds every copy
 *   Eureka -> Nacos  the same number registered into Eureka B as Spring Cloud clients register
 *                  (app upper-cased, VIP address the service name), until Nacos B holds every copy
 *
 * The clusters keep Eureka clients' delta poll (`pollIntervalMs`, 30 s): a cold sync waits on no
 * poll either way (out of Eureka the first full fetch feeds every watch; into it the reconciles
 * read each application with `GET /apps/{APP}`), so a shorter one changes nothing but the load.
 */

/** The phase's figures, with the clusters' delta poll interval. */
export type EurekaBenchResult = ForeignBenchResult & { pollIntervalMs: number };

/** Registrations the seeding sends at once. */
const SEED_LANES = 16;

/**
 * Registers `services` x `instances` instances into a test Eureka as Spring Cloud clients do (over
 * its REST API: `POST /eureka/apps/{APP}`, app upper-cased, VIP address the service name, metadata
 * of the source). Addresses are made up and never contacted.
 */
export async function seedEureka(server: EurekaServer, services: number, instances: number): Promise<void> {
  const total = services * instances;
  let next = 0;
  const o = DEFAULT_EUREKA_OPTIONS;
  const lane = async (): Promise<void> => {
    while (next < total) {
      const n = next;
      next += 1;
      const name = serviceName(Math.floor(n / instances));
      const body = infoOf(name, { ip: ipOf(n), port: PORT, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: CLUSTER, metadata: { app: name, version: '1.0.0' } }, {
        renewalIntervalS: o.renewalIntervalS,
        leaseDurationS: o.leaseDurationS,
        dataCenterName: o.dataCenterName,
        now: Date.now(),
      });
      const res = await fetch(`${server.serviceUrl}apps/${name.toUpperCase()}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      await res.arrayBuffer();
      if (res.status !== 204) throw new Error(`seeding the test Eureka: POST /apps/${name.toUpperCase()} answered ${res.status}`);
    }
  };
  await Promise.all(Array.from({ length: SEED_LANES }, lane));
}

/** Instances of `GET /eureka/apps` (what a Eureka client's full fetch sees) whose application starts with `prefix`. */
async function appsInstances(server: EurekaServer, prefix = ''): Promise<number> {
  const res = await fetch(`${server.serviceUrl}apps`, { headers: { accept: 'application/json' } });
  const body = (await res.json()) as { applications?: { application?: Array<{ name?: string; instance?: unknown[] }> } };
  return (body.applications?.application ?? []).filter((a) => (a.name ?? '').startsWith(prefix)).reduce((n, a) => n + (a.instance?.length ?? 0), 0);
}

/** Successful registrations among `records` from `from` on. */
function registered(records: readonly EurekaRequestRecord[], from: number): number {
  return countSince(records, from, (r) => r.status === 204 && r.method === 'POST');
}

/** Requests by method and route (`/apps/:app`, `/apps/:app/:id`), a status other than 200/204 apart. */
export function eurekaRequestCounts(records: readonly EurekaRequestRecord[], from: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = from; i < records.length; i += 1) {
    const r = records[i] as EurekaRequestRecord;
    const route = r.path === '/apps/delta' ? r.path : r.path.replace(/^\/apps\/[^/]+\/[^/]+$/, '/apps/:app/:id').replace(/^\/apps\/[^/]+$/, '/apps/:app');
    const key = `${r.method} ${route}${r.status === 200 || r.status === 204 ? '' : ` ${r.status}`}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

/** What the Eureka phase does that another registry's would not. */
export const EUREKA_REGISTRY: ForeignRegistry<EurekaServer> = {
  kind: 'eureka',
  label: 'Eureka',
  start: () => startEurekaServer(),
  cluster: (server, namespace) => ({ kind: 'eureka', endpoints: [server.endpoint], ...(namespace === undefined ? {} : { namespace }) }),
  seed: seedEureka,
  // Each test server of a sync into Eureka holds only that sync's copies.
  copyCounter: (server) => () => server.instances().length,
  stored: (server) => appsInstances(server),
  writes: (server, from) => registered(server.requests, from),
  requestCounts: (server, from) => eurekaRequestCounts(server.requests, from),
  raw: { worker: new URL('./eureka-write-load.js', import.meta.url), concurrency: DEFAULT_EUREKA_OPTIONS.writeConcurrency, stored: (server) => appsInstances(server, 'SVC-') },
};

/** The Eureka phase: raw rate, then each direction after a raw round of its own. */
export async function measureEureka(
  opts: ForeignOptions,
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<EurekaBenchResult> {
  return { ...(await measureForeign(EUREKA_REGISTRY, opts, deadlineMs, progress)), pollIntervalMs: DEFAULT_EUREKA_OPTIONS.pollIntervalMs };
}
