import { promises as dnsPromises } from 'node:dns';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { startCmdb, type RunningCmdb } from '../cmdb/index.js';
import { createLogger } from '../log.js';
import { MARK_ORIGIN, MARK_TASK } from '../model/types.js';
import { startRegistry, type RunningRegistry } from '../registry/registry-server.js';
import { applyDeclarations, readDeclarations } from './apply-command.js';
import { runUp, stopOnSignal, type UpHandle } from './up-command.js';

export interface DemoOptions {
  shanghaiPort: number;
  beijingPort: number;
  /** Undefined: the HTTP port + 1000; false: no gRPC. */
  shanghaiGrpcPort?: number | false | undefined;
  beijingGrpcPort?: number | false | undefined;
  listen: string;
  /** Where the DNS interface answers; `off`: none. */
  dnsListen: string;
  dataDir: string;
  redis?: string | undefined;
}

interface SdkClient {
  ready(): Promise<void>;
  registerInstance(service: string, instance: Record<string, unknown>): Promise<void>;
  close(): Promise<void>;
}

/** Instances the demo registers through the official Nacos SDK, as applications would. Made-up addresses, never contacted. */
const APPS = [
  { registry: 'shanghai', service: 'orders', ip: '10.0.1.11', port: 8080, metadata: { version: '1.4.2' } },
  { registry: 'shanghai', service: 'payments', ip: '10.0.1.31', port: 9090, metadata: { version: '2.0.0' } },
  { registry: 'beijing', service: 'orders', ip: '10.0.2.21', port: 8080, metadata: { version: '1.4.2' } },
] as const;

const quiet = { info() {}, warn() {}, error() {}, debug() {}, log() {} };

/** Consumers whose view of `orders` the demo shows (CMDB entries only: nothing is sent to them). */
const CONSUMERS = [
  { ip: '10.0.1.200', site: 'sh' },
  { ip: '10.0.2.200', site: 'bj' },
] as const;

const SITE_SELECTOR = JSON.stringify({ type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.site' });

/**
 * `regsync demo`: two embedded registries, a local regsync with `tasks/demo.yaml`, a few instances
 * registered through the official Nacos SDK, and a short story of what moved where.
 */
export async function runDemo(opts: DemoOptions): Promise<void> {
  const logger = createLogger(process.env.REGSYNC_LOG_LEVEL ? undefined : 'warn');
  const cmdbFile = fileURLToPath(new URL('../../../tasks/demo-cmdb.yaml', import.meta.url));
  const cmdb: RunningCmdb = await startCmdb({ provider: 'file', file: cmdbFile }, logger);
  const registries: Record<string, RunningRegistry> = {
    shanghai: await startRegistry({ port: opts.shanghaiPort, grpcPort: opts.shanghaiGrpcPort, logger, cmdb: cmdb.cache }),
    beijing: await startRegistry({ port: opts.beijingPort, grpcPort: opts.beijingGrpcPort, logger, cmdb: cmdb.cache }),
  };
  const running: { up?: UpHandle } = {};
  const sdks: SdkClient[] = [];
  const close = async () => {
    await Promise.all(sdks.map((c) => c.close()));
    await running.up?.close();
    await Promise.all(Object.values(registries).map((r) => r.close()));
    await cmdb.close();
  };
  stopOnSignal(close, logger);

  // Same-site routing for `orders`: a label selector in both registries.
  for (const registry of Object.values(registries)) {
    const res = await fetch(`${registry.url}/nacos/v1/ns/service?${new URLSearchParams({ serviceName: 'orders', selector: SITE_SELECTOR })}`, { method: 'POST' });
    if (!res.ok) throw new Error(`cannot set the selector of orders: ${await res.text()}`);
  }

  const dnsListen = opts.dnsListen === 'off' ? undefined : opts.dnsListen;
  // The demo's DNS trusts the subnet a local dig sends (+subnet), so that each site's view can be tried.
  const up = await runUp(
    // A clean state of its own every time: its own data dir, or its own prefix on a given Redis.
    { listen: opts.listen, redis: opts.redis, dataDir: opts.dataDir, fresh: true, prefix: opts.redis ? 'regsync-demo' : undefined, cmdb: cmdbFile, dnsListen, dnsSection: { site: { labels: ['site', 'region'], trustedResolvers: ['127.0.0.1'], protectThreshold: 0 } } },
    logger,
  );
  running.up = up;
  const api = up.node.url as string;
  const decl = readDeclarations(fileURLToPath(new URL('../../../tasks/demo.yaml', import.meta.url)));
  for (const c of decl.clusters) {
    const registry = registries[c.id];
    if (registry) c.endpoints = [registry.endpoint];
    // The registries speak Nacos gRPC too: regsync subscribes and publishes over it.
    if (registry?.grpcPort !== undefined) c.options = { ...(c.options as Record<string, unknown> | undefined), grpcPort: registry.grpcPort };
  }
  await applyDeclarations(api, decl);

  const require = createRequire(import.meta.url);
  const { NacosNamingClient } = require('nacos') as { NacosNamingClient: new (o: Record<string, unknown>) => SdkClient };
  for (const [name, registry] of Object.entries(registries)) {
    const client = new NacosNamingClient({ logger: quiet, serverList: registry.endpoint });
    await client.ready();
    sdks.push(client);
    for (const app of APPS.filter((a) => a.registry === name)) {
      await client.registerInstance(app.service, { ip: app.ip, port: app.port, metadata: { ...app.metadata } });
    }
  }

  const listing = () =>
    Object.entries(registries).flatMap(([name, registry]) =>
      registry.store.listServices('public', 'DEFAULT_GROUP').flatMap((s) =>
        [...s.instances.values()].map((i) => ({
          registry: name,
          service: s.name,
          address: `${i.ip}:${i.port}`,
          origin: i.metadata[MARK_ORIGIN],
          task: i.metadata[MARK_TASK],
          labels: ['site', 'zone', 'region'].flatMap((k) => (i.metadata[k] === undefined ? [] : [`${k}=${i.metadata[k]}`])).join(' '),
        })),
      ),
    );
  const expected = APPS.length * 2; // each app registered, and one copy of each: orders both ways, payments one way
  const deadline = Date.now() + 15_000;
  while (listing().length < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));

  // What a consumer in each site gets when it lists `orders` from each registry.
  const routing: string[] = [];
  for (const [name, registry] of Object.entries(registries)) {
    for (const consumer of CONSUMERS) {
      const res = await fetch(`${registry.url}/nacos/v1/ns/instance/list?${new URLSearchParams({ serviceName: 'orders', clientIP: consumer.ip })}`);
      const hosts = ((await res.json()) as { hosts: Array<{ ip: string; port: number }> }).hosts.map((h) => `${h.ip}:${h.port}`).sort();
      routing.push(`  ${name.padEnd(9)} consumer ${consumer.ip} (site ${consumer.site}) gets ${hosts.join(', ')}`);
    }
  }

  // The same service over DNS, once the DNS index has both providers.
  const dns: string[] = [];
  if (up.dns) {
    const name = 'orders.svc.regsync.internal';
    const key = { namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' };
    while ((up.dns.catalogue.service(key)?.instances.length ?? 0) < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const resolver = new dnsPromises.Resolver({ timeout: 2_000, tries: 1 });
    resolver.setServers([`${up.dns.host}:${up.dns.port}`]);
    const addresses = await resolver.resolve4(name).catch((err: Error) => [`(${err.message})`]);
    const at = `@${up.dns.host} -p ${up.dns.port}`;
    dns.push(
      '',
      `Every service of both registries is also answered over DNS (zone regsync.internal, ${up.dns.host}:${up.dns.port}):`,
      `  ${name} A -> ${addresses.sort().join(', ')}`,
      `  dig ${at} ${name} +short`,
      `  dig ${at} ${name} +short +subnet=10.0.1.200/32   # asked for a shanghai consumer: its own site's provider`,
      `  dig ${at} ${name} SRV +short   # ports, and targets that resolve`,
    );
  }

  const lines = [
    'regsync demo',
    `  shanghai registry  ${registries.shanghai?.url}   gRPC ${registries.shanghai?.grpcEndpoint ?? 'off'}`,
    `  beijing registry   ${registries.beijing?.url}   gRPC ${registries.beijing?.grpcEndpoint ?? 'off'}`,
    `  regsync REST API   ${api}   (tasks from tasks/demo.yaml)`,
    `  regsync dashboard  ${api}/   (open it in a browser)`,
    '',
    'Registered through the Nacos SDK: orders in both regions, payments in shanghai only. Now:',
    ...listing()
      .sort((a, b) => a.registry.localeCompare(b.registry) || a.service.localeCompare(b.service) || a.address.localeCompare(b.address))
      .map(
        (l) =>
          `  ${l.registry.padEnd(9)} ${l.service.padEnd(9)} ${l.address.padEnd(16)} ${(l.task ? `copy from ${l.origin} (task ${l.task})` : 'registered here').padEnd(44)} ${l.labels}`,
      ),
    '',
    'Copies carry the labels of their address from the CMDB (tasks/demo-cmdb.yaml) and of their source',
    'cluster. With the label selector CONSUMER.label.site = PROVIDER.label.site on orders, each',
    'registry sends a consumer to the providers of its own site, copies included:',
    ...routing,
    ...dns,
    '',
    'Look around:',
    `  curl ${api}/api/v1/tasks`,
    `  curl ${api}/api/v1/tasks/orders-sh-to-bj`,
    `  curl '${registries.beijing?.url}/nacos/v1/ns/instance/list?serviceName=orders&clientIP=10.0.1.200'   # a shanghai consumer in beijing`,
    `  curl '${registries.beijing?.url}/nacos/v1/ns/instance/list?serviceName=orders'`,
    `  curl -X POST '${registries.shanghai?.url}/nacos/v1/ns/instance?serviceName=orders&ip=10.0.1.12&port=8080'   # appears in beijing at once`,
    'Ctrl-C stops everything.',
    '',
  ];
  process.stdout.write(lines.join('\n'));
}
