import { CONSUL_CONNECTIONS } from '../adapters/consul/consul-http.js';
import { startConsulServer, type ConsulRequestRecord, type ConsulServer } from '../test/support/consul-server.js';
import { countSince, measureForeign, type ForeignBenchResult, type ForeignOptions, type ForeignRegistry, type ForeignSyncResult, type RawRoundResult } from './foreign-registry.js';
import { PORT, ipOf, serviceName } from './instances.js';

/*
 * The Consul phase (`--only consul`, see foreign-registry.ts): regsync's cold sync into and out of
 * a test Consul (test/support/consul-server.ts), next to what it takes when written to directly.
 *
 *   raw            catalog registrations of services x instances copies (the adapter's own body,
 *                  consul-write-load.ts), as many in flight as the adapter keeps connections to one agent
 *   Nacos -> Consul  until Consul A holds every copy on regsync's node
 *   Consul -> Nacos  the same number seeded into Consul B (services on 100 agent nodes, one passing
 *                  check each), until Nacos B holds every copy
 */

/** The raw write rate of the test Consul. */
export type ConsulRawResult = RawRoundResult;

/** One direction of the cold sync. */
export type ConsulSyncResult = Omit<ForeignSyncResult, 'direction' | 'requestsToRegistry'> & {
  direction: 'nacos-to-consul' | 'consul-to-nacos';
  /** Requests the Consul received from the task's creation until the end, by kind. */
  requestsToConsul: Record<string, number>;
};

export interface ConsulBenchResult {
  services: number;
  instances: number;
  /** The raw round before each direction. */
  raw: ConsulRawResult[];
  toConsul: ConsulSyncResult | undefined;
  toNacos: ConsulSyncResult | undefined;
  regsync: ForeignBenchResult['regsync'];
  errors: string[];
}

/** Agent nodes the Consul -> Nacos source spreads its services over. */
const SOURCE_NODES = 100;

/** Successful catalog registrations among `records` from `from` on. */
function registered(records: readonly ConsulRequestRecord[], from: number): number {
  return countSince(records, from, (r) => r.status === 200 && r.method === 'PUT' && r.path === '/v1/catalog/register');
}

/** Services on a catalog node whose name starts with `prefix`, read as a Consul user would (`GET /v1/catalog/node-services/:node`). */
async function copiesOnNode(server: ConsulServer, node: string, prefix = ''): Promise<number> {
  const res = await fetch(`http://${server.endpoint}/v1/catalog/node-services/${node}`);
  const body = (await res.json()) as { Services?: Array<{ Service?: string }> } | null;
  return (body?.Services ?? []).filter((s) => (s.Service ?? '').startsWith(prefix)).length;
}

/** `GET /v1/health/service/:name (blocking)`: requests by method, route and whether they blocked. */
export function consulRequestCounts(records: readonly ConsulRequestRecord[], from: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = from; i < records.length; i += 1) {
    const r = records[i] as ConsulRequestRecord;
    const route = r.path.replace(/^(\/v1\/(?:health\/service|catalog\/service|catalog\/node-services))\/.+$/, '$1/:name');
    const key = `${r.method} ${route}${r.blocking ? ' (blocking)' : ''}${r.status === 200 ? '' : ` ${r.status}`}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

/**
 * Seeds `services` x `instances` instances into a test Consul as agents register them: each on one
 * of {@link SOURCE_NODES} nodes (alive: `serfHealth` passing), with a passing service check, a tag
 * and meta. Addresses are made up and never contacted.
 */
export function seedConsul(server: ConsulServer, services: number, instances: number): void {
  for (let k = 0; k < SOURCE_NODES; k += 1) {
    server.catalogRegister({
      Node: `node-${k}`,
      Address: ipOf((1 << 23) + k),
      Check: { CheckID: 'serfHealth', Name: 'Serf Health Status', Status: 'passing' },
    });
  }
  for (let s = 0; s < services; s += 1) {
    const name = serviceName(s);
    for (let i = 0; i < instances; i += 1) {
      const n = s * instances + i;
      const id = `${name}-${i}`;
      server.catalogRegister({
        Node: `node-${n % SOURCE_NODES}`,
        SkipNodeUpdate: true,
        Service: { ID: id, Service: name, Address: ipOf(n), Port: PORT, Tags: ['v1'], Meta: { app: name, version: '1.0.0' } },
        Check: { CheckID: `service:${id}`, Name: `Service '${name}' check`, Status: 'passing', ServiceID: id },
      });
    }
  }
}

/** What the Consul phase does that another registry's would not. */
export const CONSUL_REGISTRY: ForeignRegistry<ConsulServer> = {
  kind: 'consul',
  label: 'Consul',
  start: () => startConsulServer(),
  cluster: (server, namespace) => ({ kind: 'consul', endpoints: [server.endpoint], ...(namespace === undefined ? {} : { namespace }) }),
  seed: seedConsul,
  // Counted incrementally: a successful registration is a copy stored (checked against the node's services at the end).
  copyCounter: (server, from) => {
    let scanned = from;
    let writes = 0;
    return () => {
      writes += registered(server.requests, scanned);
      scanned = server.requests.length;
      return writes;
    };
  },
  stored: (server) => copiesOnNode(server, 'regsync'),
  writes: (server, from) => registered(server.requests, from),
  requestCounts: (server, from) => consulRequestCounts(server.requests, from),
  raw: { worker: new URL('./consul-write-load.js', import.meta.url), concurrency: CONSUL_CONNECTIONS, stored: (server) => copiesOnNode(server, 'regsync', 'svc-') },
};

function asConsulSync(x: ForeignSyncResult | undefined): ConsulSyncResult | undefined {
  if (x === undefined) return undefined;
  const { requestsToRegistry, direction, ...rest } = x;
  return { direction: direction as ConsulSyncResult['direction'], ...rest, requestsToConsul: requestsToRegistry };
}

/** The Consul phase: raw rate, then each direction after a raw round of its own. */
export async function measureConsul(
  opts: ForeignOptions,
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<ConsulBenchResult> {
  const r = await measureForeign(CONSUL_REGISTRY, opts, deadlineMs, progress);
  return { services: r.services, instances: r.instances, raw: r.raw, toConsul: asConsulSync(r.toRegistry), toNacos: asConsulSync(r.toNacos), regsync: r.regsync, errors: r.errors };
}
