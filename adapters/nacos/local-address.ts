import { lookup } from 'node:dns/promises';
import { connect } from 'node:net';
import type { NacosEndpoint } from './nacos-options.js';

/** The two ends of a TCP connection to the cluster. */
export interface RouteToCluster {
  /** Our address on the interface that reaches the cluster: where push packets can arrive. */
  localAddress: string;
  /** The cluster node's address as connected. */
  remoteAddress: string;
  endpoint: string;
}

/**
 * Finds the local address that reaches the cluster by opening (and at once closing) a TCP
 * connection to the first endpoint that accepts one. Why: the push receiver must bind to an
 * interface the cluster can reach (not every interface, and not a guess from `os.networkInterfaces`),
 * and the server must be told that address as `clientIP`. A loopback cluster gives 127.0.0.1.
 */
export async function routeToCluster(endpoints: readonly NacosEndpoint[], timeoutMs: number): Promise<RouteToCluster> {
  const errors: string[] = [];
  for (const endpoint of endpoints) {
    try {
      return await new Promise<RouteToCluster>((resolve, reject) => {
        const socket = connect({ host: endpoint.host, port: endpoint.port });
        socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`connect timed out after ${timeoutMs} ms`)));
        socket.once('error', reject);
        socket.once('connect', () => {
          const localAddress = unmapped(socket.localAddress ?? '');
          const remoteAddress = unmapped(socket.remoteAddress ?? '');
          socket.destroy();
          if (localAddress === '') reject(new Error('no local address'));
          else resolve({ localAddress, remoteAddress, endpoint: endpoint.label });
        });
      });
    } catch (err) {
      errors.push(`${endpoint.label}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  throw new Error(`no endpoint accepted a connection (${errors.join('; ')})`);
}

/**
 * Every address the cluster's endpoints resolve to. Push packets from anywhere else are dropped
 * unanswered, so that a forged packet can neither trigger reads nor make us send to a third party.
 */
export async function clusterAddresses(endpoints: readonly NacosEndpoint[]): Promise<Set<string>> {
  const addresses = new Set<string>();
  for (const endpoint of endpoints) {
    try {
      for (const { address } of await lookup(endpoint.host, { all: true })) addresses.add(unmapped(address));
    } catch {
      // An endpoint that does not resolve now sends no pushes now.
    }
  }
  return addresses;
}

/** `::ffff:10.0.0.1` -> `10.0.0.1`: the same host seen through an IPv6 socket. */
export function unmapped(address: string): string {
  return address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
}
