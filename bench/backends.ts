import { Redis } from 'ioredis';
import { startRegistry, type RunningRegistry } from '../src/registry/index.js';
import { startRedis, type RedisServer } from '../test/support/redis.js';
import { RequestCounter } from './request-counter.js';

/** What a phase runs besides regsync: a redis-server, registries A and B (in this process), and the request counters of both. */
export interface BenchBackends {
  redis: RedisServer;
  /** A client of `redis` for the bench's own bookkeeping (CPU of redis-server, deployment record). */
  redisClient: Redis;
  a: RunningRegistry;
  b: RunningRegistry;
  requestsA: RequestCounter;
  requestsB: RequestCounter;
  /** Stops the counters, the client, the registries and redis-server. */
  close(): Promise<void>;
}

/** Starts a private redis-server and two embedded registries on free loopback ports; on a failure, stops what started. */
export async function startBackends(): Promise<BenchBackends> {
  const redis = await startRedis();
  const redisClient = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  redisClient.on('error', () => {});
  const registries: RunningRegistry[] = [];
  const stopAll = async (): Promise<void> => {
    redisClient.disconnect();
    await Promise.all(registries.map((r) => r.close()));
    await redis.cleanup();
  };
  try {
    const a = await startRegistry({ port: 0 });
    registries.push(a);
    const b = await startRegistry({ port: 0 });
    registries.push(b);
    const requestsA = new RequestCounter(a);
    const requestsB = new RequestCounter(b);
    return {
      redis,
      redisClient,
      a,
      b,
      requestsA,
      requestsB,
      async close() {
        requestsA.close();
        requestsB.close();
        await stopAll();
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
