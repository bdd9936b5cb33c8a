import { afterEach, describe, expect, it, vi } from 'vitest';
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
  /** Date.now() of every beat. */
  readonly beatTimes: number[] = [];
  async heartbeat(_service: ServiceKey, instance: Instance): Promise<BeatResult> {
    this.beats.set(instance.ip, (this.beats.get(instance.ip) ?? 0) + 1);
    this.beatTimes.push(Date.now());
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

  it('beats persistent copies too where every registration is a lease', async () => {
    const dest = new (class extends RecordingDestination {
      readonly leasesEveryInstance = true;
    })();
    const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
    hb.start();
    try {
      hb.set('o1', dest, service, [inst('10.0.0.1'), inst('10.0.0.3', false)]);
      await waitUntil(() => dest.count('10.0.0.1') >= 2 && dest.count('10.0.0.3') >= 2, { message: 'both beaten' });
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

  it('forgets the copies being removed: no beat after, and one in flight registers nothing when answered unknown', async () => {
    const dest = new RecordingDestination();
    let answer: ((result: BeatResult) => void) | undefined;
    dest.heartbeat = (_service, instance) => {
      dest.beats.set(instance.ip, (dest.beats.get(instance.ip) ?? 0) + 1);
      if (instance.ip !== '10.0.0.2') return Promise.resolve('ok');
      return new Promise<BeatResult>((resolve) => (answer = resolve));
    };
    const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
    hb.start();
    try {
      hb.set('o1', dest, service, [inst('10.0.0.1'), inst('10.0.0.2')]);
      await waitUntil(() => answer !== undefined, { message: 'a beat of 10.0.0.2 in flight' });
      hb.forget('o1', dest, service, [inst('10.0.0.2')]);
      answer?.('unknown');
      const kept = dest.count('10.0.0.1');
      await waitUntil(() => dest.count('10.0.0.1') >= kept + 3, { message: 'the other copy beats on' });
      expect(dest.count('10.0.0.2')).toBe(1);
      expect(dest.applied).toEqual([]);
      expect(hb.stats()).toMatchObject({ entries: 1, reRegistered: 0 });
    } finally {
      hb.stop();
    }
  });

  it('beats on, but does not register again, a copy whose instance the last source read no longer lists', async () => {
    const dest = new RecordingDestination();
    const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
    hb.start();
    try {
      hb.set('o1', dest, service, [inst('10.0.0.1'), inst('10.0.0.2')]);
      // A reconcile read the source (10.0.0.2 is gone from it) but not the destination.
      hb.listedInSource('o1', new Set(['10.0.0.1:1']));
      dest.lost.add('10.0.0.1');
      dest.lost.add('10.0.0.2');
      await waitUntil(() => dest.applied.length === 1 && dest.count('10.0.0.2') >= 3, { message: 'the listed one registered again, the other beaten on' });
      expect(dest.applied).toEqual([{ upsert: [inst('10.0.0.1')], remove: [] }]);
      // The next set decides anew.
      hb.set('o1', dest, service, [inst('10.0.0.1'), inst('10.0.0.2')]);
      dest.lost.add('10.0.0.2');
      await waitUntil(() => dest.applied.length === 2, { message: 'registered again once a set confirmed it' });
      expect(dest.applied[1]).toEqual({ upsert: [inst('10.0.0.2')], remove: [] });
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

  describe('on a fake clock', () => {
    afterEach(() => {
      vi.useRealTimers();
    });
    const ipOf = (i: number): string => `10.${Math.floor(i / 65_536)}.${Math.floor(i / 256) % 256}.${i % 256}`;

    it('gives entries that fell due while stopped a beat soon after start, spread over ticks', async () => {
      vi.useFakeTimers();
      const dest = new RecordingDestination();
      const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
      const many = Array.from({ length: 200 }, (_, i) => inst(ipOf(i)));
      hb.set('o1', dest, service, many, many);
      // Stopped for five intervals: every entry fell due, and nothing beat.
      await vi.advanceTimersByTimeAsync(500);
      expect(dest.beatTimes).toHaveLength(0);
      hb.start();
      try {
        // Within half the 100 ms interval (the SOON_MS window of so short an interval).
        await vi.advanceTimersByTimeAsync(50);
        for (const instance of many) expect(dest.count(instance.ip)).toBe(1);
        expect(new Set(dest.beatTimes).size).toBeGreaterThan(3);
      } finally {
        hb.stop();
      }
    });

    it('beats each of 10,000 instances once per interval, also after a set that overlaps the last one', async () => {
      vi.useFakeTimers();
      const dest = new RecordingDestination();
      const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger() });
      const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => inst(ipOf(from + i)));
      const first = range(0, 10_000);
      const second = range(5_000, 15_000);
      hb.start();
      try {
        // Half of each set just written (joins at its phase), half taken over (beaten soon).
        hb.set('o1', dest, service, first, first.filter((_, i) => i % 2 === 0));
        hb.set('o1', dest, service, second, second.filter((_, i) => i % 2 === 1));
        expect(hb.stats().entries).toBe(10_000);
        expect(hb.instancesOf('o1')).toHaveLength(10_000);
        await vi.advanceTimersByTimeAsync(300);
        for (const instance of range(0, 5_000)) expect(dest.count(instance.ip)).toBe(0);
        for (const instance of second) expect(dest.count(instance.ip)).toBe(3);
        // Spread: every 10 ms tick of the 100 ms interval carried beats.
        expect(new Set(dest.beatTimes.map((t) => Math.floor(t / 10) % 10)).size).toBe(10);
        hb.clear('o1');
        expect(hb.stats().entries).toBe(0);
      } finally {
        hb.stop();
      }
    });

    it('skips beats and re-registrations while mayBeat says no, and beats on once it says yes', async () => {
      vi.useFakeTimers();
      const dest = new RecordingDestination();
      let allowed = true;
      const asked = new Set<string>();
      const hb = new HeartbeatScheduler({
        tickMs: 10,
        logger: silentLogger(),
        mayBeat: (owner) => {
          asked.add(owner);
          return allowed;
        },
      });
      hb.start();
      try {
        hb.set('o1', dest, service, [inst('10.0.0.1'), inst('10.0.0.2')]);
        await vi.advanceTimersByTimeAsync(100);
        expect(dest.count('10.0.0.1')).toBe(1);
        expect(asked).toEqual(new Set(['o1']));
        allowed = false;
        dest.lost.add('10.0.0.2');
        await vi.advanceTimersByTimeAsync(300);
        expect(dest.count('10.0.0.1')).toBe(1);
        expect(dest.count('10.0.0.2')).toBe(1);
        allowed = true;
        await vi.advanceTimersByTimeAsync(100);
        expect(dest.count('10.0.0.1')).toBe(2);
        expect(dest.applied).toEqual([{ upsert: [inst('10.0.0.2')], remove: [] }]);
      } finally {
        hb.stop();
      }
    });

    it('beats but registers no lost copy again while mayRegister says no (a lease kept alive by its grace)', async () => {
      vi.useFakeTimers();
      const dest = new RecordingDestination();
      let registers = false;
      const hb = new HeartbeatScheduler({ tickMs: 10, logger: silentLogger(), mayBeat: () => true, mayRegister: () => registers });
      hb.start();
      try {
        hb.set('o1', dest, service, [inst('10.0.0.1')]);
        dest.lost.add('10.0.0.1');
        await vi.advanceTimersByTimeAsync(100);
        expect(dest.count('10.0.0.1')).toBe(1);
        expect(dest.applied).toEqual([]);
        await vi.advanceTimersByTimeAsync(100);
        expect(dest.count('10.0.0.1')).toBe(2);
        registers = true;
        dest.lost.add('10.0.0.1');
        await vi.advanceTimersByTimeAsync(100);
        expect(dest.applied).toEqual([{ upsert: [inst('10.0.0.1')], remove: [] }]);
      } finally {
        hb.stop();
      }
    });
  });
});
