import type { Redis } from 'ioredis';
import { redisKeys } from '../util/redis-keys.js';

/**
 * Since when each service sync of a `*` task has been missing from its source's service list, in
 * Redis (the hash `<p>:task-missing:<taskId>`, service sync key -> ms since the epoch), so that a
 * service is dropped only when a list at least the confirmation delay after the first one that
 * missed it still misses it, whichever worker listed first. A list that finds the service again
 * clears its mark.
 */
export class MissingServices {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /**
   * Records one listing of a task's source: `present` service syncs are listed (their marks go),
   * `absent` ones are not (marked now unless already marked). Answers since when each absent one
   * has been missing. One HKEYS, plus one MULTI only when something is or was missing.
   */
  async note(taskId: string, present: ReadonlySet<string>, absent: readonly string[], now: number): Promise<Map<string, number>> {
    const key = this.key(taskId);
    const marked = await this.redis.hkeys(key);
    const found = marked.filter((field) => present.has(field));
    const since = new Map<string, number>();
    if (found.length === 0 && absent.length === 0) return since;
    const multi = this.redis.multi();
    if (found.length > 0) multi.hdel(key, ...found);
    for (const field of absent) multi.hsetnx(key, field, String(now));
    if (absent.length > 0) multi.hmget(key, ...absent);
    const replies = await multi.exec();
    if (replies === null) throw new Error(`Redis transaction on ${key} was aborted`);
    for (const [err] of replies) if (err) throw err;
    if (absent.length === 0) return since;
    const values = replies[replies.length - 1]?.[1] as Array<string | null>;
    absent.forEach((field, i) => since.set(field, Number(values[i] ?? now)));
    return since;
  }

  /** Since when a service sync has been missing from its task's source (ms), or undefined when it is listed. */
  async since(taskId: string, serviceSyncKey: string): Promise<number | undefined> {
    const raw = await this.redis.hget(this.key(taskId), serviceSyncKey);
    return raw === null ? undefined : Number(raw);
  }

  /** Forgets one service sync's mark (it was dropped) or, without a key, every mark of the task (it was removed). */
  async clear(taskId: string, serviceSyncKey?: string): Promise<void> {
    if (serviceSyncKey === undefined) await this.redis.del(this.key(taskId));
    else await this.redis.hdel(this.key(taskId), serviceSyncKey);
  }

  private key(taskId: string): string {
    return redisKeys.taskMissing(this.prefix, taskId);
  }
}
