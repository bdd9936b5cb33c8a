import type { Redis } from 'ioredis';

/** Redis commands run during a phase, by command name (`INFO commandstats`: the commands scripts run count too). */
export interface RedisCommands {
  /** Every command run. */
  total: number;
  /** Scripts run (`EVALSHA` and `EVAL`: BullMQ's operations, regsync's status and event writes). */
  scripts: number;
  /** Calls by command, most frequent first. */
  calls: Array<{ command: string; calls: number }>;
}

type Snapshot = Map<string, number>;

async function snapshot(redis: Redis): Promise<Snapshot | undefined> {
  try {
    const calls: Snapshot = new Map();
    for (const m of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1] as string, Number(m[2]));
    return calls;
  } catch {
    return undefined;
  }
}

/**
 * Counts what redis-server ran between `start()` and `stop()` (from its INFO counters, so every
 * client counts, the meter's own two INFO calls included).
 */
export class RedisCommandMeter {
  private first: Snapshot | undefined;

  constructor(private readonly redis: Redis) {}

  async start(): Promise<void> {
    this.first = await snapshot(this.redis);
  }

  async stop(): Promise<RedisCommands | undefined> {
    const last = await snapshot(this.redis);
    const first = this.first;
    if (!first || !last) return undefined;
    const calls = [...last]
      .map(([command, n]) => ({ command, calls: n - (first.get(command) ?? 0) }))
      .filter((c) => c.calls > 0)
      .sort((a, b) => b.calls - a.calls);
    const count = (names: string[]) => calls.reduce((sum, c) => (names.includes(c.command) ? sum + c.calls : sum), 0);
    return { total: calls.reduce((sum, c) => sum + c.calls, 0), scripts: count(['evalsha', 'eval']), calls };
  }
}
