import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { beatenSince, beatsOf, watchCopies } from '../support/regsync-cluster.js';
import {
  addRegistry,
  api,
  copiesIn,
  defineTask,
  registerNative,
  startFixture,
  startSync,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { startTcpGate, type TcpGate } from '../support/tcp-gate.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * A destination in another region: every byte between regsync and registry B waits 200 ms each
 * way in a TcpGate (400 ms per round trip, in order). The source changes at a steady rate (a new
 * instance every 250 ms); sync must keep up, and the copies must never lapse: over HTTP (Nacos v1
 * ephemeral copies), B wants a beat every second and marks a copy unhealthy after 3 s without one
 * (Nacos' 5 s / 15 s at a faster clock, so a round trip is 40% of the beat interval instead of 8%);
 * over gRPC the copies live as long as regsync's connection, which must not drop.
 */

const TIMEOUT = 30_000;
const LATENCY = { upMs: 200, downMs: 200 };
const SERVICES = Array.from({ length: 6 }, (_, i) => `r${i}`);
const CHANGES = 40;
const CHANGE_EVERY_MS = 250;
const EXPIRY = { unhealthyAfterMs: 3_000, expireAfterMs: 6_000, sweepIntervalMs: 100 };

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;
}

for (const protocol of ['http', 'grpc'] as const) {
  describe(`a destination behind a slow link (200 ms each way), ${protocol}`, () => {
    let fx: SyncFixture;
    let a: RunningRegistry;
    let b: RunningRegistry;
    const gates: TcpGate[] = [];
    let url: string;
    const natives: NativeInstance[] = [];

    beforeAll(async () => {
      fx = await startFixture();
      a = await addRegistry(fx, 'a');
      b = await addRegistry(fx, 'b', { expiry: EXPIRY, beatIntervalMs: 1_000, ...(protocol === 'grpc' ? { grpcPort: 0, grpc: { pushMergeWindowMs: 50 } } : {}) });
      const http = await startTcpGate(b.endpoint, { latency: LATENCY });
      gates.push(http);
      const options: Record<string, unknown> = { requestTimeoutMs: 5_000 };
      if (protocol === 'grpc') {
        const grpc = await startTcpGate(b.grpcEndpoint as string, { latency: LATENCY });
        gates.push(grpc);
        Object.assign(options, { apiVersion: 'grpc', grpcPort: Number(grpc.endpoint.split(':')[1]) });
      } else options.apiVersion = 'v1';
      url = (await startSync(fx)).url as string;
      expect((await api(url, 'POST', '/api/v1/clusters', { id: 'a', kind: 'nacos', endpoints: [a.endpoint], options: { apiVersion: 'v1' } })).status).toBe(201);
      expect((await api(url, 'POST', '/api/v1/clusters', { id: 'b', kind: 'nacos', endpoints: [http.endpoint], options })).status).toBe(201);
    });
    afterAll(async () => {
      for (const n of natives) n.stop();
      for (const g of gates) await g.close();
      if (fx) await stopFixture(fx);
    });

    it('keeps up with a steady change rate and no copy ever lapses', async () => {
      for (const [i, s] of SERVICES.entries()) {
        for (const j of [1, 2]) natives.push(await registerNative(() => a, s, `10.95.${j}.${i + 1}`, 8080, {}, 1_000));
      }
      await defineTask(url, 'ab', 'a', 'b', '*');
      const steady = () => SERVICES.every((s) => copiesIn(b, s).length === 2 && copiesIn(b, s).every((c) => c.healthy && (protocol === 'grpc' || c.beats >= 2)));
      await waitUntil(steady, { timeoutMs: TIMEOUT, message: 'two healthy copies of each service in B (beaten twice over HTTP)' });
      fx.node?.heartbeats.stats(); // starts the lateness figure afresh

      const watch = watchCopies(b, SERVICES);
      const registered = new Map<string, number>();
      const lags: number[] = [];
      const onChange = (): void => {
        for (const [key, at] of registered) {
          const [s, ip] = key.split(' ') as [string, string];
          if (copiesIn(b, s).some((c) => c.ip === ip)) {
            lags.push(Date.now() - at);
            registered.delete(key);
          }
        }
      };
      b.store.on('change', onChange);
      const started = Date.now();
      const beatsAtStart = beatsOf(b, SERVICES);
      const expected = new Set(SERVICES.flatMap((s, i) => [1, 2].map((j) => `${s} 10.95.${j}.${i + 1}`)));
      try {
        // The change rate is the scenario: one new instance in A every CHANGE_EVERY_MS.
        for (let n = 0; n < CHANGES; n += 1) {
          const s = SERVICES[n % SERVICES.length] as string;
          const ip = `10.96.${Math.floor(n / 200)}.${(n % 200) + 1}`;
          natives.push(await registerNative(() => a, s, ip, 8080, {}, 1_000));
          registered.set(`${s} ${ip}`, Date.now());
          expected.add(`${s} ${ip}`);
          await delay(CHANGE_EVERY_MS);
        }
        await waitUntil(() => registered.size === 0, { timeoutMs: TIMEOUT, message: 'every new instance copied into B' });
        // Every copy beaten (or kept) through a few more intervals after the last change.
        const settled = beatsOf(b, SERVICES);
        if (protocol === 'http') await waitUntil(() => beatenSince(b, SERVICES, settled, 3), { timeoutMs: TIMEOUT, message: '3 more beats of every copy' });
        // gRPC copies need no beat: they lapse only if the connection drops, so the watch spans as long a time instead.
        else await waitUntil(() => Date.now() - started > CHANGES * CHANGE_EVERY_MS + 2 * EXPIRY.unhealthyAfterMs, { timeoutMs: TIMEOUT, message: 'two unhealthy windows after the last change' });
      } finally {
        watch.stop();
        b.store.off('change', onChange);
      }
      const stats = fx.node?.heartbeats.stats();
      const sorted = [...lags].sort((x, y) => x - y);
      const early = lags.slice(0, Math.floor(lags.length / 4));
      const late = lags.slice(-Math.floor(lags.length / 4));
      const mean = (xs: number[]) => Math.round(xs.reduce((n, x) => n + x, 0) / Math.max(1, xs.length));
      const beats = [...beatsOf(b, SERVICES)].reduce((n, [k, v]) => n + v - (beatsAtStart.get(k) ?? 0), 0);
      console.log(
        `partition slow-link ${protocol}: ${CHANGES} changes at ${1000 / CHANGE_EVERY_MS}/s over ${LATENCY.upMs}+${LATENCY.downMs} ms, copy lag p50 ${percentile(sorted, 50)} ms ` +
          `p95 ${percentile(sorted, 95)} ms max ${sorted[sorted.length - 1]} ms (first quarter mean ${mean(early)} ms, last quarter ${mean(late)} ms), ` +
          `${beats} beats (max beat lateness ${stats?.maxLatenessMs ?? 0} ms, failed ${stats?.failed ?? 0}), lapses ${watch.violations.length}, ` +
          `gate connections ${gates.map((g) => g.connections()).join('+')}`,
      );
      expect(watch.violations).toEqual([]);
      const copies = SERVICES.flatMap((s) => copiesIn(b, s).map((c) => `${s} ${c.ip}`)).sort();
      expect(copies).toEqual([...expected].sort());
      expect(SERVICES.every((s) => copiesIn(b, s).every((c) => c.healthy))).toBe(true);
    }, 90_000);
  });
}
