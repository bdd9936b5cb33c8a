import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/** How a connection behaves when Redis is slow or gone (see ioredis' options of the same names). */
export interface ConnectionSettings {
  /** null: commands wait for Redis to come back (queues, subscribers); a number: they fail after that many retries. */
  maxRetriesPerRequest: number | null;
  enableAutoPipelining?: boolean;
}

/**
 * The Redis connections of one process: the store's (auto-pipelined, so the status writes of
 * concurrent reconciles share round trips), the queues' producer, one subscriber, and any more a
 * part asks for (BullMQ workers and subscribers need their own). All are cut together.
 */
export class Connections {
  readonly store: Redis;
  readonly queue: Redis;
  readonly subscriber: Redis;
  private readonly all: Redis[] = [];

  constructor(
    private readonly url: string,
    private readonly logger: Logger,
  ) {
    this.store = this.connect({ maxRetriesPerRequest: 3, enableAutoPipelining: true });
    this.queue = this.connect({ maxRetriesPerRequest: null });
    this.subscriber = this.connect({ maxRetriesPerRequest: null });
  }

  /** A new connection of this process, cut with the others. */
  connect(settings: ConnectionSettings): Redis {
    const redis = new Redis(this.url, settings);
    redis.on('error', (err) => this.logger.warn({ err }, 'redis connection error'));
    this.all.push(redis);
    return redis;
  }

  /** Cuts every connection at once (no QUIT round trip: Redis may be gone). */
  close(): void {
    for (const redis of this.all) redis.disconnect();
  }
}
