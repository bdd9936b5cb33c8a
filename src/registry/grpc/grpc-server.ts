import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { ERROR_RESPONSE, failBody, FUZZY_WATCH_ABILITY, NACOS_CODE, okBody, REQUEST, RESPONSE_OF, SERVER_REQUEST } from '../../../adapters/nacos/grpc/messages.js';
import { MAX_MESSAGE_BYTES, nacosGrpcServices, readPayload, toPayload, type Payload, type ReadPayload } from '../../../adapters/nacos/grpc/payload.js';
import type { RegistryAuth } from '../auth.js';
import type { LabelSource } from '../label-selector.js';
import type { NamingStore } from '../naming-store.js';
import type { HostTimings } from '../service-view.js';
import type { GrpcConnection } from './connection.js';
import { ConnectionTable, DEFAULT_DETECTION, type DetectionOptions } from './connection-table.js';
import { DEFAULT_FUZZY_LIMITS, FuzzyWatchHub, type FuzzyWatchStats } from './fuzzy-watch.js';
import { DEFAULT_GRPC_PUSH, GrpcPusher, type GrpcPushOptions } from './grpc-pusher.js';
import { handleNaming, isNamingRequest, type GrpcAnswer, type NamingHandlerContext } from './naming-handlers.js';

/** Timings and limits of the gRPC server; every field has Nacos' default. */
export interface GrpcServerOptions {
  /** Connections idle this long are sent `ClientDetectionRequest`. Default 20 000 ms. */
  staleAfterMs?: number;
  /** Time a detection has to be answered. Default 5 000 ms. */
  detectionTimeoutMs?: number;
  /** How often idle connections are looked for. Default 3 000 ms. */
  detectionIntervalMs?: number;
  /** Changes of a service within this window make one push. Default 500 ms. */
  pushMergeWindowMs?: number;
  /** Time a push has to be acked. Default 5 000 ms. */
  pushAckTimeoutMs?: number;
  /** Pause before a failed push is sent again. Default 1 000 ms. */
  pushRetryDelayMs?: number;
  /** Attempts per push, the first included. Default 3. */
  pushMaxAttempts?: number;
  /**
   * Serve Nacos 3.x fuzzy watch (`NamingFuzzyWatchRequest`) and advertise the `fuzzyWatch` ability.
   * Default true; false answers as a Nacos 2.x server does (no ability, 302 for the request).
   */
  fuzzyWatch?: boolean;
  /** Distinct fuzzy-watch patterns over all connections (Nacos `nacos.naming.fuzzy.watch.max.pattern.count`). Default 20. */
  fuzzyWatchMaxPatterns?: number;
  /** Services one pattern matches at most (Nacos `nacos.naming.fuzzy.watch.max.pattern.match.service.count`). Default 500. */
  fuzzyWatchMaxServices?: number;
}

/** What the gRPC server shares with the HTTP side of the registry. */
export interface GrpcServerContext {
  store: NamingStore;
  auth: RegistryAuth;
  timings: HostTimings & { cacheMillis: number };
  cmdb: LabelSource | undefined;
  /** The registry's root logger; the server logs as component `registry-grpc`. */
  logger: Logger;
  /**
   * The registry's HTTP port, named in every `ServerCheckResponse` (a field Nacos does not send and
   * its clients ignore): a client that found this server at an endpoint's HTTP port + 1000 can tell
   * that it belongs to another registry (a free port given at random may be another's + 1000).
   */
  httpPort?: number | undefined;
}

/** Counters for tests and metrics. */
export interface GrpcServerStats {
  connections: number;
  publishSets: number;
  subscriptions: number;
  pushesSent: number;
  pushesAcked: number;
  pushesRetried: number;
  pushesFailed: number;
  /** Pushes unanswered after the ack timeout (answered later, sent again or given up). */
  pushesLate: number;
  /** Unary requests from registered connections, by `metadata.type` (the bench and tests count what clients cost). */
  requests: Record<string, number>;
  /** Fuzzy watch; undefined when not served. */
  fuzzyWatch: FuzzyWatchStats | undefined;
}

/** A listening Nacos SDK gRPC server. */
export interface RunningGrpcServer {
  port: number;
  stats(): GrpcServerStats;
  /** Registered connections, for diagnostics and tests. */
  connections(): GrpcConnection[];
  close(): Promise<void>;
}

/** Request classes answered without a registered connection, or by the server itself. */
const INTERNAL = new Set<string>([REQUEST.serverCheck, REQUEST.healthCheck]);

/**
 * Starts the Nacos 2.x/3.x SDK gRPC protocol on `host:port` (0 = a free port): `/Request/request`
 * for unary calls, `/BiRequestStream/requestBiStream` for the connection's stream; plaintext
 * HTTP/2. A connection is its transport: unary calls count only on a transport whose bi-stream sent
 * `ConnectionSetupRequest`, and its publishes and subscriptions go when the stream ends, fails the
 * detection, or cannot take a push.
 */
export async function startGrpcServer(ctx: GrpcServerContext, host: string, port: number, options: GrpcServerOptions = {}): Promise<RunningGrpcServer> {
  const log = ctx.logger.child({ component: 'registry-grpc' });
  const detection: DetectionOptions = {
    staleAfterMs: options.staleAfterMs ?? DEFAULT_DETECTION.staleAfterMs,
    detectionTimeoutMs: options.detectionTimeoutMs ?? DEFAULT_DETECTION.detectionTimeoutMs,
    checkIntervalMs: options.detectionIntervalMs ?? DEFAULT_DETECTION.checkIntervalMs,
  };
  const pushOptions: GrpcPushOptions = {
    mergeWindowMs: options.pushMergeWindowMs ?? DEFAULT_GRPC_PUSH.mergeWindowMs,
    ackTimeoutMs: options.pushAckTimeoutMs ?? DEFAULT_GRPC_PUSH.ackTimeoutMs,
    retryDelayMs: options.pushRetryDelayMs ?? DEFAULT_GRPC_PUSH.retryDelayMs,
    maxAttempts: options.pushMaxAttempts ?? DEFAULT_GRPC_PUSH.maxAttempts,
  };
  const requests = new Map<string, number>();
  const table: ConnectionTable = new ConnectionTable(
    (connection) => {
      ctx.store.unpublishAll(connection.id);
      pusher.dropConnection(connection);
      fuzzy?.dropConnection(connection);
    },
    log,
    detection,
  );
  const pusher = new GrpcPusher(ctx.store, ctx.timings, ctx.cmdb, pushOptions, log, (c) => table.unregister(c, 'push-failed'));
  const fuzzy: FuzzyWatchHub | undefined =
    options.fuzzyWatch === false
      ? undefined
      : new FuzzyWatchHub(
          ctx.store,
          {
            maxPatterns: options.fuzzyWatchMaxPatterns ?? DEFAULT_FUZZY_LIMITS.maxPatterns,
            maxServices: options.fuzzyWatchMaxServices ?? DEFAULT_FUZZY_LIMITS.maxServices,
            mergeWindowMs: pushOptions.mergeWindowMs,
            ackTimeoutMs: pushOptions.ackTimeoutMs,
            retryDelayMs: pushOptions.retryDelayMs,
            maxAttempts: pushOptions.maxAttempts,
          },
          log,
          (c) => table.unregister(c, 'push-failed'),
        );
  const abilities: Record<string, boolean> = { supportPersistentInstanceByGrpc: true, ...(fuzzy ? { [FUZZY_WATCH_ABILITY]: true } : {}) };
  const naming: NamingHandlerContext = { store: ctx.store, pusher, auth: ctx.auth, log, fuzzy };

  const server = new grpc.Server({ 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES });
  const services = nacosGrpcServices();
  server.addService(services.Request.service, {
    request: (call: grpc.ServerUnaryCall<Payload, Payload>, callback: grpc.sendUnaryData<Payload>) => {
      const answer = answerUnary(call.getPeer(), call.request);
      if (answer instanceof Promise) void answer.then((a) => callback(null, toPayload(a.type, a.body)));
      else callback(null, toPayload(answer.type, answer.body));
    },
  });
  server.addService(services.BiRequestStream.service, {
    requestBiStream: (call: grpc.ServerDuplexStream<Payload, Payload>) => serveStream(call),
  });

  function answerUnary(peer: string, payload: Payload): GrpcAnswer | Promise<GrpcAnswer> {
    const type = payload.metadata?.type ?? '';
    if (type === REQUEST.serverCheck) {
      const httpPort = ctx.httpPort === undefined ? {} : { httpPort: ctx.httpPort };
      return { type: 'ServerCheckResponse', body: okBody({ connectionId: table.connectionIdFor(peer), supportAbilityNegotiation: true, ...httpPort }) };
    }
    if (!INTERNAL.has(type) && !isNamingRequest(type)) {
      log.debug({ peer, type }, 'grpc request without handler');
      return { type: ERROR_RESPONSE, body: failBody(NACOS_CODE.noHandler, 'RequestHandler Not Found') };
    }
    const connection = table.get(peer);
    if (!connection) return { type: ERROR_RESPONSE, body: failBody(NACOS_CODE.unregistered, 'Connection is unregistered.') };
    let request: ReadPayload;
    try {
      request = readPayload(payload);
    } catch (err) {
      return { type: ERROR_RESPONSE, body: failBody(NACOS_CODE.badGateway, err instanceof Error ? err.message : String(err)) };
    }
    connection.touch();
    requests.set(type, (requests.get(type) ?? 0) + 1);
    if (type === REQUEST.healthCheck) return { type: RESPONSE_OF[type] as string, body: okBody() };
    return handleNaming(naming, connection, request);
  }

  function serveStream(call: grpc.ServerDuplexStream<Payload, Payload>): void {
    const peer = call.getPeer();
    let connection: GrpcConnection | undefined;
    /** Unregisters this stream's connection, which also ends the stream; true when there was one. */
    const end = (reason: 'stream-ended' | 'stream-error'): boolean => {
      const had = connection !== undefined;
      if (connection) table.unregister(connection, reason);
      connection = undefined;
      return had;
    };
    call.on('data', (payload: Payload) => {
      let message: ReadPayload;
      try {
        message = readPayload(payload);
      } catch (err) {
        log.debug({ peer, err }, 'unreadable payload on the bi-stream dropped');
        return;
      }
      if (message.type === REQUEST.connectionSetup) {
        if (connection) {
          log.debug({ peer, connectionId: connection.id }, 'repeated ConnectionSetupRequest on one stream dropped');
          return;
        }
        connection = table.register(peer, call, {
          clientIp: payload.metadata?.clientIp ?? '',
          labels: stringRecord(message.body.labels),
          clientVersion: typeof message.body.clientVersion === 'string' ? message.body.clientVersion : '',
        });
        const ability = message.body.abilityTable;
        if (ability !== undefined && ability !== null) {
          connection.send(SERVER_REQUEST.setupAck, { headers: {}, abilityTable: abilities, module: 'internal' });
        }
        return;
      }
      if (connection && (message.type.endsWith('Response') || message.type === ERROR_RESPONSE) && connection.receive(message)) return;
      log.debug({ peer, type: message.type }, 'message on the bi-stream dropped');
    });
    call.on('end', () => {
      if (!end('stream-ended')) call.end();
    });
    call.on('error', (err) => {
      log.debug({ peer, err }, 'bi-stream error');
      end('stream-error');
    });
    call.on('cancelled', () => end('stream-ended'));
  }

  const bound = await new Promise<number>((resolve, reject) => {
    const target = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    server.bindAsync(target, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  pusher.start();
  fuzzy?.start();
  table.start();
  log.info({ host, port: bound }, 'embedded registry gRPC listening');

  return {
    port: bound,
    stats: () => {
      const push = pusher.stats();
      return {
        connections: table.size,
        publishSets: ctx.store.publishSetCount(),
        subscriptions: pusher.subscriptionCount(),
        pushesSent: push.sent,
        pushesAcked: push.acked,
        pushesRetried: push.retried,
        pushesFailed: push.failed,
        pushesLate: push.late,
        requests: Object.fromEntries(requests),
        fuzzyWatch: fuzzy?.stats(),
      };
    },
    connections: () => table.all(),
    async close() {
      pusher.close();
      fuzzy?.close();
      table.close();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1_000);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}

function stringRecord(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return out;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) if (typeof v === 'string') out[k] = v;
  return out;
}
