import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Instance } from '../model/types.js';
import { redisKeys } from '../util/redis-keys.js';

/**
 * The ephemeral copies each service sync keeps alive, in Redis: the hash `<p>:live:<shard>`, one
 * field per service sync key (JSON list of instances). Any replica of a shard may reconcile a
 * service sync, but only the shard's leader beats; the reconcile records what should be beaten
 * here, and tells the leader on the channel `<p>:live` (message `<shard>\n<key>`). A new leader loads
 * the whole hash of its shard and beats at once, without waiting for a reconcile.
 *
 * Writes are skipped when the set did not change since this process last wrote it (a synced service
 * reconciles without touching Redis here).
 */
export class LiveSets {
  private readonly written = new Map<string, string>();
  private readonly channel: string;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {
    this.channel = redisKeys.liveChannel(prefix);
  }

  /** Records the live set of `key` (its ephemeral instances; none clears it); `notify` tells the leader. */
  async put(key: string, shard: number, instances: readonly Instance[], notify: boolean): Promise<void> {
    const ephemeral = instances.filter((i) => i.ephemeral);
    const value = ephemeral.length === 0 ? '' : JSON.stringify(ephemeral);
    if (this.written.get(key) === value) return;
    if (value === '') await this.redis.hdel(this.hashKey(shard), key);
    else await this.redis.hset(this.hashKey(shard), key, value);
    this.written.set(key, value);
    if (notify) await this.redis.publish(this.channel, `${shard}\n${key}`);
  }

  /** Forgets a service sync (its task was removed). */
  async remove(key: string, shard: number): Promise<void> {
    this.written.delete(key);
    await this.redis.hdel(this.hashKey(shard), key);
  }

  /** The live set of one service sync. */
  async get(key: string, shard: number): Promise<Instance[]> {
    const raw = await this.redis.hget(this.hashKey(shard), key);
    return raw ? (JSON.parse(raw) as Instance[]) : [];
  }

  /** Every live set of a shard. */
  async load(shard: number): Promise<Map<string, Instance[]>> {
    const all = await this.redis.hgetall(this.hashKey(shard));
    return new Map(Object.entries(all).map(([key, raw]) => [key, JSON.parse(raw) as Instance[]]));
  }

  /**
   * Calls `onChange(shard, key)` for every change another process announces; `subscriber` must be
   * a connection of its own (it enters subscriber mode).
   */
  async listen(subscriber: Redis, onChange: (shard: number, key: string) => void, log: Logger): Promise<void> {
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return;
      const cut = message.indexOf('\n');
      const shard = Number(message.slice(0, cut));
      if (cut < 0 || !Number.isInteger(shard)) {
        log.warn({ message }, 'unreadable live-set message ignored');
        return;
      }
      onChange(shard, message.slice(cut + 1));
    });
    await subscriber.subscribe(this.channel);
  }

  private hashKey(shard: number): string {
    return redisKeys.liveSet(this.prefix, shard);
  }
}
