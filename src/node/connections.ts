import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RedisErrorLog } from './redis-error-log.js';
import { waitForRedis } from './redis-ready.js';
import {
  DEFAULT_REDIS_CONNECT_TIMEOUT_MS,
  parseRedisUrl,
  redisOptions,
  type ConnectionSettings,
  type RedisClientSettings,
  type RedisTarget,
} from './redis-target.js';

export type { ConnectionSettings } from './redis-target.js';

/** Streams already given a listener by {@link openRedis}. */
const guarded = new WeakSet<object>();

/**
 * A new ioredis connection to `target`, its errors told to `errors` (which logs news once, not
 * every retry). ioredis listens `once` for a stream's error, and a failed TLS handshake can raise
 * two (the verification, then the server's alert): the second would be an uncaught exception that
 * ends the process. At the first error the stream gets a listener of its own, so later ones are
 * only logged with it.
 */
export function openRedis(target: RedisTarget, settings: RedisClientSettings, connection: ConnectionSettings, errors: RedisErrorLog, logger: Logger): Redis {
  const redis = new Redis(redisOptions(target, settings, connection));
  redis.on('error', (err: Error) => {
    const stream = redis.stream as object | undefined;
    if (stream && !guarded.has(stream)) {
      guarded.add(stream);
      redis.stream.on('error', (late: Error) => logger.debug({ err: late, redis: target.masked }, 'redis connection error after the first'));
    }
    errors.failed(err);
  });
  redis.on('ready', () => errors.ready());
  return redis;
}

/**
 * The Redis connections of one process: the store's (auto-pipelined, so the status writes of
 * concurrent reconciles share round trips), the queues' producer, one subscriber, and any more a
 * part asks for (BullMQ workers and subscribers need their own). Every one is made from the same
 * target and client settings ({@link redisOptions}: a single node or a Sentinel-watched master,
 * TLS, ACL user), and all are cut together.
 */
export class Connections {
  readonly store: Redis;
  readonly queue: Redis;
  readonly subscriber: Redis;
  /** The URL taken apart (its `masked` form is the one to show). */
  readonly target: RedisTarget;
  private readonly all: Redis[] = [];
  /** One log of connection errors for all of them: a failure of Redis is one line, not one per connection and retry. */
  private readonly errors: RedisErrorLog;

  /** Throws a `RedisConfigError` when `url` is not a Redis URL regsync can use. */
  constructor(
    url: string,
    private readonly logger: Logger,
    private readonly settings: RedisClientSettings = {},
  ) {
    this.target = parseRedisUrl(url);
    this.errors = new RedisErrorLog(logger, this.target);
    this.store = this.connect({ maxRetriesPerRequest: 3, enableAutoPipelining: true });
    this.queue = this.connect({ maxRetriesPerRequest: null });
    this.subscriber = this.connect({ maxRetriesPerRequest: null });
  }

  /** A new connection of this process, cut with the others. */
  connect(settings: ConnectionSettings): Redis {
    const redis = openRedis(this.target, this.settings, settings, this.errors, this.logger);
    this.all.push(redis);
    return redis;
  }

  /**
   * Resolves once the first connections are ready; rejects with a `RedisUnreachableError` when they
   * are not within the start bound ({@link RedisClientSettings.connectTimeoutMs}, default 5 s) or fail
   * in a way no retry mends. Called once at start, so a process never waits on Redis in silence.
   */
  async ready(): Promise<void> {
    const bound = this.settings.connectTimeoutMs ?? DEFAULT_REDIS_CONNECT_TIMEOUT_MS;
    await Promise.all([this.store, this.queue, this.subscriber].map((redis) => waitForRedis(redis, this.target, bound)));
  }

  /** Cuts every connection at once (no QUIT round trip: Redis may be gone). */
  close(): void {
    for (const redis of this.all) redis.disconnect();
  }
}
