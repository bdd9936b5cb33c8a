import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { createServer, isIPv6, type Server, type Socket } from 'node:net';
import * as dnsPacket from 'dns-packet';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { DnsForwarder, type DnsForwardOptions } from './forwarder.js';
import { DnsResponder, RCODE, RCODE_NAMES, type Asker, type DnsReply, type ResponderOptions } from './responder.js';
import type { ZoneLookup } from './zone.js';

/** A token bucket per client address: `perSecond` queries on average, bursts up to `burst`. */
export interface DnsRateLimit {
  perSecond: number;
  burst: number;
}

/** One answered query, as an observer (metrics, query log) sees it. */
export interface DnsQueryRecord {
  transport: 'udp' | 'tcp';
  /** QTYPE asked ('NONE' for a message that could not be decoded, answered FORMERR). */
  qtype: string;
  /** RCODE name of the answer sent, e.g. NOERROR, NXDOMAIN, SERVFAIL. */
  rcode: string;
  /** Records in the answer section. */
  answers: number;
  /** Answered from a service served stale (its registry cannot be read now). */
  stale: boolean;
  /** TC was set. */
  truncated: boolean;
  /** Set for a name outside the zone sent upstream: answered, or SERVFAIL because every upstream failed or timed out, or because too many were in flight. */
  forwarded?: 'answered' | 'failed' | 'timeout' | 'busy';
  /** From receiving the message to the answer being ready to send. */
  seconds: number;
}

/** Why a message got no answer at all. */
export type DnsDropReason = 'malformed' | 'rateLimited' | 'notQuery';

/**
 * Told about every answered query and every dropped message, synchronously on the serving path:
 * keep it cheap (count, sample). A throwing observer is logged once and never breaks serving.
 */
export interface DnsServerObserver {
  query(record: DnsQueryRecord): void;
  dropped(reason: DnsDropReason): void;
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
  /** Passed to the responder (negative TTL, NS address, randomness); RA follows `forward`. */
  responder?: Omit<ResponderOptions, 'udpSizeLimit' | 'recursionAvailable'>;
  /** Forward names outside the zone to these upstreams (default: off, such names get REFUSED). */
  forward?: DnsForwardOptions;
  /** Sees every answered query and every drop (metrics, query logs). */
  observer?: DnsServerObserver;
}

/** Counters for metrics: what was asked and answered, and what was not answered. */
export interface DnsServerStats {
  queriesByType: Record<string, number>;
  answersByRcode: Record<string, number>;
  truncated: number;
  /** Answers from a service served stale. */
  staleAnswers: number;
  /** Queries for names outside the zone, by what became of them upstream. */
  forwarded: { answered: number; failed: number; timeout: number; busy: number };
  /** Messages not answered at all. */
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
const FLAG_TC = 0x0200;

type Send = (reply: Buffer) => void;

/**
 * Starts regsync's DNS server on UDP and TCP on the same port (a client that gets TC retries over
 * TCP on the port it asked). Names in the zone are answered synchronously; nothing a client sends
 * can throw out of a handler or hold the event loop longer than one decode and one encode of at
 * most 64 KiB. With `forward`, names outside the zone are sent upstream and answered when the
 * upstream answers (over TCP possibly out of order, as RFC 7766 allows).
 */
export async function startDnsServer(options: DnsServerOptions): Promise<DnsServer> {
  const host = options.host ?? '127.0.0.1';
  const log = (options.logger ?? silentLogger()).child({ component: 'dns' });
  const forwarder = options.forward ? new DnsForwarder(options.forward) : undefined;
  const responder = new DnsResponder(options.zone, {
    ...options.responder,
    udpSizeLimit: options.udpSizeLimit,
    nsAddress: options.responder?.nsAddress ?? (host === '0.0.0.0' || isIPv6(host) ? undefined : host),
    recursionAvailable: forwarder !== undefined,
  });
  const stats: DnsServerStats = {
    queriesByType: {},
    answersByRcode: {},
    truncated: 0,
    staleAnswers: 0,
    forwarded: { answered: 0, failed: 0, timeout: 0, busy: 0 },
    dropped: { malformed: 0, rateLimited: 0, notQuery: 0 },
  };
  const limiter = new RateLimiter(options.rateLimit ?? { perSecond: 1000, burst: 2000 });
  const observer = guardObserver(options.observer, log);
  let closed = false;

  const drop = (reason: DnsDropReason): void => {
    stats.dropped[reason]++;
    observer.dropped(reason);
  };
  /** Counts an answer and tells the observer; `send` follows. */
  const answered = (record: Omit<DnsQueryRecord, 'seconds'>, started: bigint): void => {
    count(stats.answersByRcode, record.rcode);
    if (record.truncated) stats.truncated++;
    if (record.stale) stats.staleAnswers++;
    if (record.forwarded) stats.forwarded[record.forwarded]++;
    observer.query({ ...record, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
  };

  /** Sends an out-of-zone query upstream; `refused` is the answer it would get without forwarding. */
  const forward = (fwd: DnsForwarder, message: Buffer, refused: DnsReply, transport: Asker['transport'], started: bigint, send: Send): void => {
    fwd
      .forward(message, transport)
      .then((result) => {
        if (closed) return;
        const base = { transport, qtype: refused.qtype, stale: false };
        if (result.outcome === 'answered') {
          const flags = result.message.readUInt16BE(2);
          answered({ ...base, rcode: rcodeName(flags & 0xf), answers: result.message.readUInt16BE(6), truncated: (flags & FLAG_TC) !== 0, forwarded: 'answered' }, started);
          return send(result.message);
        }
        log.debug({ transport, qtype: refused.qtype, outcome: result.outcome }, 'DNS forwarding got no answer');
        // The REFUSED answer (header, question, OPT, RA) with RCODE SERVFAIL.
        const servfail = Buffer.from(refused.message);
        servfail.writeUInt16BE((servfail.readUInt16BE(2) & ~0xf) | RCODE.SERVFAIL, 2);
        answered({ ...base, rcode: 'SERVFAIL', answers: 0, truncated: false, forwarded: result.outcome }, started);
        send(servfail);
      })
      .catch((err: unknown) => log.warn({ err }, 'DNS forwarded answer failed'));
  };

  /** One message in; `send` gets the reply now or, for a forwarded query, later (or never: dropped). */
  const handle = (message: Buffer, asker: Asker, send: Send): void => {
    const started = process.hrtime.bigint();
    if (!limiter.take(asker.address)) return drop('rateLimited');
    let query: dnsPacket.DecodedPacket;
    try {
      query = dnsPacket.decode(message);
    } catch (err) {
      log.debug({ client: asker.address, transport: asker.transport, err: (err as Error).message }, 'undecodable DNS message');
      const formerr = responder.respondToUndecodable(message);
      if (!formerr) return drop('malformed');
      answered({ transport: asker.transport, qtype: 'NONE', rcode: 'FORMERR', answers: 0, stale: false, truncated: false }, started);
      return send(formerr);
    }
    if (query.type === 'response') return drop('notQuery');
    let reply: DnsReply;
    try {
      reply = responder.respond(message, query, asker);
    } catch (err) {
      log.warn({ client: asker.address, err }, 'DNS answer failed');
      const out = responder.respondToFailure(message);
      if (!out) return;
      const qtype = query.questions?.length === 1 ? (query.questions[0]?.type ?? 'NONE') : 'NONE';
      answered({ transport: asker.transport, qtype, rcode: 'SERVFAIL', answers: 0, stale: false, truncated: false }, started);
      return send(out);
    }
    count(stats.queriesByType, reply.qtype);
    if (reply.outOfZone && forwarder) return forward(forwarder, message, reply, asker.transport, started, send);
    answered({ transport: asker.transport, qtype: reply.qtype, rcode: rcodeName(reply.rcode), answers: reply.answers, stale: reply.stale, truncated: reply.truncated }, started);
    send(reply.message);
  };

  let bound: { udp: UdpSocket; tcp: Server; port: number };
  try {
    bound = await bindBoth(host, options.port ?? 0, options.maxTcpConnections ?? 64);
  } catch (err) {
    forwarder?.close();
    throw err;
  }
  const { udp, tcp, port } = bound;
  udp.on('message', (message: Buffer, rinfo: RemoteInfo) => {
    handle(message, { address: rinfo.address, transport: 'udp' }, (reply) => {
      if (!closed) udp.send(reply, rinfo.port, rinfo.address, (err) => err && log.debug({ err: err.message }, 'DNS UDP send failed'));
    });
  });
  udp.on('error', (err) => log.warn({ err }, 'DNS UDP socket error'));
  const sockets = new Set<Socket>();
  tcp.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    serveTcp(socket, options.tcpIdleMs ?? 10_000, (m, send) => handle(m, { address: socket.remoteAddress ?? '', transport: 'tcp' }, send));
  });
  tcp.on('error', (err) => log.warn({ err }, 'DNS TCP server error'));
  log.info({ host, port, forwarding: forwarder !== undefined }, 'DNS server listening (UDP and TCP)');

  return {
    host,
    port,
    stats: () => structuredClone(stats),
    close: async () => {
      closed = true;
      forwarder?.close();
      for (const s of sockets) s.destroy();
      await Promise.all([new Promise<void>((r) => udp.close(() => r())), new Promise<void>((r) => tcp.close(() => r()))]);
    },
  };
}

/**
 * Reads 2-byte-length-prefixed messages and answers each as its answer is ready (in order for
 * names in the zone, a forwarded one when its upstream answers); closes the connection when idle.
 */
function serveTcp(socket: Socket, idleMs: number, handle: (message: Buffer, send: Send) => void): void {
  let pending: Buffer = Buffer.alloc(0);
  socket.setTimeout(idleMs, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  const send: Send = (reply) => {
    if (socket.destroyed || !socket.writable) return;
    const frame = Buffer.alloc(2 + reply.length);
    frame.writeUInt16BE(reply.length, 0);
    reply.copy(frame, 2);
    socket.write(frame);
  };
  socket.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 2) {
      const length = pending.readUInt16BE(0);
      if (pending.length < 2 + length) break;
      // A copy: a forwarded query outlives this chunk.
      const message = Buffer.from(pending.subarray(2, 2 + length));
      pending = pending.subarray(2 + length);
      handle(message, send);
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

function rcodeName(rcode: number): string {
  return RCODE_NAMES[rcode] ?? String(rcode);
}

/** The observer, or none; a throwing observer is logged once and then ignored per call. */
function guardObserver(observer: DnsServerObserver | undefined, log: Logger): DnsServerObserver {
  if (!observer) return { query: () => undefined, dropped: () => undefined };
  let logged = false;
  const guard = (call: () => void): void => {
    try {
      call();
    } catch (err) {
      if (!logged) log.warn({ err }, 'DNS server observer threw; serving goes on (logged once)');
      logged = true;
    }
  };
  return { query: (record) => guard(() => observer.query(record)), dropped: (reason) => guard(() => observer.dropped(reason)) };
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
