import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTcpGate } from './tcp-gate.js';
import { waitUntil } from './wait-until.js';

/** An echo server, and a client through a gate in front of it that collects what comes back. */
async function echoThroughGate(opts: Parameters<typeof startTcpGate>[1] = {}) {
  const server: Server = createServer((s) => {
    s.on('error', () => s.destroy());
    s.pipe(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const gate = await startTcpGate(`127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, opts);
  const [host, port] = gate.endpoint.split(':') as [string, string];
  const client: Socket = createConnection({ host, port: Number(port) });
  await new Promise<void>((resolve) => client.once('connect', () => resolve()));
  let received = '';
  client.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
  return {
    gate,
    client,
    received: () => received,
    close: async () => {
      client.destroy();
      await gate.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('TcpGate', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  it('delays bytes by the latency of each way, and delivers them in order', async () => {
    const echo = await echoThroughGate({ latency: { upMs: 100, downMs: 50 } });
    cleanups.push(echo.close);
    const sent = Date.now();
    const words = Array.from({ length: 50 }, (_, i) => `w${i};`);
    for (const w of words) echo.client.write(w);
    await waitUntil(() => echo.received() === words.join(''), { message: 'every word echoed' });
    // The round trip cannot be shorter than the injected delays.
    expect(Date.now() - sent).toBeGreaterThanOrEqual(150);

    echo.gate.latency({ upMs: 0, downMs: 0 });
    echo.client.write('fast;');
    await waitUntil(() => echo.received().endsWith('fast;'), { message: 'echo without latency' });
  });

  it('holds what is sent across a partition, keeps the connection, and delivers it in order once open', async () => {
    const echo = await echoThroughGate();
    cleanups.push(echo.close);
    echo.client.write('before;');
    await waitUntil(() => echo.received() === 'before;', { message: 'echo before the partition' });
    echo.gate.partition();
    for (let i = 0; i < 20; i += 1) echo.client.write(`p${i};`);
    // An absence, so a short look: nothing comes back while partitioned (the echo takes a few event-loop turns).
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(echo.received()).toBe('before;');
    expect(echo.client.destroyed).toBe(false);
    echo.gate.open();
    const expected = 'before;' + Array.from({ length: 20 }, (_, i) => `p${i};`).join('');
    await waitUntil(() => echo.received() === expected, { message: 'what was held, in order' });
    expect(echo.gate.connections()).toBe(1);
  });

  it('cut resets connections and refuses new ones until open', async () => {
    const echo = await echoThroughGate();
    cleanups.push(echo.close);
    const closed = new Promise<void>((resolve) => echo.client.on('close', () => resolve()));
    echo.client.on('error', () => undefined);
    echo.gate.cut();
    await closed;
    const [host, port] = echo.gate.endpoint.split(':') as [string, string];
    const refused = await new Promise<boolean>((resolve) => {
      const s = createConnection({ host, port: Number(port) });
      s.on('error', () => resolve(true));
      s.on('close', () => resolve(true));
      s.on('data', () => resolve(false));
    });
    expect(refused).toBe(true);
    echo.gate.open();
    const again = await new Promise<string>((resolve) => {
      const s = createConnection({ host, port: Number(port) }, () => s.write('x'));
      s.on('data', (d: Buffer) => {
        resolve(d.toString('utf8'));
        s.destroy();
      });
    });
    expect(again).toBe('x');
  });
});
