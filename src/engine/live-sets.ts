import { createHash, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Instance } from '../model/types.js';
import { redisKeys } from '../util/redis-keys.js';
import { sliceClock } from '../util/yielding.js';

/**
 * The ephemeral copies each service sync keeps alive, in Redis: the hash `<p>:live:<shard>`, one
 * field per service sync key (JSON list of instances). Any replica of a shard may reconcile a
 * service sync; the reconcile records the live set here and, when others must act on it, tells them
 * on the channel `<p>:live` (message `<shard>\n<key>\n<writer>`): the shard's leader, which beats,
 * or, on connection-bound destinations, every replica, each of which publishes the set over its own
 * connection. A new leader (a new replica) loads the whole hash of its shard at once, without
 * waiting for a reconcile.
 *
 * Writes are skipped when the hash holds the same set as this process last wrote or read there; a
 * change announced by another process makes that unknown, and the next record reads the key before
 * it writes, so a set another replica replaced is written back, and one it holds already is neither
 * written nor announced again (a synced service reconciles without touching Redis here). What this
 * process last wrote or read is kept as a digest of the value (the set itself lives in Redis).
 */
export class LiveSets {
  /** Service sync key -> digest of what the hash holds for it as this process last wrote or read it. */
  private readonly written = new Map<string, string>();
  private readonly channel: string;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    /** Names this process's announcements, so that it never takes its own for another's. */
    readonly writerId: string = randomUUID(),
  ) {
    this.channel = redisKeys.liveChannel(prefix);
  }

  /** Records the live set of `key` (its ephemeral instances; none clears it); `notify` tells the other processes. */
  async put(key: string, shard: number, instances: readonly Instance[], notify: boolean): Promise<void> {
    const ephemeral = instances.filter((i) => i.ephemeral);
    const value = ephemeral.length === 0 ? '' : JSON.stringify(ephemeral);
    // Unknown here (first record of the key, or another process changed it since): read it first,
    // so that a record that holds the same set already is neither written nor announced again.
    if (!this.written.has(key)) this.written.set(key, valueDigest((await this.redis.hget(this.hashKey(shard), key)) ?? ''));
    const digest = valueDigest(value);
    if (this.written.get(key) === digest) return;
    if (value === '') await this.redis.hdel(this.hashKey(shard), key);
    else await this.redis.hset(this.hashKey(shard), key, value);
    this.written.set(key, digest);
    if (notify) await this.announce(shard, key);
  }

  /** Forgets a service sync (its task was removed, or its service left the source) and tells the other processes. */
  async remove(key: string, shard: number): Promise<void> {
    this.written.delete(key);
    await this.redis.hdel(this.hashKey(shard), key);
    await this.announce(shard, key);
  }

  /** The live set of one service sync. */
  async get(key: string, shard: number): Promise<Instance[]> {
    const raw = (await this.redis.hget(this.hashKey(shard), key)) ?? '';
    this.written.set(key, valueDigest(raw));
    return raw ? (JSON.parse(raw) as Instance[]) : [];
  }

  /** Whether a service sync has a live set (without reading it). */
  async has(key: string, shard: number): Promise<boolean> {
    return (await this.redis.hexists(this.hashKey(shard), key)) === 1;
  }

  /** Every live set of a shard. */
  async load(shard: number): Promise<Map<string, Instance[]>> {
    const all = await this.redis.hgetall(this.hashKey(shard));
    // A shard of 12,500 service syncs holds megabytes of sets: parsed a slice at a time.
    const sets = new Map<string, Instance[]>();
    const clock = sliceClock();
    for (const [key, raw] of Object.entries(all)) {
      const pause = clock.pause();
      if (pause) await pause;
      sets.set(key, JSON.parse(raw) as Instance[]);
    }
    return sets;
  }

  /** The service sync keys with a live set in a shard (no instance data: read each with {@link get}). */
  async keys(shard: number): Promise<string[]> {
    return this.redis.hkeys(this.hashKey(shard));
  }

  /**
   * Calls `onChange(shard, key)` for every change another process announces; `subscriber` must be
   * a connection of its own (it enters subscriber mode).
   */
  async listen(subscriber: Redis, onChange: (shard: number, key: string) => void, log: Logger): Promise<void> {
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return;
      const [head, key, writer] = message.split('\n');
      const shard = Number(head);
      if (key === undefined || key === '' || head === '' || !Number.isInteger(shard)) {
        log.warn({ message }, 'unreadable live-set message ignored');
        return;
      }
      if (writer === this.writerId) return;
      // What the hash holds for the key is no longer known here: the next record writes it.
      this.written.delete(key);
      onChange(shard, key);
    });
    await subscriber.subscribe(this.channel);
  }

  private async announce(shard: number, key: string): Promise<void> {
    await this.redis.publish(this.channel, `${shard}\n${key}\n${this.writerId}`);
  }

  private hashKey(shard: number): string {
    return redisKeys.liveSet(this.prefix, shard);
  }
}

/** What {@link LiveSets} remembers of a hash value: none (`''`) stays itself, a set its SHA-1. */
function valueDigest(value: string): string {
  return value === '' ? '' : createHash('sha1').update(value).digest('base64url');
}
