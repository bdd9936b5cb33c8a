import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { HeartbeatScheduler } from '../engine/heartbeat-scheduler.js';
import { silentLogger } from '../log.js';
import type { ApplyPlan, BeatResult } from '../model/adapter.js';
import type { Instance, ServiceKey } from '../model/types.js';
import { FakeAdapter } from '../../test/support/fake-adapter.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createShardCoordinator, type ShardCoordinator, type UnleadReason } from './index.js';

const cleanups: (() => void)[] = [];
const redisServer = redisPerTest({}, () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** A destination that records, for every beat, whether the worker still led the shard right then. */
class LeaderCheckingDestination extends FakeAdapter {
  beats = 0;
  /** Beats sent while the lease's local deadline had passed: must stay 0. */
  unfenced = 0;
  constructor(private readonly leading: () => boolean) {
    super('b', 100);
  }
  override async apply(_service: ServiceKey, _plan: ApplyPlan): Promise<void> {
    if (!this.leading()) this.unfenced += 1;
  }
  override async heartbeat(): Promise<BeatResult> {
    this.beats += 1;
    if (!this.leading()) this.unfenced += 1;
    return 'ok';
  }
}

const service: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 's' };
const inst = (i: number): Instance => ({ ip: `10.0.0.${i}`, port: 1, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: {} });

/** Holds the event loop for `ms`, as a long GC pause or a big synchronous computation does. */
function stallEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

describe('leadership bounded by the lease deadline', () => {
  it('stops beats at the local deadline when Redis stops answering, even if the event loop was stalled across it', async () => {
    const ttlMs = 300;
    const coordinator: ShardCoordinator = await createShardCoordinator({
      redis: redisServer.connect(),
      subscriber: redisServer.connect(),
      prefix: redisServer.prefix,
      id: 'w1',
      shards: 1,
      replicas: 1,
      membershipTtlMs: 1_000,
      leaseTtlMs: ttlMs,
      tickMs: 50,
    });
    const unleads: UnleadReason[] = [];
    // As the node wires them: beats may go out while this worker leads the shard, and stop on unlead.
    const heartbeats = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger(), mayBeat: () => coordinator.isLeading(0) });
    coordinator.on('unlead', (_shard, reason) => {
      unleads.push(reason);
      heartbeats.clear('sync');
    });
    const dest = new LeaderCheckingDestination(() => coordinator.isLeading(0));
    const pid = Number(/process_id:(\d+)/.exec(await redisServer.redis.info('server'))?.[1]);
    expect(pid).toBeGreaterThan(0);
    let paused = false;
    cleanups.push(() => {
      if (paused) process.kill(pid, 'SIGCONT');
      paused = false;
      heartbeats.stop();
      coordinator.halt();
    });

    await coordinator.start();
    await waitUntil(() => coordinator.isLeading(0), { message: 'w1 leads shard 0' });
    heartbeats.start();
    heartbeats.set('sync', dest, service, Array.from({ length: 20 }, (_, i) => inst(i + 1)));
    await waitUntil(() => dest.beats >= 40, { message: 'beats while leading' });

    // Redis stops answering: renewals hang, the lease's local deadline (at most ttlMs away) passes.
    process.kill(pid, 'SIGSTOP');
    paused = true;
    // The loop is held across the deadline, so that the wheel's tick, due first, runs before the
    // lease's deadline timer can announce the loss.
    stallEventLoop(ttlMs + 100);
    await waitUntil(() => unleads.length > 0, { message: 'the lease is lost by its deadline', timeoutMs: 5_000 });
    expect(unleads).toEqual(['lost']);
    expect(coordinator.isLeading(0)).toBe(false);
    expect(heartbeats.stats().entries).toBe(0);
    // Not one beat went out once the deadline had passed, though the wheel ran before the loss was known.
    expect(dest.unfenced).toBe(0);
    expect(paused).toBe(true);
  });
});
