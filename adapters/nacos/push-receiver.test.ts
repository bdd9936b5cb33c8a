import { createSocket, type Socket } from 'node:dgram';
import { gzipSync } from 'node:zlib';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Instance } from '../../src/model/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { PushReceiver } from './push-receiver.js';

describe('PushReceiver', () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((c) => c()));
  });

  /** A stand-in for the server's push socket, recording what it is sent back. */
  const fakeServer = async () => {
    const socket: Socket = createSocket('udp4');
    const replies: Array<Record<string, unknown>> = [];
    socket.on('message', (msg) => replies.push(JSON.parse(msg.toString()) as Record<string, unknown>));
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => socket.close(() => resolve())));
    const send = (packet: Buffer, port: number) =>
      new Promise<void>((resolve, reject) => socket.send(packet, port, '127.0.0.1', (err) => (err ? reject(err) : resolve())));
    return { replies, send };
  };

  const domPacket = (lastRefTime: number, name: string, hosts: unknown[]) =>
    Buffer.from(JSON.stringify({ type: 'dom', data: JSON.stringify({ name, hosts }), lastRefTime }));

  it('acknowledges pushes from the cluster, plain or gzipped, and hands the service on', async () => {
    const pushed: Array<{ name: string; instances: Instance[] }> = [];
    const receiver = new PushReceiver({
      log: pino({ level: 'silent' }),
      isClusterAddress: (a) => a === '127.0.0.1',
      onService: (name, instances) => pushed.push({ name, instances }),
    });
    const port = await receiver.start('127.0.0.1');
    closers.push(() => receiver.close());
    const server = await fakeServer();

    await server.send(domPacket(1, 'G@@a', [{ ip: '10.40.0.1', port: 1 }]), port);
    await server.send(gzipSync(domPacket(2, 'G@@b', [])), port);
    await waitUntil(() => server.replies.length === 2, { message: 'two acks' });
    expect(server.replies).toEqual([
      { type: 'push-ack', lastRefTime: 1, data: '' },
      { type: 'push-ack', lastRefTime: 2, data: '' },
    ]);
    expect(pushed.map((p) => p.name)).toEqual(['G@@a', 'G@@b']);
    expect(pushed[0]?.instances).toEqual([expect.objectContaining({ ip: '10.40.0.1', port: 1 })]);
    expect(receiver.stats()).toEqual({ received: 2, acked: 2, dropped: 0 });
  });

  it('never answers a sender outside the cluster', async () => {
    let allowed = false;
    const pushed: string[] = [];
    const receiver = new PushReceiver({
      log: pino({ level: 'silent' }),
      isClusterAddress: () => allowed,
      onService: (name) => pushed.push(name),
    });
    const port = await receiver.start('127.0.0.1');
    closers.push(() => receiver.close());
    const server = await fakeServer();

    await server.send(domPacket(1, 'G@@forged', []), port);
    await waitUntil(() => receiver.stats().dropped === 1, { message: 'forged packet dropped' });
    // Then a legitimate packet: its ack is the only reply, so the forged one got none.
    allowed = true;
    await server.send(domPacket(2, 'G@@real', []), port);
    await waitUntil(() => server.replies.length > 0, { message: 'ack of the real packet' });
    expect(server.replies).toEqual([{ type: 'push-ack', lastRefTime: 2, data: '' }]);
    expect(pushed).toEqual(['G@@real']);
  });

  it('drops unreadable packets without an answer', async () => {
    const receiver = new PushReceiver({ log: pino({ level: 'silent' }), isClusterAddress: () => true, onService: () => {} });
    const port = await receiver.start('127.0.0.1');
    closers.push(() => receiver.close());
    const server = await fakeServer();
    await server.send(Buffer.from('garbage'), port);
    await waitUntil(() => receiver.stats().dropped === 1, { message: 'garbage dropped' });
    await server.send(domPacket(3, 'G@@ok', []), port);
    await waitUntil(() => server.replies.length > 0, { message: 'ack' });
    expect(server.replies).toEqual([{ type: 'push-ack', lastRefTime: 3, data: '' }]);
  });
});
