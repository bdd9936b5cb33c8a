import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { NacosRequestError, type NacosRequestErrorCode } from '../nacos-request-error.js';
import { Semaphore } from '../semaphore.js';
import {
  ERROR_RESPONSE,
  internalRequest,
  isOk,
  NACOS_CODE,
  okBody,
  REQUEST,
  RESPONSE_OF,
  SERVER_REQUEST,
  type ResponseBody,
} from './messages.js';
import { MAX_MESSAGE_BYTES, nacosGrpcServices, readPayload, toPayload, type EncodedBody, type Payload, type ReadPayload } from './payload.js';

/** One server's gRPC address. */
export interface GrpcEndpoint {
  host: string;
  port: number;
  /** `host:port` in logs and errors. */
  label: string;
}

/** Timings of the connection; Nacos' Java client's values by default. */
export interface GrpcTimings {
  /** A health check is sent when nothing succeeded for this long (5 000). */
  keepAliveMs: number;
  /** ServerCheck, health check and setup-ack waits (3 000, 3 000, 5 000). */
  serverCheckTimeoutMs: number;
  setupAckTimeoutMs: number;
  /** Pause between connect attempts: this × min(round + 1, 50), a round being one pass over the endpoints (100). */
  reconnectStepMs: number;
}

export const DEFAULT_GRPC_TIMINGS: GrpcTimings = {
  keepAliveMs: 5_000,
  serverCheckTimeoutMs: 3_000,
  setupAckTimeoutMs: 5_000,
  reconnectStepMs: 100,
};

export interface GrpcConnectionOptions {
  clusterId: string;
  endpoints: GrpcEndpoint[];
  log: Logger;
  /** `metadata.clientIp` of every request; the server files subscribers and selectors under it. */
  clientIp: string | undefined;
  /** Per request, from the moment the connection is ready and a permit is held. */
  requestTimeoutMs: number;
  /** Requests in flight at most (health checks aside); default 64. A burst (a replay of thousands of sets) queues. */
  maxConcurrency?: number | undefined;
  /** Headers of naming requests (the access token); rejects when no token can be had. */
  authHeaders?: (() => Promise<Record<string, string>>) | undefined;
  /** Drops a token the server refused (403), so that the next call logs in again. */
  authRefused?: ((headers: Record<string, string>) => void) | undefined;
  /** A `NotifySubscriberRequest`'s `serviceInfo`; answered once this returns. */
  onPush: (serviceInfo: unknown) => void;
  /** A fuzzy-watch sync or change notify (Nacos 3.x), by class name and body; answered once this returns. */
  onFuzzyWatch?: ((type: string, body: Record<string, unknown>) => void) | undefined;
  /** Called after every (re)connect, before waiting callers go on: replay subscriptions and publishes. */
  onConnected: (generation: number) => void;
  timings?: Partial<GrpcTimings> | undefined;
  /** Told of every failed request (metrics). */
  onRequestError?: ((code: NacosRequestErrorCode) => void) | undefined;
}

/** Counters of one connection, for metrics and status. */
export interface GrpcConnectionStats {
  state: 'idle' | 'connecting' | 'ready' | 'closed';
  connectionId: string | undefined;
  endpoint: string | undefined;
  /** Connections made after the first. */
  reconnects: number;
  pushesReceived: number;
  /** The server's `SetupAckRequest` abilities. */
  abilities: Record<string, boolean>;
}

/** What a live transport holds. */
interface Live {
  client: grpc.Client;
  stream: grpc.ClientDuplexStream<Payload, Payload>;
  endpoint: GrpcEndpoint;
  connectionId: string;
}

const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  // Each connection its own HTTP/2 transport: the server tells connections apart by transport only.
  'grpc.use_local_subchannel_pool': 1,
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
  // Java Nacos servers answer pings more often than every 5 min with GOAWAY too_many_pings.
  'grpc.keepalive_time_ms': 360_000,
  'grpc.keepalive_timeout_ms': 20_000,
};

const UNARY_PATH = '/Request/request';
const STREAM_PATH = '/BiRequestStream/requestBiStream';

/**
 * One Nacos SDK connection over gRPC: a single HTTP/2 channel to one endpoint that carries the
 * unary calls and the bi-stream (the server identifies a client by its transport), set up as
 * Nacos' Java client does (ServerCheck, `ConnectionSetupRequest` with `module: naming`, wait for
 * `SetupAckRequest`), kept alive with unary health checks when idle, answering every request the
 * server writes on the stream. Any failure of the stream or a health check, a 301, or a
 * `ConnectResetRequest` makes it connect again, to the next endpoint, with a growing pause; then
 * `onConnected` replays what the server forgot.
 */
export class GrpcConnection {
  private readonly timings: GrpcTimings;
  private readonly log: Logger;
  private live: Live | undefined;
  private state: GrpcConnectionStats['state'] = 'idle';
  private generation = 0;
  private next = 0;
  private attempts = 0;
  private reconnects = 0;
  private pushes = 0;
  private abilities: Record<string, boolean> = {};
  private lastSuccess = 0;
  private lastError: string | undefined;
  private waiters: Array<() => void> = [];
  private connecting: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private failing = false;

  private readonly permits: Semaphore;

  constructor(private readonly opts: GrpcConnectionOptions) {
    this.timings = { ...DEFAULT_GRPC_TIMINGS, ...opts.timings };
    this.permits = new Semaphore(opts.maxConcurrency ?? 64);
    this.log = opts.log;
  }

  /** The server's abilities (`SetupAckRequest`), empty before the first connection. */
  get ability(): Readonly<Record<string, boolean>> {
    return this.abilities;
  }

  get isReady(): boolean {
    return this.state === 'ready';
  }

  /** Which connection of this process's life the current one is (1 = the first). */
  get currentGeneration(): number {
    return this.generation;
  }

  stats(): GrpcConnectionStats {
    return {
      state: this.state,
      connectionId: this.live?.connectionId,
      endpoint: this.live?.endpoint.label,
      reconnects: this.reconnects,
      pushesReceived: this.pushes,
      abilities: { ...this.abilities },
    };
  }

  /** Resolves once connected; connects first when idle. Rejects after `timeoutMs` without a connection. */
  async ready(timeoutMs: number = this.opts.requestTimeoutMs): Promise<void> {
    if (this.state === 'ready') return;
    if (this.state === 'closed') throw this.error('nacos-closed', 'connect', 'the adapter is closed');
    if (this.state === 'idle') this.startConnecting();
    let timer: NodeJS.Timeout | undefined;
    let waiter: (() => void) | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        waiter = resolve;
        this.waiters.push(resolve);
        timer = setTimeout(() => {
          const why = this.lastError ?? 'no answer yet';
          reject(this.error('nacos-unreachable', 'connect', `no gRPC connection within ${timeoutMs} ms (${why})`));
        }, timeoutMs);
      });
    } finally {
      clearTimeout(timer);
      this.waiters = this.waiters.filter((w) => w !== waiter);
    }
    if (this.stats().state !== 'ready') throw this.error('nacos-closed', 'connect', 'the adapter is closed');
  }

  /**
   * One unary request on the connection (waits for it); answers the response body when its
   * `resultCode` is 200. Naming requests carry the auth headers; a 403 logs in again once. Rejects
   * with `NacosRequestError` (`nacosCode` = the server's `errorCode`). The body may come as JSON
   * text already ({@link EncodedBody}).
   */
  async request(type: string, body: Record<string, unknown> | EncodedBody, opts: { auth?: boolean } = {}): Promise<ResponseBody> {
    const attempt = async (): Promise<{ answer: ReadPayload; headers: Record<string, string> }> => {
      await this.ready();
      const live = this.live;
      if (!live) throw this.error('nacos-unreachable', type, 'connection lost');
      const headers = opts.auth && this.opts.authHeaders ? await this.opts.authHeaders() : {};
      const answer = await this.permits.run(() => this.unary(live, type, body, headers, this.opts.requestTimeoutMs));
      return { answer, headers };
    };
    try {
      let { answer, headers } = await attempt();
      if (!isOk(answer.body) && answer.body.errorCode === NACOS_CODE.noRight && opts.auth && this.opts.authRefused && Object.keys(headers).length > 0) {
        this.opts.authRefused(headers);
        ({ answer, headers } = await attempt());
      }
      return this.checked(type, answer);
    } catch (err) {
      if (err instanceof NacosRequestError) this.opts.onRequestError?.(err.code);
      throw err;
    }
  }

  /** Closes the connection for good; idempotent. */
  close(): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearTimeout(this.retryTimer);
    clearInterval(this.keepAliveTimer);
    this.dropLive();
    for (const w of this.waiters.splice(0)) w();
  }

  private checked(type: string, answer: ReadPayload): ResponseBody {
    const body = answer.body as ResponseBody;
    if (isOk(body)) {
      this.lastSuccess = Date.now();
      return body;
    }
    const code = typeof body.errorCode === 'number' ? body.errorCode : typeof body.resultCode === 'number' ? body.resultCode : undefined;
    if (code === NACOS_CODE.unregistered || code === NACOS_CODE.clientDisconnect) {
      this.reconnect(`the server answered ${code} (${body.message ?? 'connection unregistered'})`);
    }
    const detail = `${answer.type} ${code ?? '?'}: ${typeof body.message === 'string' ? body.message : 'failed'}`;
    throw this.error('nacos-api-error', type, detail, code);
  }

  private unary(live: Live, type: string, body: Record<string, unknown> | EncodedBody, headers: Record<string, string>, timeoutMs: number): Promise<ReadPayload> {
    const payload = toPayload(type, body, headers, this.opts.clientIp);
    return new Promise((resolve, reject) => {
      live.client.makeUnaryRequest<Payload, Payload>(
        UNARY_PATH,
        serialize,
        deserialize,
        payload,
        new grpc.Metadata(),
        { deadline: Date.now() + timeoutMs },
        (err, response) => {
          if (err) {
            const timedOut = err.code === grpc.status.DEADLINE_EXCEEDED;
            reject(this.error(timedOut ? 'nacos-timeout' : 'nacos-unreachable', type, `${grpc.status[err.code] ?? err.code}: ${err.details}`, undefined, live.endpoint));
            return;
          }
          try {
            resolve(readPayload(response ?? {}));
          } catch (cause) {
            reject(this.error('nacos-bad-response', type, (cause as Error).message, undefined, live.endpoint));
          }
        },
      );
    });
  }

  private startConnecting(): void {
    if (this.state === 'closed' || this.connecting) return;
    this.state = 'connecting';
    this.connecting = this.connectLoop().finally(() => {
      this.connecting = undefined;
    });
  }

  private async connectLoop(): Promise<void> {
    const endpoints = this.opts.endpoints;
    for (;;) {
      if (this.state === 'closed') return;
      const endpoint = endpoints[this.next % endpoints.length] as GrpcEndpoint;
      this.next += 1;
      try {
        await this.connectTo(endpoint);
        this.attempts = 0;
        if (this.failing) this.log.info({ endpoint: endpoint.label, generation: this.generation }, 'nacos gRPC connection back');
        this.failing = false;
        return;
      } catch (err) {
        this.lastError = `${endpoint.label}: ${(err as Error).message}`;
        if (!this.failing) this.log.warn({ endpoint: endpoint.label, err: (err as Error).message }, 'nacos gRPC connection failed; retrying');
        this.failing = true;
        this.attempts += 1;
        const round = Math.floor(this.attempts / endpoints.length);
        const pause = this.timings.reconnectStepMs * Math.min(round + 1, 50);
        await new Promise<void>((resolve) => {
          this.retryTimer = setTimeout(resolve, pause);
          this.retryTimer.unref();
        });
      }
    }
  }

  /** One attempt: ServerCheck, open the stream, setup, wait for the ack. Throws on any failure. */
  private async connectTo(endpoint: GrpcEndpoint): Promise<void> {
    const client = new grpc.Client(`${endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host}:${endpoint.port}`, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
    let stream: grpc.ClientDuplexStream<Payload, Payload> | undefined;
    try {
      const probe: Live = { client, stream: undefined as never, endpoint, connectionId: '' };
      const check = await this.unary(probe, REQUEST.serverCheck, internalRequest(), {}, this.timings.serverCheckTimeoutMs);
      if (!isOk(check.body)) throw new Error(`ServerCheck answered ${String(check.body.errorCode)}: ${String(check.body.message ?? '')}`);
      const connectionId = typeof check.body.connectionId === 'string' ? check.body.connectionId : '';
      const negotiates = check.body.supportAbilityNegotiation === true;
      stream = client.makeBidiStreamRequest<Payload, Payload>(STREAM_PATH, serialize, deserialize, new grpc.Metadata());
      const live: Live = { client, stream, endpoint, connectionId };
      const acked = this.attach(live);
      stream.write(
        toPayload(
          REQUEST.connectionSetup,
          internalRequest({ clientVersion: 'regsync', tenant: '', labels: { source: 'sdk', module: 'naming', AppName: 'regsync' }, abilityTable: {} }),
          undefined,
          this.opts.clientIp,
        ),
      );
      if (negotiates) await acked;
      else await this.awaitRegistered(live);
      if (this.state === 'closed') throw new Error('closed');
      this.live = live;
      this.state = 'ready';
      this.generation += 1;
      if (this.generation > 1) this.reconnects += 1;
      this.lastSuccess = Date.now();
      this.log.debug({ endpoint: endpoint.label, connectionId, generation: this.generation }, 'nacos gRPC connected');
      this.startKeepAlive();
      try {
        this.opts.onConnected(this.generation);
      } catch (err) {
        this.log.warn({ err }, 'replay after connect threw');
      }
      for (const w of this.waiters.splice(0)) w();
    } catch (err) {
      stream?.cancel();
      client.close();
      throw err;
    }
  }

  /** Older servers (no ability negotiation): health checks until the setup is registered. */
  private async awaitRegistered(live: Live): Promise<void> {
    const until = Date.now() + this.timings.setupAckTimeoutMs;
    for (;;) {
      const answer = await this.unary(live, REQUEST.healthCheck, internalRequest(), {}, this.timings.serverCheckTimeoutMs);
      if (isOk(answer.body)) return;
      if (Date.now() > until) throw new Error('the server did not register the connection');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Handles what the server writes on the stream; resolves the returned promise on `SetupAckRequest`. */
  private attach(live: Live): Promise<void> {
    const { stream } = live;
    let ackResolve: () => void = () => {};
    let ackReject: (err: Error) => void = () => {};
    const acked = new Promise<void>((resolve, reject) => {
      ackResolve = resolve;
      ackReject = reject;
    });
    acked.catch(() => undefined);
    const ackTimer = setTimeout(() => ackReject(new Error(`no SetupAckRequest within ${this.timings.setupAckTimeoutMs} ms`)), this.timings.setupAckTimeoutMs);
    const ended = (why: string) => {
      clearTimeout(ackTimer);
      ackReject(new Error(`stream ended during setup: ${why}`));
      if (this.live === live) this.reconnect(`stream ${why}`);
    };
    stream.on('data', (payload: Payload) => {
      let message: ReadPayload;
      try {
        message = readPayload(payload);
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, 'unreadable message on the nacos gRPC stream dropped');
        return;
      }
      if (message.type === SERVER_REQUEST.setupAck) {
        const table = message.body.abilityTable;
        this.abilities = typeof table === 'object' && table !== null ? { ...(table as Record<string, boolean>) } : {};
        clearTimeout(ackTimer);
        ackResolve();
        return;
      }
      this.answer(live, message);
    });
    stream.on('error', (err: grpc.ServiceError) => ended(`failed: ${grpc.status[err.code] ?? err.code} ${err.details}`));
    stream.on('end', () => ended('ended by the server'));
    return acked;
  }

  /** Answers one server request on the stream, with its `requestId`. */
  private answer(live: Live, message: ReadPayload): void {
    const requestId = typeof message.body.requestId === 'string' ? message.body.requestId : undefined;
    const responseType = RESPONSE_OF[message.type];
    if (message.type === SERVER_REQUEST.notifySubscriber) {
      this.pushes += 1;
      try {
        this.opts.onPush(message.body.serviceInfo);
      } catch (err) {
        this.log.warn({ err }, 'a nacos push could not be handled');
        live.stream.write(toPayload(ERROR_RESPONSE, { resultCode: 500, errorCode: -500, message: 'push not handled', requestId, success: false }));
        return;
      }
    }
    if (message.type === SERVER_REQUEST.fuzzyWatchSync || message.type === SERVER_REQUEST.fuzzyWatchChange) {
      try {
        this.opts.onFuzzyWatch?.(message.type, message.body);
      } catch (err) {
        this.log.warn({ err }, 'a nacos fuzzy-watch notify could not be handled');
        live.stream.write(toPayload(ERROR_RESPONSE, { resultCode: 500, errorCode: -500, message: 'notify not handled', requestId, success: false }));
        return;
      }
    }
    if (responseType === undefined) {
      this.log.debug({ type: message.type }, 'unknown server request on the nacos gRPC stream');
      live.stream.write(toPayload(ERROR_RESPONSE, { resultCode: 500, errorCode: NACOS_CODE.noHandler, message: `no handler for ${message.type}`, requestId, success: false }));
      return;
    }
    if (message.type !== SERVER_REQUEST.connectReset) {
      live.stream.write(toPayload(responseType, okBody({}, requestId)));
      return;
    }
    const ip = message.body.serverIp;
    const port = Number(message.body.serverPort);
    const target = this.opts.endpoints.findIndex((e) => e.host === ip && e.port === port);
    if (target >= 0) this.next = target;
    // The answer goes out before the transport is dropped.
    live.stream.write(toPayload(responseType, okBody({}, requestId)), () => {
      if (this.live === live) this.reconnect('the server asked to reconnect (ConnectResetRequest)');
    });
  }

  private startKeepAlive(): void {
    clearInterval(this.keepAliveTimer);
    const every = Math.max(50, Math.floor(this.timings.keepAliveMs / 5));
    this.keepAliveTimer = setInterval(() => void this.keepAlive(), every);
    this.keepAliveTimer.unref();
  }

  private checking = false;

  private async keepAlive(): Promise<void> {
    const live = this.live;
    if (!live || this.state !== 'ready' || this.checking || Date.now() - this.lastSuccess < this.timings.keepAliveMs) return;
    this.checking = true;
    try {
      const answer = await this.unary(live, REQUEST.healthCheck, internalRequest(), {}, this.timings.serverCheckTimeoutMs);
      if (isOk(answer.body)) this.lastSuccess = Date.now();
      else if (this.live === live) this.reconnect(`health check answered ${String(answer.body.errorCode)}`);
    } catch (err) {
      if (this.live === live) this.reconnect(`health check failed: ${(err as Error).message}`);
    } finally {
      this.checking = false;
    }
  }

  /** Drops the current transport and connects again (next endpoint), unless closed or already at it. */
  private reconnect(why: string): void {
    if (this.state === 'closed' || this.state === 'connecting') return;
    this.log.warn({ endpoint: this.live?.endpoint.label, why }, 'nacos gRPC connection lost; reconnecting');
    this.lastError = why;
    this.dropLive();
    this.startConnecting();
  }

  private dropLive(): void {
    const live = this.live;
    this.live = undefined;
    clearInterval(this.keepAliveTimer);
    if (!live) return;
    live.stream.removeAllListeners('data');
    live.stream.on('error', () => undefined);
    live.stream.cancel();
    live.client.close();
  }

  private error(code: NacosRequestErrorCode, type: string, detail: string, nacosCode?: number, endpoint?: GrpcEndpoint): NacosRequestError {
    return new NacosRequestError({
      code,
      clusterId: this.opts.clusterId,
      method: 'gRPC',
      path: type,
      endpoint: (endpoint ?? this.live?.endpoint)?.label ?? this.opts.endpoints.map((e) => e.label).join(','),
      nacosCode,
      detail,
    });
  }
}

function serialize(payload: Payload): Buffer {
  return nacosGrpcServices().Request.service.request?.requestSerialize(payload) as Buffer;
}

function deserialize(bytes: Buffer): Payload {
  return nacosGrpcServices().Request.service.request?.responseDeserialize(bytes) as Payload;
}

/**
 * Whether a Nacos SDK gRPC server answers `ServerCheckRequest` at the endpoint within `timeoutMs`
 * (any Nacos answer counts, "starting" too): what `apiVersion: auto` asks before choosing gRPC. A
 * server that names another HTTP port than `httpPort` in its answer (regsync's embedded registry
 * names its own) belongs to another registry and does not count.
 */
export async function answersGrpc(endpoint: GrpcEndpoint, timeoutMs: number, httpPort?: number): Promise<boolean> {
  const client = new grpc.Client(`${endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host}:${endpoint.port}`, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  try {
    return await new Promise<boolean>((resolve) => {
      client.makeUnaryRequest<Payload, Payload>(
        UNARY_PATH,
        serialize,
        deserialize,
        toPayload(REQUEST.serverCheck, internalRequest()),
        new grpc.Metadata(),
        { deadline: Date.now() + timeoutMs },
        (err, response) => {
          if (err || !response) return resolve(false);
          try {
            const named = readPayload(response).body.httpPort;
            resolve(httpPort === undefined || typeof named !== 'number' || named === httpPort);
          } catch {
            resolve(false);
          }
        },
      );
    });
  } finally {
    client.close();
  }
}
