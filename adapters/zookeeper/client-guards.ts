import type { Client } from 'node-zookeeper-client';
import type { Logger } from 'pino';

/** node-zookeeper-client's connection manager, as far as the guards touch it. */
interface ConnectionManagerInternals {
  on(event: 'state', listener: (state: number) => void): unknown;
  pendingBuffer: Buffer | null;
  socket: { destroy(): void } | undefined;
  state: number;
}

/** `ConnectionManager.STATES` of node-zookeeper-client 1.1.3. */
const DISCONNECTED = 0;
const CONNECTING = 1;

/**
 * Guards a node-zookeeper-client 1.1.3 client against two ways it can stop reconnecting for good.
 * Each works through the library's connection manager, an internal; when that does not look as
 * expected (another version), nothing is installed.
 *
 * - A packet cut by a dying connection (a server killed while answering) leaves its first bytes
 *   in the manager, which prepends them to the next connection's handshake: it is misread, and the
 *   client either throws from its socket handler or waits forever. They are dropped at every
 *   disconnection, before the next attempt.
 * - Once the TCP connection is up, the library waits for the handshake answer without a deadline.
 *   A server that never answers (ZooKeeper 3.8 accepts connections just before its database is
 *   loaded, refuses them, then fails to close them) leaves the client connecting forever. As the
 *   Java client does, an attempt with no session after `handshakeTimeoutMs` is dropped, and the
 *   library tries again.
 */
export function guardClient(client: Client, handshakeTimeoutMs: number, log: Logger): void {
  const manager = (client as unknown as { connectionManager?: Partial<ConnectionManagerInternals> }).connectionManager;
  if (!manager || typeof manager.on !== 'function' || !('pendingBuffer' in manager) || typeof manager.state !== 'number') {
    log.warn('unexpected node-zookeeper-client internals; reconnection guards not installed');
    return;
  }
  const internals = manager as ConnectionManagerInternals;
  let attempt: NodeJS.Timeout | undefined;
  internals.on('state', (state: number) => {
    if (attempt) clearTimeout(attempt);
    attempt = undefined;
    if (state === DISCONNECTED) internals.pendingBuffer = null;
    if (state !== CONNECTING) return;
    attempt = setTimeout(() => {
      attempt = undefined;
      if (internals.state !== CONNECTING) return;
      log.warn({ handshakeTimeoutMs }, 'no answer to the zookeeper handshake; dropping the connection and trying again');
      internals.socket?.destroy();
    }, handshakeTimeoutMs);
    attempt.unref();
  });
}
