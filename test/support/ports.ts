import { createServer } from 'node:net';

/**
 * Asks the kernel for a TCP port that is free on 127.0.0.1 right now.
 *
 * Why: test servers (redis-server, ZooKeeper, regsync itself) must never collide when test files run
 * in parallel, and none of them can report back a port they picked themselves in a way that is easy to read.
 *
 * Deliberately left out: reserving the port. Between `close()` and the caller's bind another process may
 * take it; callers that spawn a server retry with a new port when the bind fails.
 */
export function freePort(): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`freePort: unexpected server address ${String(address)}`));
        return;
      }
      const { port } = address;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}
