import { createConnection, createServer, type Socket } from 'node:net';

/** A TCP pass-through in front of one server that a test can cut and open again. */
export interface TcpGate {
  /** `127.0.0.1:port`: give this to regsync instead of the server's endpoint. */
  endpoint: string;
  /** Drops every connection through the gate and refuses new ones (reset at once), as a server that went down. */
  cut(): void;
  /**
   * Drops every connection through the gate and holds new ones open without an answer, as a
   * server that hangs: a request through it waits for its own timeout.
   */
  hold(): void;
  /** Lets connections through again (held ones are dropped). */
  open(): void;
  /** Connections refused (reset at once) while cut, so far: how often a client tried again. */
  refused(): number;
  close(): Promise<void>;
}

/**
 * Starts a {@link TcpGate} to `target` (`host:port`). Why: a registry that is "down" for regsync
 * while its data stays where the test can read it, and comes back without a new port.
 */
export async function startTcpGate(target: string): Promise<TcpGate> {
  const at = target.lastIndexOf(':');
  const [host, port] = [target.slice(0, at), Number(target.slice(at + 1))];
  const sockets = new Set<Socket>();
  let mode: 'open' | 'cut' | 'hold' = 'open';
  let refused = 0;
  const held = new Set<Socket>();
  const server = createServer((client) => {
    if (mode === 'cut') {
      refused += 1;
      client.resetAndDestroy();
      return;
    }
    if (mode === 'hold') {
      held.add(client);
      client.on('error', () => client.destroy());
      client.on('close', () => held.delete(client));
      return;
    }
    const upstream = createConnection({ host, port });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const local = typeof address === 'object' && address ? address.port : 0;
  return {
    endpoint: `127.0.0.1:${local}`,
    cut() {
      mode = 'cut';
      for (const s of sockets) s.resetAndDestroy();
    },
    hold() {
      mode = 'hold';
      for (const s of sockets) s.resetAndDestroy();
    },
    open() {
      mode = 'open';
      for (const s of held) s.resetAndDestroy();
    },
    refused: () => refused,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of [...sockets, ...held]) s.destroy();
        server.close(() => resolve());
      }),
  };
}
