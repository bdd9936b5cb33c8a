import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** A loopback HTTP server a test can stop and start again on the same port, its state kept by its maker. */
export interface RestartableServer {
  readonly port: number;
  /** Stops answering: the port is closed and open connections are cut. */
  stop(): Promise<void>;
  /** Answers again on the same port, with a new server from the same maker. */
  start(): Promise<void>;
  /** Stops, if listening. */
  close(): Promise<void>;
}

/**
 * Listens with `create()`'s server on a free 127.0.0.1 port, keeping track of its connections so
 * that `stop()` cuts them (an outage, not a drain). `onStop` runs first at each stop (a server
 * forgets the requests it holds open).
 */
export async function listenRestartable(create: () => Server, onStop: () => void = () => {}): Promise<RestartableServer> {
  const sockets = new Set<Socket>();
  let server: Server;
  const listen = async (port: number): Promise<number> => {
    server = create();
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    return (server.address() as AddressInfo).port;
  };
  const port = await listen(0);
  const stop = async (): Promise<void> => {
    onStop();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    port,
    stop,
    async start() {
      await listen(port);
    },
    async close() {
      if (server.listening) await stop();
    },
  };
}
