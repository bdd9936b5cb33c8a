import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import type { ApplyPlan, BeatResult, RegistryAdapter } from '../model/adapter.js';
import type { Instance, ServiceKey } from '../model/types.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { HeartbeatScheduler } from './heartbeat-scheduler.js';

/** A destination that records beats and writes; `lost` instances answer "unknown" once. */
class RecordingDestination implements RegistryAdapter {
  readonly clusterId = 'dest';
  readonly heartbeatIntervalMs: number = 100;
  readonly beats = new Map<string, number>();
  readonly applied: ApplyPlan[] = [];
  readonly lost = new Set<string>();
  async listServices(): Promise<ServiceKey[]> {
    return [];
  }
  async listInstances(): Promise<Instance[]> {
    return [];
  }
  watch() {
    return () => {};
  }
  async apply(_service: ServiceKey, plan: ApplyPlan): Promise<void> {
    this.applied.push(plan);
  }
  async heartbeat(_service: ServiceKey, instance: Instance): Promise<BeatResult> {
    this.beats.set(instance.ip, (this.beats.get(instance.ip) ?? 0) + 1);
    if (this.lost.delete(instance.ip)) return 'unknown';
    return 'ok';
  }
  async close(): Promise<void> {}
  count(ip: string): number {
    return this.beats.get(ip) ?? 0;
  }
}

const service: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 's' };
const inst = (ip: string, ephemeral = true): Instance => ({ ip, port: 1, weight: 1, healthy: true, enabled: true, ephemeral, cluster: 'DEFAULT', metadata: {} });

describe('HeartbeatScheduler', () => {
  it('beats every ephemeral instance of an owner, and only those', async () => {
    const dest = new RecordingDestination();
    const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
    hb.start();
    try {
      hb.set('o1', dest, service, [inst('10.0.0.1'), inst('10.0.0.2'), inst('10.0.0.3', false)]);
      await waitUntil(() => dest.count('10.0.0.1') >= 3 && dest.count('10.0.0.2') >= 3, { message: 'three beats each' });
      expect(dest.count('10.0.0.3')).toBe(0);
      expect(hb.stats().entries).toBe(2);
    } finally {
      hb.stop();
    }
  });

  it('beats a copy it did not just register within a second, however long the interval', async () => {
    const dest = new (class extends RecordingDestination {
      override readonly heartbeatIntervalMs = 3_600_000;
    })();
    const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
    hb.start();
    try {
      // Taken over from another process: when it was beaten last is unknown.
      hb.set('o1', dest, service, [inst('10.0.0.1')]);
      await waitUntil(() => dest.count('10.0.0.1') === 1, { message: 'first beat soon', timeoutMs: 5_000 });
    } finally {
      hb.stop();
    }
  });

  it('stops beats of instances dropped from a set, and of a cleared owner, while others go on', async () => {
    const dest = new RecordingDestination();
    const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
    hb.start();
    try {
      hb.set('o1', dest, service, [inst('10.0.0.1'), inst('10.0.0.2')]);
      hb.set('o2', dest, service, [inst('10.0.0.9')]);
      await waitUntil(() => dest.count('10.0.0.1') >= 1 && dest.count('10.0.0.2') >= 1, { message: 'first beats' });
      hb.set('o1', dest, service, [inst('10.0.0.1')]);
      const dropped = dest.count('10.0.0.2');
      hb.clear('o2');
      const cleared = dest.count('10.0.0.9');
      const kept = dest.count('10.0.0.1');
      await waitUntil(() => dest.count('10.0.0.1') >= kept + 5, { message: 'the kept instance beats on' });
      expect(dest.count('10.0.0.2')).toBe(dropped);
      expect(dest.count('10.0.0.9')).toBe(cleared);
    } finally {
      hb.stop();
    }
  });

  it('registers an instance again when the destination lost it', async () => {
    const dest = new RecordingDestination();
    const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
    dest.lost.add('10.0.0.1');
    hb.start();
    try {
      hb.set('o1', dest, service, [inst('10.0.0.1')]);
      await waitUntil(() => dest.applied.length === 1, { message: 're-registration' });
      expect(dest.applied[0]).toEqual({ upsert: [inst('10.0.0.1')], remove: [] });
      expect(hb.stats().reRegistered).toBe(1);
    } finally {
      hb.stop();
    }
  });

  it('spreads instances over the interval instead of beating them all at once', () => {
    const dest = new RecordingDestination();
    const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
    const many = Array.from({ length: 200 }, (_, i) => inst(`10.1.${Math.floor(i / 250)}.${i % 250}`));
    // Just registered (written): each joins at its phase; 100 ms interval / 10 ms ticks = 10 phases,
    // and 200 instances should use all of them.
    hb.set('o1', dest, service, many, many);
    const wheel = (hb as unknown as { wheel: Map<number, Set<string>> }).wheel;
    const perPhase = new Map<number, number>();
    for (const [tick, bucket] of wheel) perPhase.set(tick % 10, (perPhase.get(tick % 10) ?? 0) + bucket.size);
    expect(perPhase.size).toBe(10);
    for (const count of perPhase.values()) expect(count).toBeGreaterThan(5);
  });
});
