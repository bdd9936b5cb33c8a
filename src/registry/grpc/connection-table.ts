import type * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Payload } from '../../../adapters/nacos/grpc/payload.js';
import { isOk, SERVER_REQUEST } from '../../../adapters/nacos/grpc/messages.js';
import { GrpcConnection, type ConnectionSetup } from './connection.js';

/** Stale detection timings (Nacos: a check every 3 s, stale after 20 s idle, 5 s to answer). */
export interface DetectionOptions {
  /** A connection with no activity for this long is sent `ClientDetectionRequest`. */
  staleAfterMs: number;
  /** ... and is unregistered unless it answers successfully within this long. */
  detectionTimeoutMs: number;
  /** How often idle connections are looked for. */
  checkIntervalMs: number;
}

export const DEFAULT_DETECTION: DetectionOptions = { staleAfterMs: 20_000, detectionTimeoutMs: 5_000, checkIntervalMs: 3_000 };

/** Why a connection was unregistered, for logs. */
export type UnregisterReason = 'stream-ended' | 'stream-error' | 'detection-failed' | 'push-failed' | 'replaced' | 'server-closed';

/**
 * The registered connections, keyed by transport (`call.getPeer()`: the same `ip:port` for a client's
 * unary calls and its bi-stream). Also hands out the connection id a `ServerCheckRequest` reports
 * before the connection is set up, and runs stale detection.
 */
export class ConnectionTable {
  private readonly byPeer = new Map<string, GrpcConnection>();
  /** Ids handed out by server checks, per transport, until a setup uses them or they age out. */
  private readonly transportIds = new Map<string, { id: string; at: number }>();
  private timer: NodeJS.Timeout | undefined;
  private readonly detecting = new Set<GrpcConnection>();

  constructor(
    private readonly onUnregister: (connection: GrpcConnection, reason: UnregisterReason) => void,
    private readonly log: Logger,
    readonly detection: DetectionOptions = DEFAULT_DETECTION,
    private readonly now: () => number = Date.now,
  ) {}

  /** The id of a transport, `<epochMillis>_<ip>_<port>` from the first time it was seen. */
  connectionIdFor(peer: string): string {
    const registered = this.byPeer.get(peer);
    if (registered) return registered.id;
    const known = this.transportIds.get(peer);
    if (known) return known.id;
    const at = this.now();
    const id = `${at}_${peer.slice(0, peer.lastIndexOf(':')).replace(/^\[|\]$/g, '')}_${peer.slice(peer.lastIndexOf(':') + 1)}`;
    this.transportIds.set(peer, { id, at });
    return id;
  }

  /** Registers the connection a setup opened; a connection already on the transport is replaced. */
  register(peer: string, stream: grpc.ServerDuplexStream<Payload, Payload>, setup: ConnectionSetup): GrpcConnection {
    const previous = this.byPeer.get(peer);
    if (previous) this.unregister(previous, 'replaced');
    const connection = new GrpcConnection(this.connectionIdFor(peer), peer, setup, stream, this.now);
    this.transportIds.delete(peer);
    this.byPeer.set(peer, connection);
    this.log.debug({ connectionId: connection.id, clientIp: setup.clientIp, labels: setup.labels, clientVersion: setup.clientVersion }, 'grpc connection registered');
    return connection;
  }

  get(peer: string): GrpcConnection | undefined {
    return this.byPeer.get(peer);
  }

  all(): GrpcConnection[] {
    return [...this.byPeer.values()];
  }

  get size(): number {
    return this.byPeer.size;
  }

  /** Unregisters a connection once: ends its stream and lets the owner drop its publishes and subscriptions. */
  unregister(connection: GrpcConnection, reason: UnregisterReason): void {
    if (this.byPeer.get(connection.peer) !== connection) return;
    this.byPeer.delete(connection.peer);
    this.detecting.delete(connection);
    connection.close();
    this.log.debug({ connectionId: connection.id, reason }, 'grpc connection unregistered');
    this.onUnregister(connection, reason);
  }

  /** Starts the periodic stale check. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.checkStale(), this.detection.checkIntervalMs);
    this.timer.unref();
  }

  /** Stops the check and unregisters every connection. */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const c of this.all()) this.unregister(c, 'server-closed');
    this.transportIds.clear();
  }

  /** One pass: every idle connection must answer a `ClientDetectionRequest` or is unregistered. */
  checkStale(): void {
    const now = this.now();
    for (const [peer, t] of this.transportIds) if (now - t.at >= this.detection.staleAfterMs) this.transportIds.delete(peer);
    for (const connection of this.byPeer.values()) {
      if (this.detecting.has(connection) || now - connection.lastActiveAt < this.detection.staleAfterMs) continue;
      this.detecting.add(connection);
      connection.request(SERVER_REQUEST.clientDetection, { module: 'internal' }, this.detection.detectionTimeoutMs).then(
        (answer) => {
          this.detecting.delete(connection);
          if (isOk(answer.body)) connection.touch();
          else this.unregister(connection, 'detection-failed');
        },
        (err: unknown) => {
          this.detecting.delete(connection);
          this.log.debug({ connectionId: connection.id, err }, 'client detection failed');
          this.unregister(connection, 'detection-failed');
        },
      );
    }
  }
}
