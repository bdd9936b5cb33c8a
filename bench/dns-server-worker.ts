import { createSocket } from 'node:dgram';
import { parentPort, workerData } from 'node:worker_threads';
import { DnsCatalogue } from '../src/dns/catalogue.js';
import { startDnsServer } from '../src/dns/dns-server.js';
import type { Instance } from '../src/model/types.js';

/** What the DNS benchmark's server thread runs: regsync's DNS server over `names` services, or a bare UDP echo (the ceiling). */
export interface DnsServerWorkerInput {
  mode: 'dns' | 'echo';
  names: number;
  instancesPerName: number;
}

const input = workerData as DnsServerWorkerInput;

async function main(): Promise<void> {
  if (input.mode === 'echo') {
    const socket = createSocket('udp4');
    socket.on('message', (message, rinfo) => socket.send(message, rinfo.port, rinfo.address));
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    parentPort?.postMessage({ port: socket.address().port });
    return;
  }
  const catalogue = new DnsCatalogue({ zone: 'regsync.internal' });
  for (let s = 0; s < input.names; s++) {
    const instances: Instance[] = [];
    for (let i = 0; i < input.instancesPerName; i++) {
      instances.push({ ip: `10.${(s >> 8) & 255}.${s & 255}.${i + 1}`, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: { site: i % 2 === 0 ? 'x11' : 'x12' } });
    }
    catalogue.put('bench', { namespace: 'public', group: 'DEFAULT_GROUP', name: `svc-${s}` }, instances);
  }
  const server = await startDnsServer({ zone: catalogue, rateLimit: { perSecond: 1e9, burst: 1e9 } });
  parentPort?.postMessage({ port: server.port, names: catalogue.stats().names });
}

main().catch((err: unknown) => parentPort?.postMessage({ error: err instanceof Error ? err.message : String(err) }));
