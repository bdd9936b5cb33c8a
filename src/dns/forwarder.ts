import { randomInt } from 'node:crypto';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, isIP, isIPv6, type Socket } from 'node:net';
import { DnsConfigError } from './dns-config-error.js';
import { DNS_HEADER_LENGTH, readQuestion, sameName } from './raw-name.js';

/*
 * Forwarding of queries for names outside regsync's zone to upstream resolvers (DNS-F style).
 * No decoding of upstream answers beyond the header and the question: an answer is matched to its
 * query by ID and question (read as octets, src/dns/raw-name.ts), and relayed byte for byte apart
 * from the ID, RA and the question, which goes back to the client exactly as the client sent it.
 * Behaviour is described in src/dns/README.md ("Forwarding").
 */

/** One upstream resolver. */
export interface DnsUpstream {
  host: string;
  port: number;
}

/** Forwarding settings; forwarding is on when this is given with at least one upstream. */
export interface DnsForwardOptions {
  /** Tried in order; a string is `host`, `host:port` or `[v6]:port` (port 53 by default). */
  upstreams: ReadonlyArray<DnsUpstream | string>;
  /** How long one upstream gets to answer one query, ms (default 2,000). */
  timeoutMs?: number;
  /** Forwarded queries waiting for an upstream at most (default 256); more get SERVFAIL at once. */
  maxInFlight?: number;
}

/** What became of a forwarded query: the upstream's answer, or why there is none. */
export type ForwardResult =
  | { outcome: 'answered'; message: Buffer }
  /** Every upstream failed, at least one with an error or a SERVFAIL/REFUSED answer. */
  | { outcome: 'failed' }
  /** Every upstream timed out. */
  | { outcome: 'timeout' }
  /** Too many forwarded queries in flight: none was sent. */
  | { outcome: 'busy' };

/** Default time one upstream gets to answer, ms. */
export const DEFAULT_FORWARD_TIMEOUT_MS = 2_000;
/** Default ceiling on forwarded queries in flight. */
export const DEFAULT_FORWARD_MAX_IN_FLIGHT = 256;

const DNS_PORT = 53;
const FLAG_QR = 0x8000;
const FLAG_RA = 0x0080;
const RCODE_SERVFAIL = 2;
const RCODE_REFUSED = 5;

/**
 * Reads an upstream as written in configuration: `1.2.3.4`, `1.2.3.4:53`, `::1`, `[::1]:5353`.
 * Only IP addresses: resolving a host name would need the very resolver being configured.
 * Throws {@link DnsConfigError} for anything else, so a typo stops start-up.
 */
export function parseUpstream(text: string): DnsUpstream {
  const trimmed = text.trim();
  let host = trimmed;
  let port = DNS_PORT;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(trimmed);
  if (bracketed) {
    host = bracketed[1] ?? '';
    if (bracketed[2] !== undefined) port = Number(bracketed[2]);
  } else if (isIP(trimmed) === 0) {
    const colon = trimmed.lastIndexOf(':');
    if (colon > 0 && /^\d+$/.test(trimmed.slice(colon + 1))) {
      host = trimmed.slice(0, colon);
      port = Number(trimmed.slice(colon + 1));
    }
  }
  if (isIP(host) === 0 || (bracketed && !isIPv6(host))) throw new DnsConfigError('forward.upstreams', `${JSON.stringify(text)} is not an IP address, IP:port or [IPv6]:port`);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new DnsConfigError('forward.upstreams', `${JSON.stringify(text)} has no valid port (1-65535)`);
  return { host, port };
}

/**
 * Whether `reply` answers `query`: QR set, same ID, one question with the same name (RFC 4343:
 * only A-Z fold to a-z, every other octet compared exactly), the same QTYPE and the same QCLASS.
 */
export function answersQuery(query: Buffer, reply: Buffer): boolean {
  const asked = readQuestion(query);
  const answered = readQuestion(reply);
  if (!asked || !answered || reply.readUInt16BE(0) !== query.readUInt16BE(0) || (reply.readUInt16BE(2) & FLAG_QR) === 0) return false;
  return answered.qtype === asked.qtype && answered.qclass === asked.qclass && sameName(answered.name, asked.name);
}

type Attempt = { kind: 'answer'; message: Buffer } | { kind: 'failed' } | { kind: 'timeout' };

/**
 * Sends queries for names outside the zone to upstream resolvers, one after the other until one
 * answers. Each attempt uses its own socket: a UDP socket on a fresh random port, connected to the
 * upstream (the kernel drops datagrams from other sources and reports ICMP port unreachable at
 * once), with a fresh random ID, so a spoofer has to guess both (RFC 5452); a TCP connection per
 * query over TCP. The in-flight bound caps the sockets at `maxInFlight`.
 *
 * Deliberately left out: caching (the client or its resolver caches), TCP connection reuse,
 * health tracking of upstreams (a dead first upstream costs `timeoutMs` per query, or nothing
 * when the kernel reports the port closed), and DNSSEC validation.
 */
export class DnsForwarder {
  private readonly upstreams: readonly DnsUpstream[];
  private readonly timeoutMs: number;
  private readonly maxInFlight: number;
  private readonly open = new Set<{ close(): void }>();
  private inFlight = 0;
  private closed = false;

  constructor(options: DnsForwardOptions) {
    this.upstreams = options.upstreams.map((u) => (typeof u === 'string' ? parseUpstream(u) : parseUpstream(isIPv6(u.host) ? `[${u.host}]:${u.port}` : `${u.host}:${u.port}`)));
    if (this.upstreams.length === 0) throw new DnsConfigError('forward.upstreams', 'at least one upstream is needed');
    this.timeoutMs = positive(options.timeoutMs, DEFAULT_FORWARD_TIMEOUT_MS, 'forward.timeoutMs');
    this.maxInFlight = positive(options.maxInFlight, DEFAULT_FORWARD_MAX_IN_FLIGHT, 'forward.maxInFlight');
  }

  /** Forwarded queries waiting for an upstream now. */
  get pending(): number {
    return this.inFlight;
  }

  /**
   * Forwards `query` (the client's message as received) over `transport` and resolves with the
   * upstream's answer, its ID set back to the client's, RA set and its question replaced by the
   * client's octets (an upstream may echo another case); never rejects.
   */
  async forward(query: Buffer, transport: 'udp' | 'tcp'): Promise<ForwardResult> {
    if (this.closed || this.inFlight >= this.maxInFlight) return { outcome: 'busy' };
    const question = readQuestion(query);
    if (question === undefined) return { outcome: 'failed' };
    this.inFlight++;
    try {
      let timedOut = 0;
      for (const upstream of this.upstreams) {
        if (this.closed) return { outcome: 'failed' };
        const outgoing = Buffer.from(query);
        outgoing.writeUInt16BE(randomInt(0x10000), 0);
        const attempt = transport === 'udp' ? await this.udp(upstream, outgoing) : await this.tcp(upstream, outgoing);
        if (attempt.kind === 'timeout') timedOut++;
        if (attempt.kind !== 'answer') continue;
        const rcode = attempt.message.readUInt16BE(2) & 0xf;
        if (rcode === RCODE_SERVFAIL || rcode === RCODE_REFUSED) continue;
        const message = Buffer.from(attempt.message);
        message.writeUInt16BE(query.readUInt16BE(0), 0);
        message.writeUInt16BE(message.readUInt16BE(2) | FLAG_RA, 2);
        // answersQuery held: the same octets but for the case of letters, so the same length.
        question.wire.copy(message, DNS_HEADER_LENGTH);
        return { outcome: 'answered', message };
      }
      return timedOut === this.upstreams.length ? { outcome: 'timeout' } : { outcome: 'failed' };
    } finally {
      this.inFlight--;
    }
  }

  /** Stops forwarding: open sockets are closed, their queries resolve as failed. */
  close(): void {
    this.closed = true;
    for (const handle of [...this.open]) handle.close();
  }

  private udp(upstream: DnsUpstream, outgoing: Buffer): Promise<Attempt> {
    return this.attempt((done) => {
      const socket: UdpSocket = createSocket(isIPv6(upstream.host) ? 'udp6' : 'udp4');
      socket.on('error', () => done({ kind: 'failed' }));
      socket.on('message', (reply: Buffer) => {
        // Anything that does not answer this query (a late answer, a spoof) is ignored: the timer runs on.
        if (answersQuery(outgoing, reply)) done({ kind: 'answer', message: reply });
      });
      socket.connect(upstream.port, upstream.host, () => {
        try {
          socket.send(outgoing, (err) => err && done({ kind: 'failed' }));
        } catch {
          done({ kind: 'failed' }); // closed meanwhile (timeout or close())
        }
      });
      return () => socket.close();
    });
  }

  private tcp(upstream: DnsUpstream, outgoing: Buffer): Promise<Attempt> {
    return this.attempt((done) => {
      const socket: Socket = connect({ host: upstream.host, port: upstream.port });
      const frame = Buffer.alloc(2 + outgoing.length);
      frame.writeUInt16BE(outgoing.length, 0);
      outgoing.copy(frame, 2);
      let pending: Buffer = Buffer.alloc(0);
      socket.on('error', () => done({ kind: 'failed' }));
      socket.on('close', () => done({ kind: 'failed' }));
      socket.on('connect', () => socket.write(frame));
      socket.on('data', (chunk: Buffer) => {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
          const reply = pending.subarray(2, 2 + pending.readUInt16BE(0));
          pending = pending.subarray(2 + reply.length);
          if (answersQuery(outgoing, reply)) return done({ kind: 'answer', message: reply });
        }
      });
      return () => socket.destroy();
    });
  }

  /** Runs one attempt with the timeout; `start` opens the socket and returns how to close it. */
  private attempt(start: (done: (attempt: Attempt) => void) => () => void): Promise<Attempt> {
    return new Promise<Attempt>((resolve) => {
      let finished = false;
      let closeSocket: (() => void) | undefined;
      const handle = { close: () => done({ kind: 'failed' }) };
      const timer = setTimeout(() => done({ kind: 'timeout' }), this.timeoutMs);
      const done = (attempt: Attempt): void => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        this.open.delete(handle);
        try {
          closeSocket?.();
        } catch {
          // already closed
        }
        resolve(attempt);
      };
      this.open.add(handle);
      try {
        closeSocket = start(done);
      } catch {
        done({ kind: 'failed' });
      }
      if (finished) {
        try {
          closeSocket?.();
        } catch {
          // already closed
        }
      }
    });
  }
}

function positive(value: number | undefined, fallback: number, field: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new DnsConfigError(field, `must be a positive number, got ${value}`);
  return value;
}
