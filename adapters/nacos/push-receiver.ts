import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import type { Logger } from 'pino';
import { unmapped } from './local-address.js';
import { decodePushPacket, pushAck, pushedServiceName } from './wire.js';

export interface PushReceiverOptions {
  log: Logger;
  /** Whether a sender belongs to the cluster; anything else is dropped without an answer. */
  isClusterAddress: (address: string) => boolean;
  /**
   * A `dom` packet said this service (`group@@name`, namespace unknown) changed. Its instances are
   * not decoded: watchers only need to know that they should read again.
   */
  onService: (groupedName: string) => void;
}

/** Counters of a push receiver. */
export interface PushReceiverStats {
  received: number;
  acked: number;
  /** Packets from outside the cluster, or unreadable. */
  dropped: number;
}

/**
 * The adapter's one UDP socket for Nacos push (v1 `udpPort` subscriptions), shared by every watched
 * service. Decodes `dom` packets (gzipped or not), answers each with `push-ack` (`dump-ack`,
 * `unknown-ack` for other types) to the sender, as the official SDKs do, and hands the service's
 * name on (only the name: the instances are read again by whoever cares).
 * Only cluster addresses are ever answered.
 */
export class PushReceiver {
  private socket: Socket | undefined;
  private closing = false;
  private readonly counters: PushReceiverStats = { received: 0, acked: 0, dropped: 0 };

  constructor(private readonly options: PushReceiverOptions) {}

  /** Binds to `address` on a free port and resolves with the port. */
  async start(address: string): Promise<number> {
    const socket = createSocket(isIPv6(address) ? 'udp6' : 'udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind({ port: 0, address, exclusive: true }, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    socket.on('error', (err) => this.options.log.warn({ err }, 'nacos push socket error'));
    socket.on('message', (msg, from) => this.onMessage(msg, from));
    socket.once('close', () => {
      if (!this.closing) this.options.log.warn('nacos push socket closed unexpectedly; polling only until it is reopened');
      this.socket = undefined;
    });
    socket.unref();
    this.socket = socket;
    return socket.address().port;
  }

  /** Whether the socket is open. */
  get alive(): boolean {
    return this.socket !== undefined;
  }

  stats(): PushReceiverStats {
    return { ...this.counters };
  }

  async close(): Promise<void> {
    this.closing = true;
    const socket = this.socket;
    this.socket = undefined;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }

  private onMessage(message: Buffer, from: RemoteInfo): void {
    const { log } = this.options;
    this.counters.received += 1;
    if (!this.options.isClusterAddress(unmapped(from.address))) {
      this.counters.dropped += 1;
      log.debug({ from: `${from.address}:${from.port}` }, 'dropped a push packet from outside the cluster');
      return;
    }
    const packet = decodePushPacket(message);
    if (!packet) {
      this.counters.dropped += 1;
      log.debug({ from: `${from.address}:${from.port}`, bytes: message.length }, 'dropped an unreadable push packet');
      return;
    }
    this.socket?.send(pushAck(packet), from.port, from.address, (err) => {
      if (err) log.debug({ err }, 'push ack not sent');
    });
    this.counters.acked += 1;
    if (packet.type !== 'dom' && packet.type !== 'service') return;
    let name: string;
    try {
      name = pushedServiceName(packet.data);
    } catch (err) {
      log.warn({ err, from: `${from.address}:${from.port}` }, 'unreadable service in a push packet; polling will catch up');
      return;
    }
    this.options.onService(name);
  }
}
