import { createSocket, type Socket } from 'node:dgram';
import { gzipSync } from 'node:zlib';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
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
    const pushed: string[] = [];
    const receiver = new PushReceiver({
      log: pino({ level: 'silent' }),
      isClusterAddress: (a) => a === '127.0.0.1',
      onService: (name) => pushed.push(name),
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
    expect(pushed).toEqual(['G@@a', 'G@@b']);
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

  it('hands on only the service name: instances are never decoded on the push path', async () => {
    const pushed: string[] = [];
    const receiver = new PushReceiver({ log: pino({ level: 'silent' }), isClusterAddress: () => true, onService: (name) => pushed.push(name) });
    const port = await receiver.start('127.0.0.1');
    closers.push(() => receiver.close());
    const server = await fakeServer();
    // Hosts that would fail conversion (no ip): a push naming the service is still handed on and acked.
    await server.send(domPacket(4, 'G@@unconverted', [{ port: 'not a port' }]), port);
    // Nacos 2.x style: plain name with groupName beside it (full-parse fallback).
    const plain = Buffer.from(JSON.stringify({ type: 'dom', data: JSON.stringify({ hosts: [], groupName: 'G2', name: 'plain' }), lastRefTime: 5 }));
    await server.send(plain, port);
    await waitUntil(() => server.replies.length === 2 && pushed.length === 2, { message: 'both handed on' });
    expect(pushed).toEqual(['G@@unconverted', 'G2@@plain']);
  });
});
