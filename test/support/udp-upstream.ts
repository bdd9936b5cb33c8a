import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';

/** A UDP server on loopback for DNS tests: what it received, and how to stop it. */
export interface UdpUpstream {
  port: number;
  received: Buffer[];
  close(): Promise<void>;
}

/** A UDP upstream on loopback run by `onQuery` (which may answer or not; by default it never answers: a dead upstream). */
export async function udpUpstream(onQuery: (message: Buffer, from: RemoteInfo, socket: Socket) => void = () => undefined): Promise<UdpUpstream> {
  const socket = createSocket('udp4');
  const received: Buffer[] = [];
  socket.on('message', (message, from) => {
    received.push(message);
    onQuery(message, from, socket);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return { port: socket.address().port, received, close: () => new Promise<void>((r) => socket.close(() => r())) };
}

/** A loopback port nothing listens on (bound, then closed): the kernel refuses UDP and TCP alike. */
export async function closedUdpPort(): Promise<number> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  await new Promise<void>((r) => socket.close(() => r()));
  return port;
}
