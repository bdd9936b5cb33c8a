import { createLogger } from '../log.js';
import { startRegistry } from '../registry/registry-server.js';
import { closeOnSignal, registryOptionsFrom, type RegistryCliOptions } from './registry-command.js';

/**
 * Demo services. The addresses are made up and never contacted: the registry performs no health
 * checks, and the demo keeps its ephemeral instances alive by renewing them in-process.
 */
const DEMO_INSTANCES: Array<{ service: string; ip: string; port: number; metadata: Record<string, string> }> = [
  { service: 'orders', ip: '10.0.1.11', port: 8080, metadata: { site: 'sh', version: '1.4.2' } },
  { service: 'orders', ip: '10.0.1.12', port: 8080, metadata: { site: 'bj', version: '1.4.2' } },
  { service: 'payments', ip: '10.0.2.21', port: 9090, metadata: { site: 'sh' } },
];

/** `regsync demo`: an embedded registry on the default port, seeded with demo services. */
export async function runDemo(opts: RegistryCliOptions): Promise<void> {
  const logger = createLogger();
  const registry = await startRegistry(registryOptionsFrom(opts, logger));
  const { store } = registry;
  for (const d of DEMO_INSTANCES) {
    store.register('public', 'DEFAULT_GROUP', d.service, {
      ip: d.ip,
      port: d.port,
      weight: 1,
      healthy: true,
      enabled: true,
      ephemeral: true,
      clusterName: 'DEFAULT',
      metadata: d.metadata,
    });
  }
  const keepAlive = setInterval(() => {
    for (const d of DEMO_INSTANCES) store.beat('public', 'DEFAULT_GROUP', d.service, d.ip, d.port, 'DEFAULT');
  }, 1_000);
  keepAlive.unref();
  const u = registry.url;
  process.stdout.write(
    [
      `regsync demo: embedded Nacos-compatible registry on ${u}`,
      `  services:   curl '${u}/nacos/v1/ns/service/list?pageNo=1&pageSize=10'`,
      `  instances:  curl '${u}/nacos/v1/ns/instance/list?serviceName=orders'`,
      `  register:   curl -X POST '${u}/nacos/v1/ns/instance?serviceName=orders&ip=10.0.1.13&port=8080&ephemeral=false'`,
      `  v3 list:    curl '${u}/nacos/v3/admin/ns/instance/list?serviceName=orders'`,
      'Point any Nacos client at it (server address ' + registry.endpoint + '). Ctrl-C stops.',
      '',
    ].join('\n'),
  );
  closeOnSignal(registry, logger, async () => clearInterval(keepAlive));
}
