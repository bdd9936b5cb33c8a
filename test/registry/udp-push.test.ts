import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { gunzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { TestGrpcClient, wireHost } from '../support/grpc-client.js';
import { formOf } from '../support/http.js';
import { waitUntil } from '../support/wait-until.js';

interface Packet {
  type: string;
  data: string;
  lastRefTime: number;
  from: RemoteInfo;
}

/** UDP push on the wire, with a bare socket standing in for an SDK's push receiver. */
describe('UDP push', () => {
  let registry: RunningRegistry;
  let socket: Socket;
  let packets: Packet[];
  let ack: boolean;

  beforeAll(async () => {
    registry = await startRegistry({ port: 0, push: { ackTimeoutMs: 100, maxAttempts: 3 } });
  });
  afterAll(async () => {
    await registry.close();
  });

  const openReceiver = async () => {
    packets = [];
    ack = true;
    socket = createSocket('udp4');
    socket.on('message', (msg, from) => {
      const raw = msg[0] === 0x1f && msg[1] === 0x8b ? gunzipSync(msg) : msg;
      const packet = JSON.parse(raw.toString()) as Omit<Packet, 'from'>;
      packets.push({ ...packet, from });
      if (ack) socket.send(JSON.stringify({ type: 'push-ack', lastRefTime: packet.lastRefTime, data: '' }), from.port, from.address);
    });
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    return socket.address().port;
  };
  afterEach(async () => {
    await new Promise<void>((resolve) => socket.close(() => resolve()));
  });

  const send = (method: string, params: Record<string, string | number | boolean>) =>
    fetch(`${registry.url}/nacos/v1/ns/instance${method === 'GET' ? '/list' : ''}?${formOf(params)}`, { method });

  it('sends a dom packet with the ServiceInfo to the HTTP peer, not to the self-reported clientIP', async () => {
    const udpPort = await openReceiver();
    // clientIP is a made-up address: nothing may ever be sent there.
    await send('GET', { serviceName: 'push-a', udpPort, clientIP: '11.11.11.11', clusters: 'C1' });
    await send('POST', { serviceName: 'push-a', ip: '10.7.0.1', port: 1, clusterName: 'C1', metadata: '{"k":"v"}' });
    await send('POST', { serviceName: 'push-a', ip: '10.7.0.2', port: 1, clusterName: 'C2' });

    await waitUntil(() => packets.some((p) => (JSON.parse(p.data) as { hosts: unknown[] }).hosts.length === 1), { message: 'push' });
    const packet = packets.at(-1) as Packet;
    expect(packet.type).toBe('dom');
    expect(packet.from.address).toBe('127.0.0.1');
    const info = JSON.parse(packet.data) as { name: string; clusters: string; hosts: Array<Record<string, unknown>> };
    expect(info).toMatchObject({ name: 'DEFAULT_GROUP@@push-a', clusters: 'C1' });
    // The subscriber asked for cluster C1 only: the C2 instance is not in its pushes.
    expect(info.hosts).toEqual([expect.objectContaining({ ip: '10.7.0.1', clusterName: 'C1', metadata: { k: 'v' } })]);
    expect(registry.pusher.subscribersOf('public', 'DEFAULT_GROUP@@push-a')).toEqual([
      expect.objectContaining({ address: '127.0.0.1', port: udpPort, clientIP: '11.11.11.11' }),
    ]);
    await waitUntil(() => registry.pusher.stats().acked >= 1, { message: 'ack counted' });
  });

  it('sends an unacknowledged push again, then gives up', async () => {
    const udpPort = await openReceiver();
    ack = false;
    const failed = registry.pusher.stats().failed;
    await send('GET', { serviceName: 'push-b', udpPort });
    await send('POST', { serviceName: 'push-b', ip: '10.7.1.1', port: 1 });
    await waitUntil(() => registry.pusher.stats().failed > failed, { message: 'push given up' });
    const ids = packets.map((p) => p.lastRefTime);
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(1);
  });

  it('gzips large packets', async () => {
    const udpPort = await openReceiver();
    await send('GET', { serviceName: 'push-c', udpPort });
    const raw: Buffer[] = [];
    socket.on('message', (msg) => raw.push(msg));
    await send('POST', { serviceName: 'push-c', ip: '10.7.2.1', port: 1, metadata: JSON.stringify({ pad: 'y'.repeat(2000) }) });
    await waitUntil(() => raw.length > 0, { message: 'large push' });
    expect([raw[0]?.[0], raw[0]?.[1]]).toEqual([0x1f, 0x8b]);
    expect(JSON.parse(packets.at(-1)?.data ?? '{}')).toMatchObject({ hosts: [expect.objectContaining({ ip: '10.7.2.1' })] });
  });

  it('pushes instances a gRPC connection publishes, and their removal when the connection goes', async () => {
    const udpPort = await openReceiver();
    await send('GET', { serviceName: 'push-d', udpPort });
    const publisher = await TestGrpcClient.connect(registry.grpcEndpoint as string);
    const hostsOf = (p: Packet | undefined) => (JSON.parse(p?.data ?? '{"hosts":[]}') as { hosts: Array<{ ip: string }> }).hosts.map((h) => h.ip);
    try {
      await publisher.naming('BatchInstanceRequest', 'push-d', { type: 'batchRegisterInstance', instances: [wireHost('10.7.3.1', 1)] });
      await waitUntil(() => hostsOf(packets.at(-1)).includes('10.7.3.1'), { message: 'push of the published instance' });
    } finally {
      publisher.close();
    }
    await waitUntil(() => packets.length > 1 && hostsOf(packets.at(-1)).length === 0, { message: 'push after the connection went' });
  });
});
