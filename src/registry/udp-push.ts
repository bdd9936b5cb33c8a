import { createSocket, type Socket } from 'node:dgram';
import { gzipSync } from 'node:zlib';
import type { Logger } from 'pino';
import type { LabelSource } from './label-selector.js';
import type { NamingStore, ServiceChange } from './naming-store.js';
import { GROUP_SEPARATOR } from './naming-store.js';
import { serviceInfoView, type HostTimings } from './service-view.js';

/** A consumer that asked to be pushed changes of one service (`udpPort` on a v1 list). */
export interface Subscriber {
  /** Where packets go: the peer address of the HTTP request, never the self-reported clientIP. */
  address: string;
  port: number;
  /** The `clusters` filter of the list request; the pushed ServiceInfo uses the same filter. */
  clusters: string;
  /** The consumer's self-reported identity (`clientIP`, else the peer address), for diagnostics. */
  clientIP: string;
  /**
   * The consumer IP the service's selector is evaluated for: the list request's `clientIP`, undefined
   * when it named none. Pushes carry the same selection the subscriber's own list got; the address is
   * only ever a label lookup key, never a destination.
   */
  consumerIp: string | undefined;
  agent: string;
  lastRefresh: number;
  /** List requests seen from this subscriber (its first one included). */
  refreshes: number;
}

export interface PushOptions {
  /** Subscribers that have not listed the service for this long are dropped (Nacos: zombie clients). */
  subscriberTtlMs: number;
  /** A push without `push-ack` is sent again after this long ... */
  ackTimeoutMs: number;
  /** ... at most this many times in all. */
  maxAttempts: number;
  /** Packets larger than this are gzipped, as Nacos does. */
  gzipAboveBytes: number;
}

export const DEFAULT_PUSH: PushOptions = {
  subscriberTtlMs: 30_000,
  ackTimeoutMs: 1_000,
  maxAttempts: 3,
  gzipAboveBytes: 1024,
};

export interface PushStats {
  sent: number;
  acked: number;
  retried: number;
  failed: number;
}

interface PendingPush {
  subscriber: Subscriber;
  packet: Buffer;
  attempts: number;
  timer: NodeJS.Timeout;
}

/**
 * Sends `dom` packets to subscribers of a service whenever it changes, the way the official Nacos
 * SDKs expect (`{type:"dom", data:"<ServiceInfo JSON>", lastRefTime}`, answered by `push-ack`).
 * Changes are coalesced per service within one event-loop turn. Each subscriber gets the hosts its own
 * list would show: its cluster filter and the service's selector evaluated for its `consumerIp`, with
 * labels from `labels` (as Nacos' UDP push executor selects per subscriber).
 */
export class UdpPusher {
  private socket: Socket | undefined;
  private readonly subscribers = new Map<string, Map<string, Subscriber>>();
  private readonly pending = new Map<number, PendingPush>();
  private readonly dirty = new Map<string, ServiceChange>();
  private flushScheduled = false;
  private lastPacketId = 0;
  private readonly counters: PushStats = { sent: 0, acked: 0, retried: 0, failed: 0 };
  private readonly options: PushOptions;
  private readonly onChange = (change: ServiceChange) => this.markDirty(change);

  constructor(
    private readonly store: NamingStore,
    private readonly timings: HostTimings & { cacheMillis: number },
    private readonly log: Logger,
    options: Partial<PushOptions> = {},
    private readonly labels: LabelSource | undefined = undefined,
  ) {
    this.options = { ...DEFAULT_PUSH, ...options };
  }

  /** Opens the UDP socket on `host` (ephemeral port) and starts listening to store changes. */
  async start(host: string): Promise<void> {
    const family = host.includes(':') ? 'udp6' : 'udp4';
    const socket = createSocket(family);
    socket.on('message', (msg) => this.onAck(msg));
    socket.on('error', (err) => this.log.warn({ err }, 'udp push socket error'));
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, host, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    this.socket = socket;
    this.store.on('change', this.onChange);
  }

  async close(): Promise<void> {
    this.store.off('change', this.onChange);
    for (const p of this.pending.values()) clearTimeout(p.timer);
    this.pending.clear();
    const socket = this.socket;
    this.socket = undefined;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }

  /** Records (or refreshes) a subscriber of a service; called for every v1 list with `udpPort`. */
  subscribe(namespaceId: string, groupedName: string, subscriber: Omit<Subscriber, 'lastRefresh' | 'refreshes'>): void {
    const key = serviceKey(namespaceId, groupedName);
    let subs = this.subscribers.get(key);
    if (!subs) {
      subs = new Map();
      this.subscribers.set(key, subs);
    }
    const id = `${subscriber.address}|${subscriber.port}|${subscriber.clusters}`;
    const refreshes = (subs.get(id)?.refreshes ?? 0) + 1;
    subs.set(id, { ...subscriber, lastRefresh: Date.now(), refreshes });
  }

  /** Live subscribers of a service. */
  subscribersOf(namespaceId: string, groupedName: string): Subscriber[] {
    this.dropZombies(serviceKey(namespaceId, groupedName));
    return [...(this.subscribers.get(serviceKey(namespaceId, groupedName))?.values() ?? [])];
  }

  stats(): PushStats {
    return { ...this.counters };
  }

  private markDirty(change: ServiceChange): void {
    this.dirty.set(serviceKey(change.namespaceId, change.groupedName), change);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      const changes = [...this.dirty.values()];
      this.dirty.clear();
      for (const c of changes) this.pushService(c);
    });
  }

  private pushService(change: ServiceChange): void {
    const key = serviceKey(change.namespaceId, change.groupedName);
    this.dropZombies(key);
    const subs = this.subscribers.get(key);
    if (!subs || subs.size === 0) return;
    const [groupName, name] = splitGrouped(change.groupedName);
    const service = this.store.getService(change.namespaceId, groupName, name);
    for (const subscriber of subs.values()) {
      const view = serviceInfoView(
        service,
        { groupName, name },
        { clusters: subscriber.clusters, healthyOnly: false, enabledOnly: true },
        this.timings,
        { ip: subscriber.consumerIp, labels: this.labels },
      );
      this.send(subscriber, JSON.stringify(view));
    }
  }

  private send(subscriber: Subscriber, data: string): void {
    // A packet id that is unique and increasing; it doubles as the ack key.
    const id = Math.max(Date.now() * 1000, this.lastPacketId + 1);
    this.lastPacketId = id;
    const json = Buffer.from(JSON.stringify({ type: 'dom', data, lastRefTime: id }));
    const packet = json.length > this.options.gzipAboveBytes ? gzipSync(json) : json;
    const pending: PendingPush = { subscriber, packet, attempts: 0, timer: undefined as unknown as NodeJS.Timeout };
    this.pending.set(id, pending);
    this.transmit(id, pending);
  }

  private transmit(id: number, pending: PendingPush): void {
    const socket = this.socket;
    if (!socket) return;
    pending.attempts += 1;
    if (pending.attempts === 1) this.counters.sent += 1;
    else this.counters.retried += 1;
    socket.send(pending.packet, pending.subscriber.port, pending.subscriber.address, (err) => {
      if (err) this.log.debug({ err, to: `${pending.subscriber.address}:${pending.subscriber.port}` }, 'udp push send failed');
    });
    pending.timer = setTimeout(() => {
      if (!this.pending.has(id)) return;
      if (pending.attempts >= this.options.maxAttempts) {
        this.pending.delete(id);
        this.counters.failed += 1;
        this.log.debug({ to: `${pending.subscriber.address}:${pending.subscriber.port}` }, 'udp push not acknowledged');
        return;
      }
      this.transmit(id, pending);
    }, this.options.ackTimeoutMs);
    pending.timer.unref();
  }

  private onAck(msg: Buffer): void {
    let ack: { type?: unknown; lastRefTime?: unknown };
    try {
      ack = JSON.parse(msg.toString('utf8')) as typeof ack;
    } catch {
      return;
    }
    const id = Number(ack.lastRefTime);
    const pending = this.pending.get(id);
    if (!pending) return;
    clearTimeout(pending.timer);
    this.pending.delete(id);
    if (ack.type === 'push-ack') this.counters.acked += 1;
  }

  private dropZombies(key: string): void {
    const subs = this.subscribers.get(key);
    if (!subs) return;
    const cutoff = Date.now() - this.options.subscriberTtlMs;
    for (const [k, s] of subs) if (s.lastRefresh < cutoff) subs.delete(k);
    if (subs.size === 0) this.subscribers.delete(key);
  }
}

function serviceKey(namespaceId: string, groupedName: string): string {
  return `${namespaceId}\n${groupedName}`;
}

function splitGrouped(grouped: string): [string, string] {
  const at = grouped.indexOf(GROUP_SEPARATOR);
  return [grouped.slice(0, at), grouped.slice(at + GROUP_SEPARATOR.length)];
}
