import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { fastifyFormbody } from '@fastify/formbody';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { RegistryAuth } from './auth.js';
import type { LabelSource } from './label-selector.js';
import type { RegistryContext } from './http/context.js';
import { registerV1Routes } from './http/v1-routes.js';
import { registerV2Routes } from './http/v2-routes.js';
import { registerV3Routes } from './http/v3-routes.js';
import { startGrpcServer, type GrpcServerOptions, type RunningGrpcServer } from './grpc/grpc-server.js';
import { NamingStore, type ExpiryOptions, type NamespaceInfo } from './naming-store.js';
import { UdpPusher, type PushOptions } from './udp-push.js';

/** Settings of an embedded registry; every field has a Nacos-like default. */
export interface RegistryOptions {
  /** Address to bind, HTTP and UDP push alike. Default 127.0.0.1. */
  host?: string;
  /** HTTP port; 0 picks a free one. Default 8848. */
  port?: number;
  /**
   * Port of the Nacos SDK gRPC protocol (plaintext HTTP/2, same host). Default: the HTTP port + 1000,
   * as Nacos has it (8848 -> 9848); a free port when the HTTP port is 0. `false` serves no gRPC.
   */
  grpcPort?: number | false;
  /** gRPC timings: stale detection and push merge window, ack timeout and retries (Nacos defaults). */
  grpc?: GrpcServerOptions;
  /** Ephemeral expiry (defaults: unhealthy after 15 s, removed after 30 s). */
  expiry?: Partial<ExpiryOptions>;
  /** The `clientBeatInterval` told to beating clients. Default 5000 ms. */
  beatIntervalMs?: number;
  /** The `cacheMillis` told to listing clients (how often they poll). Default 10000 ms. */
  cacheMillis?: number;
  /** name -> password; when not empty, every naming call needs a token or credentials. */
  users?: ReadonlyMap<string, string>;
  tokenTtlSeconds?: number;
  /** Namespaces that exist from the start, besides `public`. */
  namespaces?: NamespaceInfo[];
  /** Largest accepted request body. Default 1 MiB. */
  bodyLimitBytes?: number;
  push?: Partial<PushOptions>;
  /**
   * Labels of IP addresses for label selectors (a `CmdbCache` from src/cmdb fits). Without it
   * consumers have no labels, so selectors select every provider; provider labels then come from
   * instance metadata alone.
   */
  cmdb?: LabelSource;
  logger?: Logger;
}

/** A running embedded registry. */
export interface RunningRegistry {
  host: string;
  port: number;
  /** `host:port`, the form cluster endpoints take. */
  endpoint: string;
  /** `http://host:port`. */
  url: string;
  /** The gRPC port, undefined when gRPC is off. */
  grpcPort: number | undefined;
  /** `host:grpcPort`, undefined when gRPC is off. */
  grpcEndpoint: string | undefined;
  /** The gRPC server (stats, connections), undefined when gRPC is off. */
  grpc: RunningGrpcServer | undefined;
  store: NamingStore;
  pusher: UdpPusher;
  app: FastifyInstance;
  close(): Promise<void>;
}

/**
 * Builds the HTTP app of an embedded registry without listening, for `app.inject()` in tests and
 * for {@link startRegistry}.
 */
export async function buildRegistryApp(ctx: RegistryContext, bodyLimitBytes: number): Promise<FastifyInstance> {
  const app = fastify({
    bodyLimit: bodyLimitBytes,
    logController: new LogController({ disableRequestLogging: true }),
    loggerInstance: ctx.log as FastifyBaseLogger,
  });
  await app.register(fastifyFormbody);
  registerV1Routes(app, ctx);
  registerV2Routes(app, ctx);
  registerV3Routes(app, ctx);
  return app;
}

/**
 * Starts an embedded Nacos-compatible registry: v1, v2 (instance list) and v3 naming APIs on one HTTP
 * port, UDP push from the same host, the Nacos SDK gRPC protocol on a second port (HTTP + 1000 by
 * default), ephemeral expiry, service selectors. It never connects to instance addresses.
 */
export async function startRegistry(options: RegistryOptions = {}): Promise<RunningRegistry> {
  const host = options.host ?? '127.0.0.1';
  const log = (options.logger ?? silentLogger()).child({ component: 'registry' });
  const store = new NamingStore(options.expiry);
  for (const ns of options.namespaces ?? []) store.createNamespace(ns);
  const timings = {
    beatIntervalMs: options.beatIntervalMs ?? 5_000,
    unhealthyAfterMs: store.expiry.unhealthyAfterMs,
    expireAfterMs: store.expiry.expireAfterMs,
    cacheMillis: options.cacheMillis ?? 10_000,
  };
  const pusher = new UdpPusher(store, timings, log, options.push, options.cmdb);
  const auth = new RegistryAuth(options.users ?? new Map(), options.tokenTtlSeconds);
  const ctx: RegistryContext = { store, pusher, auth, timings, log, cmdb: options.cmdb };
  const app = await buildRegistryApp(ctx, options.bodyLimitBytes ?? 1024 * 1024);
  await pusher.start(host);
  try {
    await app.listen({ host, port: options.port ?? 8848 });
  } catch (err) {
    await pusher.close();
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : (options.port ?? 8848);
  let grpc: RunningGrpcServer | undefined;
  try {
    const grpcPort = grpcPortFor(options.grpcPort, options.port ?? 8848);
    if (grpcPort !== undefined) {
      grpc = await startGrpcServer({ store, auth, timings, cmdb: options.cmdb, logger: options.logger ?? silentLogger(), httpPort: port }, host, grpcPort, options.grpc);
    }
  } catch (err) {
    await app.close();
    await pusher.close();
    throw err;
  }
  store.start();
  const endpoint = hostPort(host, port);
  log.info({ endpoint, grpcPort: grpc?.port, auth: auth.enabled }, 'embedded registry listening');
  return {
    host,
    port,
    endpoint,
    url: `http://${endpoint}`,
    grpcPort: grpc?.port,
    grpcEndpoint: grpc ? hostPort(host, grpc.port) : undefined,
    grpc,
    store,
    pusher,
    app,
    async close() {
      store.stop();
      await grpc?.close();
      await app.close();
      await pusher.close();
    },
  };
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The gRPC port to bind: the option, else HTTP + 1000 (0 stays 0: a free port); undefined = no gRPC. */
function grpcPortFor(option: number | false | undefined, httpPort: number): number | undefined {
  if (option === false) return undefined;
  if (option !== undefined) return option;
  if (httpPort === 0) return 0;
  if (httpPort + 1000 > 65535) throw new RangeError(`no default gRPC port for HTTP port ${httpPort}: set grpcPort`);
  return httpPort + 1000;
}
