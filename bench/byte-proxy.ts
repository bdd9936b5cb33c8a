import { createServer, connect, type Server, type Socket } from 'node:net';

/** Bytes one side of a {@link ByteProxy} carried since the last `reset()`. */
export interface ByteCounts {
  /** Client -> registry: what the registry received (HTTP requests or HTTP/2 frames, TCP payload). */
  received: number;
  /** Registry -> client: what it sent back (responses, pushes on the gRPC stream). */
  sent: number;
}

/**
 * A loopback TCP relay in front of one registry port that counts the bytes each way (TCP payload:
 * HTTP/1.1 requests and responses with their headers, or HTTP/2 frames with gRPC framing and
 * protobuf; no IP/TCP headers, no TLS). regsync is pointed at the relay, so that HTTP and gRPC are
 * counted the same way; UDP pushes bypass it (the registry reports those itself).
 */
export class ByteProxy {
  private counts: ByteCounts = { received: 0, sent: 0 };
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    /** The relay's port on 127.0.0.1. */
    readonly port: number,
  ) {}

  /** Listens on a free loopback port and relays every connection to `127.0.0.1:targetPort`. */
  static async start(targetPort: number): Promise<ByteProxy> {
    const holder: { proxy?: ByteProxy } = {};
    const server = createServer({ noDelay: true }, (client) => {
      const upstream = connect({ host: '127.0.0.1', port: targetPort, noDelay: true });
      const p = holder.proxy as ByteProxy;
      p.sockets.add(client);
      p.sockets.add(upstream);
      client.on('data', (chunk: Buffer) => {
        p.counts.received += chunk.length;
        if (!upstream.write(chunk)) client.pause();
      });
      upstream.on('drain', () => client.resume());
      upstream.on('data', (chunk: Buffer) => {
        p.counts.sent += chunk.length;
        if (!client.write(chunk)) upstream.pause();
      });
      client.on('drain', () => upstream.resume());
      const done = () => {
        client.destroy();
        upstream.destroy();
        p.sockets.delete(client);
        p.sockets.delete(upstream);
      };
      client.on('close', done);
      upstream.on('close', done);
      client.on('error', done);
      upstream.on('error', done);
      client.on('end', () => upstream.end());
      upstream.on('end', () => client.end());
    });
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const a = server.address();
        resolve(typeof a === 'object' && a ? a.port : 0);
      });
    });
    holder.proxy = new ByteProxy(server, port);
    return holder.proxy;
  }

  /** Counts from now on. */
  reset(): void {
    this.counts = { received: 0, sent: 0 };
  }

  bytes(): ByteCounts {
    return { ...this.counts };
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
