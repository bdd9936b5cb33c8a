import type * as grpc from '@grpc/grpc-js';
import { toPayload, type Payload, type ReadPayload } from '../../../adapters/nacos/grpc/payload.js';
import { ServerRequestError } from './server-request-error.js';

/** What a `ConnectionSetupRequest` tells about a client. */
export interface ConnectionSetup {
  /** `metadata.clientIp` of the setup payload: the consumer for label selectors, never an address. */
  clientIp: string;
  labels: Readonly<Record<string, string>>;
  clientVersion: string;
}

interface PendingRequest {
  type: string;
  resolve: (answer: ReadPayload) => void;
  reject: (err: ServerRequestError) => void;
  timer: NodeJS.Timeout;
}

/**
 * One registered client connection: the transport (`call.getPeer()`) its unary calls and bi-stream
 * share, and the bi-stream the server writes its own requests on. The stream is the connection's
 * life: when it ends the connection is unregistered. Server requests carry numeric-string
 * `requestId`s counting up from 1; their answers come back on the stream and are matched by that id.
 */
export class GrpcConnection {
  /** Last accepted unary request, answer on the stream or successful detection (ms). */
  lastActiveAt: number;
  private nextRequestId = 1;
  private readonly pending = new Map<string, PendingRequest>();
  private open = true;

  constructor(
    /** `<epochMillis>_<ip>_<port>`, as Nacos names connections. */
    readonly id: string,
    /** `ip:port` of the transport, as grpc-js names it. */
    readonly peer: string,
    readonly setup: ConnectionSetup,
    private readonly stream: grpc.ServerDuplexStream<Payload, Payload>,
    private readonly now: () => number = Date.now,
  ) {
    this.lastActiveAt = now();
  }

  /** Only a connection set up with `labels.module = naming` owns publishes and subscriptions (Nacos answers -401 otherwise). */
  get isNaming(): boolean {
    return this.setup.labels.module === 'naming';
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** Records activity (a unary request or an answer on the stream), which keeps stale detection away. */
  touch(): void {
    this.lastActiveAt = this.now();
  }

  /** Writes a message that wants no answer (`SetupAckRequest`). Returns false when the stream is gone. */
  send(type: string, body: Record<string, unknown>): boolean {
    if (!this.open) return false;
    try {
      this.stream.write(toPayload(type, body));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Writes a server request with the next `requestId` and resolves with the answer carrying that id;
   * rejects with {@link ServerRequestError} (`timeout`, or `closed` when the stream is gone or ends
   * before the answer).
   */
  request(type: string, fields: Record<string, unknown>, timeoutMs: number): Promise<ReadPayload> {
    const requestId = String(this.nextRequestId++);
    return new Promise<ReadPayload>((resolve, reject) => {
      if (!this.send(type, { headers: {}, requestId, ...fields })) {
        reject(new ServerRequestError('closed', `${type} not written: the stream of ${this.id} is closed`));
        return;
      }
      const timer = setTimeout(() => {
        this.pending.delete(requestId);
        reject(new ServerRequestError('timeout', `${type} ${requestId} not answered within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      this.pending.set(requestId, { type, resolve, reject, timer });
    });
  }

  /** Hands an answer read on the stream to the request it names; false when no request waits for it. */
  receive(answer: ReadPayload): boolean {
    const requestId = answer.body.requestId;
    const pending = typeof requestId === 'string' ? this.pending.get(requestId) : undefined;
    if (!pending || typeof requestId !== 'string') return false;
    this.pending.delete(requestId);
    clearTimeout(pending.timer);
    this.touch();
    pending.resolve(answer);
    return true;
  }

  /** Ends the stream and fails every request still waiting for an answer. Idempotent. */
  close(): void {
    if (!this.open) return;
    this.open = false;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new ServerRequestError('closed', `${p.type} ${id}: connection ${this.id} closed`));
    }
    this.pending.clear();
    try {
      this.stream.end();
    } catch {
      // the stream is already gone
    }
  }
}
