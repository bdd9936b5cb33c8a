import type { Logger } from 'pino';
import type { RedisTarget } from './redis-target.js';

/**
 * The log of the connection errors of a group of Redis connections to one target (a process's
 * store, queue and subscriber connections, the BullMQ workers' made from them). ioredis reports
 * every failed attempt of every connection: Redis away for five seconds at start is some 45
 * errors. A failure is logged as a warning without a stack when it is news: of a kind (its code,
 * else its message) not seen since the connections were last ready. Any other failure is a debug
 * line, and a warning again at the 10th, 100th, 1000th... failure, saying how many. Once a
 * connection is ready again, an info line says after how many failures, and every kind is news again.
 *
 * Deliberately left out: timers (a reminder every N seconds): the counts need none and stay
 * readable in a long outage. Secrets need no care here: every log line is masked (`src/log.ts`).
 */
export class RedisErrorLog {
  /** The kinds of failure told since the connections were last ready (a few: codes and replies). */
  private readonly seen = new Set<string>();
  /** Failures since the connections were last ready. */
  private failures = 0;

  constructor(
    private readonly logger: Logger,
    private readonly target: RedisTarget,
    /** The message of the warning. */
    private readonly what = 'redis connection error',
  ) {}

  /** A connection of the group failed (an ioredis `error` event). */
  failed(err: Error): void {
    this.failures += 1;
    const kind = (err as NodeJS.ErrnoException).code ?? err.message.slice(0, 200);
    const fields = { err, redis: this.target.masked };
    if (!this.seen.has(kind) && this.seen.size < MAX_KINDS) {
      this.seen.add(kind);
      this.logger.warn(this.failures === 1 ? fields : { ...fields, failures: this.failures }, this.what);
    } else if (isPowerOfTen(this.failures)) {
      this.logger.warn({ ...fields, failures: this.failures }, `${this.what}, ${this.failures} failures since the last success`);
    } else {
      this.logger.debug({ ...fields, failures: this.failures }, this.what);
    }
  }

  /** A connection of the group is ready: told once after failures, which are then forgotten. */
  ready(): void {
    if (this.failures > 0) this.logger.info({ redis: this.target.masked, failures: this.failures }, 'redis connection ready again');
    this.failures = 0;
    this.seen.clear();
  }
}

/** Kinds of failure told in one outage at most: beyond, only the counts. */
const MAX_KINDS = 8;

function isPowerOfTen(n: number): boolean {
  let k = n;
  while (k >= 10 && k % 10 === 0) k /= 10;
  return k === 1 && n >= 10;
}
