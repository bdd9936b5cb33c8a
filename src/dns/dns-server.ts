import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { createServer, isIPv6, type Server, type Socket } from 'node:net';
import * as dnsPacket from 'dns-packet';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { DnsResponder, RCODE_NAMES, type Asker, type ResponderOptions } from './responder.js';
import type { ZoneLookup } from './zone.js';

/** A token bucket per client address: `perSecond` queries on average, bursts up to `burst`. */
export interface DnsRateLimit {
  perSecond: number;
  burst: number;
}

/** How to run the DNS server. */
export interface DnsServerOptions {
  /** Address to bind (default 127.0.0.1: never an open resolver unless asked). */
  host?: string;
  /** Port for both UDP and TCP; 0 picks a free one (the same for both). */
  port?: number;
  zone: ZoneLookup;
  logger?: Logger;
  /** Ceiling on EDNS UDP answers (default 1232). */
  udpSizeLimit?: number;
  /** Open TCP connections at most (default 64); more are refused by the kernel listener. */
  maxTcpConnections?: number;
  /** A TCP connection idle this long is closed (default 10,000 ms). */
  tcpIdleMs?: number;
  /** Per-address limit (default 1,000/s, bursts of 2,000); queries over it are dropped. */
  rateLimit?: DnsRateLimit;
  /** Passed to the responder (negative TTL, NS address, randomness). */
  responder?: Omit<ResponderOptions, 'udpSizeLimit'>;
}

/** Counters for metrics: what was asked and answered, and what was not answered. */
export interface DnsServerStats {
  queriesByType: Record<string, number>;
  answersByRcode: Record<string, number>;
  truncated: number;
  dropped: { malformed: number; rateLimited: number; notQuery: number };
}

/** A running DNS server. */
export interface DnsServer {
  readonly host: string;
  readonly port: number;
  stats(): DnsServerStats;
  close(): Promise<void>;
}

const MAX_BUCKETS = 100_000;

/**
 * Starts regsync's DNS server on UDP and TCP on the same port (a client that gets TC retries over
 * TCP on the port it asked). Every datagram and TCP message is answered synchronously from the
 * zone; nothing a client sends can throw out of a handler or hold the event loop longer than one
 * decode and one encode of at most 64 KiB.
 */
export async function startDnsServer(options: DnsServerOptions): Promise<DnsServer> {
  const host = options.host ?? '127.0.0.1';
  const log = (options.logger ?? silentLogger()).child({ component: 'dns' });
  const responder = new DnsResponder(options.zone, {
    ...options.responder,
    udpSizeLimit: options.udpSizeLimit,
    nsAddress: options.responder?.nsAddress ?? (host === '0.0.0.0' || isIPv6(host) ? undefined : host),
  });
  const stats: DnsServerStats = { queriesByType: {}, answersByRcode: {}, truncated: 0, dropped: { malformed: 0, rateLimited: 0, notQuery: 0 } };
  const limiter = new RateLimiter(options.rateLimit ?? { perSecond: 1000, burst: 2000 });

  /** One message in, the reply out (undefined: send nothing). */
  const handle = (message: Buffer, asker: Asker): Buffer | undefined => {
    if (!limiter.take(asker.address)) {
      stats.dropped.rateLimited++;
      return undefined;
    }
    let query: dnsPacket.DecodedPacket;
    try {
      query = dnsPacket.decode(message);
    } catch (err) {
      stats.dropped.malformed++;
      log.debug({ client: asker.address, transport: asker.transport, err: (err as Error).message }, 'undecodable DNS message');
      const formerr = responder.respondToUndecodable(message);
      if (formerr) count(stats.answersByRcode, 'FORMERR');
      return formerr;
    }
    if (query.type === 'response') {
      stats.dropped.notQuery++;
      return undefined;
    }
    try {
      const reply = responder.respond(query, asker);
      count(stats.queriesByType, reply.qtype);
      count(stats.answersByRcode, RCODE_NAMES[reply.rcode] ?? String(reply.rcode));
      if (reply.truncated) stats.truncated++;
      return reply.message;
    } catch (err) {
      log.warn({ client: asker.address, err }, 'DNS answer failed');
      count(stats.answersByRcode, 'SERVFAIL');
      return servfail(message);
    }
  };

  const { udp, tcp, port } = await bindBoth(host, options.port ?? 0, options.maxTcpConnections ?? 64);
  udp.on('message', (message: Buffer, rinfo: RemoteInfo) => {
    const reply = handle(message, { address: rinfo.address, transport: 'udp' });
    if (reply) udp.send(reply, rinfo.port, rinfo.address, (err) => err && log.debug({ err: err.message }, 'DNS UDP send failed'));
  });
  udp.on('error', (err) => log.warn({ err }, 'DNS UDP socket error'));
  const sockets = new Set<Socket>();
  tcp.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    serveTcp(socket, options.tcpIdleMs ?? 10_000, (m) => handle(m, { address: socket.remoteAddress ?? '', transport: 'tcp' }));
  });
  tcp.on('error', (err) => log.warn({ err }, 'DNS TCP server error'));
  log.info({ host, port }, 'DNS server listening (UDP and TCP)');

  return {
    host,
    port,
    stats: () => structuredClone(stats),
    close: async () => {
      for (const s of sockets) s.destroy();
      await Promise.all([new Promise<void>((r) => udp.close(() => r())), new Promise<void>((r) => tcp.close(() => r()))]);
    },
  };
}

/** Reads 2-byte-length-prefixed messages, answers each in order, closes the connection when idle. */
function serveTcp(socket: Socket, idleMs: number, handle: (message: Buffer) => Buffer | undefined): void {
  let pending: Buffer = Buffer.alloc(0);
  socket.setTimeout(idleMs, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 2) {
      const length = pending.readUInt16BE(0);
      if (pending.length < 2 + length) break;
      const message = pending.subarray(2, 2 + length);
      pending = pending.subarray(2 + length);
      const reply = handle(message);
      if (reply) {
        const frame = Buffer.alloc(2 + reply.length);
        frame.writeUInt16BE(reply.length, 0);
        reply.copy(frame, 2);
        socket.write(frame);
      }
    }
  });
}

/** Binds UDP, then TCP on the port UDP got; with port 0, retries when that TCP port is taken. */
async function bindBoth(host: string, port: number, maxConnections: number): Promise<{ udp: UdpSocket; tcp: Server; port: number }> {
  const type = isIPv6(host) ? 'udp6' : 'udp4';
  for (let attempt = 0; ; attempt++) {
    const udp = createSocket({ type });
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(port, host, () => {
        udp.off('error', reject);
        resolve();
      });
    });
    const bound = udp.address().port;
    const tcp = createServer();
    tcp.maxConnections = maxConnections;
    try {
      await new Promise<void>((resolve, reject) => {
        tcp.once('error', reject);
        tcp.listen({ host, port: bound, exclusive: true }, () => {
          tcp.off('error', reject);
          resolve();
        });
      });
      return { udp, tcp, port: bound };
    } catch (err) {
      await new Promise<void>((r) => udp.close(() => r()));
      if (port !== 0 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 20) throw err;
    }
  }
}

/** SERVFAIL with the header only, for an answer that failed to build. */
function servfail(message: Buffer): Buffer | undefined {
  if (message.length < 12) return undefined;
  const out = Buffer.alloc(12);
  out.writeUInt16BE(message.readUInt16BE(0), 0);
  out.writeUInt16BE(0x8000 | (message.readUInt16BE(2) & 0x7900) | 2, 2);
  return out;
}

function count(into: Record<string, number>, key: string): void {
  into[key] = (into[key] ?? 0) + 1;
}

/** Token buckets per address; the table is cleared when it grows past a bound (spoofed sources). */
class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  constructor(private readonly limit: DnsRateLimit) {}

  take(address: string): boolean {
    const now = Date.now();
    let bucket = this.buckets.get(address);
    if (!bucket) {
      if (this.buckets.size >= MAX_BUCKETS) this.buckets.clear();
      bucket = { tokens: this.limit.burst, at: now };
      this.buckets.set(address, bucket);
    }
    bucket.tokens = Math.min(this.limit.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.limit.perSecond);
    bucket.at = now;
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }
}
