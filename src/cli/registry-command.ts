import type { Command } from 'commander';
import type { Logger } from 'pino';
import { parseUsers } from '../registry/auth.js';
import type { NamespaceInfo } from '../registry/naming-store.js';
import type { RegistryOptions, RunningRegistry } from '../registry/registry-server.js';
import { collect, parseDuration, parsePort, parsePositiveInt } from './options.js';

/** Options shared by `regsync registry` and `regsync demo`. */
export interface RegistryCliOptions {
  host: string;
  port: number;
  /** Undefined: HTTP port + 1000; false: no gRPC. */
  grpcPort?: number | false;
  unhealthyAfter?: number;
  expireAfter?: number;
  beatInterval?: number;
  user: string[];
  namespace: string[];
  /** False with `--no-fuzzy-watch`. */
  fuzzyWatch?: boolean;
  fuzzyWatchMaxPatterns?: number;
  fuzzyWatchMaxServices?: number;
}

export function addRegistryOptions(cmd: Command, defaultPort: number): Command {
  return cmd
    .option('--host <address>', 'address to bind (HTTP and UDP push)', '127.0.0.1')
    .option('--port <port>', 'HTTP port; 0 picks a free one', parsePort, defaultPort)
    .option('--grpc-port <port>', 'Nacos SDK gRPC port (default: HTTP port + 1000; 0 picks a free one; off: no gRPC)', parseGrpcPort)
    .option('--unhealthy-after <duration>', 'mark an ephemeral instance unhealthy after this long without a beat (default 15s)', parseDuration)
    .option('--expire-after <duration>', 'remove an ephemeral instance after this long without a beat (default 30s)', parseDuration)
    .option('--beat-interval <duration>', 'beat interval told to clients (default 5s)', parseDuration)
    .option('--user <name:password>', 'require login; repeatable (also REGSYNC_REGISTRY_USERS=name:pw,name2:pw2)', collect, [])
    .option('--namespace <id[:name]>', 'create a namespace at start; repeatable', collect, [])
    .option('--no-fuzzy-watch', 'serve no Nacos 3.x fuzzy watch over gRPC (answer as Nacos 2.x does)')
    .option('--fuzzy-watch-max-patterns <n>', 'fuzzy-watch patterns held at most (default 20, as Nacos)', parsePositiveInt)
    .option('--fuzzy-watch-max-services <n>', 'services one fuzzy-watch pattern matches at most (default 500, as Nacos)', parsePositiveInt);
}

/** `--grpc-port`: a port, or `off`. */
export function parseGrpcPort(value: string): number | false {
  return value === 'off' ? false : parsePort(value);
}

/** Turns command-line options into {@link RegistryOptions}, refusing contradictions up front. */
export function registryOptionsFrom(opts: RegistryCliOptions, logger: Logger): RegistryOptions {
  const userPairs = [...opts.user, ...(process.env.REGSYNC_REGISTRY_USERS ?? '').split(',').filter((u) => u !== '')];
  const unhealthyAfterMs = opts.unhealthyAfter ?? 15_000;
  const expireAfterMs = opts.expireAfter ?? Math.max(30_000, unhealthyAfterMs);
  if (expireAfterMs < unhealthyAfterMs) {
    throw new Error('--expire-after must not be shorter than --unhealthy-after');
  }
  const namespaces: NamespaceInfo[] = opts.namespace.map((spec) => {
    const [id, name] = spec.split(':', 2) as [string, string | undefined];
    if (!id) throw new Error(`invalid --namespace "${spec}": expected id or id:name`);
    return { id, name: name ?? id, description: '' };
  });
  return {
    host: opts.host,
    port: opts.port,
    ...(opts.grpcPort !== undefined ? { grpcPort: opts.grpcPort } : {}),
    grpc: {
      ...(opts.fuzzyWatch === false ? { fuzzyWatch: false } : {}),
      ...(opts.fuzzyWatchMaxPatterns !== undefined ? { fuzzyWatchMaxPatterns: opts.fuzzyWatchMaxPatterns } : {}),
      ...(opts.fuzzyWatchMaxServices !== undefined ? { fuzzyWatchMaxServices: opts.fuzzyWatchMaxServices } : {}),
    },
    expiry: { unhealthyAfterMs, expireAfterMs, sweepIntervalMs: Math.min(1_000, Math.ceil(unhealthyAfterMs / 4)) },
    ...(opts.beatInterval !== undefined ? { beatIntervalMs: opts.beatInterval } : {}),
    users: parseUsers(userPairs),
    namespaces,
    logger,
  };
}

/** Closes a registry on SIGINT/SIGTERM and exits. */
export function closeOnSignal(registry: RunningRegistry, logger: Logger, extra: () => Promise<void> = async () => {}): void {
  let closing = false;
  const stop = (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, 'shutting down');
    void extra()
      .then(() => registry.close())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}
