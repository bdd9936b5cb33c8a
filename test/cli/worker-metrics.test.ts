import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scrape } from '../support/prometheus.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import { waitUntil } from '../support/wait-until.js';

describe('regsync worker --metrics-listen', () => {
  let redis: RedisServer;
  let worker: RegsyncProcess | undefined;

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await worker?.stop();
    await redis?.cleanup();
  });

  it('serves /metrics and /healthz on its own port, and prints where', async () => {
    worker = await startRegsync(['worker', '--redis', redis.url, '--shards', '4', '--metrics-listen', '127.0.0.1:0']);
    expect(worker.output()).toMatch(/^regsync worker \S+ running \(4 shards, 2 replicas\); metrics on http:\/\/127\.0\.0\.1:\d+\/metrics$/m);
    expect(worker.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    // Alone, the worker leads every shard.
    const s = await waitUntil(
      async () => {
        const m = await scrape(worker?.url as string);
        return m.total('regsync_shard_leader') === 4 ? m : undefined;
      },
      { message: 'the worker leads the 4 shards' },
    );
    expect(s.samples('regsync_shard_leader')).toHaveLength(4);
    expect(s.families.has('process_resident_memory_bytes')).toBe(true);
    // No API role: no deployment-wide gauges here.
    expect(s.families.has('regsync_queue_depth')).toBe(false);
    const base = (worker.url as string).replace(/\/metrics$/, '');
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ status: 'ok' });
    expect((await fetch(`${base}/api/v1/tasks`)).status).toBe(404);
    expect(await worker.stop()).toBe(0);
    worker = undefined;
  });

  it('refuses a malformed address before starting', async () => {
    const res = await runRegsync(['worker', '--redis', redis.url, '--metrics-listen', 'nowhere']);
    expect(res.code).toBe(1);
    expect(res.output).toContain('invalid --metrics-listen "nowhere": expected host:port');
  });
});
