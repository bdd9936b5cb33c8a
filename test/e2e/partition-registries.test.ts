import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { beatenSince, beatsOf, watchCopies } from '../support/regsync-cluster.js';
import {
  addRegistry,
  api,
  copiesIn,
  countChanges,
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
 * regsync (one process, Redis reachable) partitioned from one registry while the other stays: a
 * TcpGate in front of the registry goes silent (connections stay open, nothing crosses) and heals,
 * delivering what it held. The registries' natives keep beating their registry directly: only
 * regsync's link is cut. Registries expire ephemeral instances after 3 s without a beat (removed
 * after 6 s), beats every second: the Nacos rules (5 s / 15 s / 30 s) at a faster clock.
 */

const TIMEOUT = 30_000;
const EXPIRY = { unhealthyAfterMs: 3_000, expireAfterMs: 6_000, sweepIntervalMs: 100 };
const SERVICES = ['q0', 'q1', 'q2', 'q3'];
const CLUSTER_OPTIONS = { requestTimeoutMs: 1_000 };
const TASK_OPTIONS = { fullSyncIntervalMs: 2_000 };

type ServiceStatus = { service: string; sourceInstances: number; destinationInstances: number; lastError: string | null };
type ClusterStatus = { id: string; reachability: string; failure: string | null; lastError: string | null };

async function serviceStatuses(url: string, task: string): Promise<ServiceStatus[]> {
  return ((await api(url, 'GET', `/api/v1/tasks/${task}`)).body?.status?.services ?? []) as ServiceStatus[];
}

async function clusterStatus(url: string, id: string): Promise<ClusterStatus | undefined> {
  return ((await api(url, 'GET', '/api/v1/clusters:status')).body.items as ClusterStatus[]).find((c) => c.id === id);
}

/** Sorted `service ip` of the copies in `registry`, healthy or not. */
function copyList(registry: RunningRegistry): string[] {
  return SERVICES.flatMap((s) => copiesIn(registry, s).map((c) => `${s} ${c.ip}`)).sort();
}

describe('regsync cut off from a source', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let gate: TcpGate;
  let url: string;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', { expiry: EXPIRY });
    b = await addRegistry(fx, 'b', { expiry: EXPIRY, beatIntervalMs: 1_000 });
    gate = await startTcpGate(a.endpoint);
    url = (await startSync(fx)).url as string;
    for (const [id, endpoint] of [['a', gate.endpoint], ['b', b.endpoint]] as const) {
      expect((await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options: CLUSTER_OPTIONS })).status).toBe(201);
    }
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await gate?.close();
    if (fx) await stopFixture(fx);
  });

  it('keeps every copy alive and says so while the source cannot be read, and copies what changed once it can', async () => {
    for (const [i, s] of SERVICES.entries()) natives.push(await registerNative(() => a, s, `10.93.0.${i + 1}`, 8080, {}, 1_000));
    await defineTask(url, 'ab', 'a', 'b', '*', { options: TASK_OPTIONS });
    await waitUntil(() => SERVICES.every((s) => copiesIn(b, s).length === 1 && (copiesIn(b, s)[0]?.beats ?? 0) >= 2), {
      timeoutMs: TIMEOUT,
      message: 'one copy of each service in B, beaten twice',
    });
    const before = copyList(b);
    const watch = watchCopies(b, SERVICES);
    const cutAt = Date.now();
    const seen = { reportedMs: 0, repairedMs: 0, beatsDuringCut: 0 };
    try {
      gate.partition();
      // A change regsync cannot see yet.
      natives.push(await registerNative(() => a, 'q1', '10.93.1.1', 8080, {}, 1_000));
      const report = await waitUntil(
        async () => {
          const failing = (await serviceStatuses(url, 'ab')).filter((s) => s.lastError?.startsWith('cannot read source a'));
          const cluster = await clusterStatus(url, 'a');
          return failing.length > 0 && cluster?.reachability !== 'ok' ? { failing, cluster } : undefined;
        },
        { timeoutMs: TIMEOUT, message: 'the status to say that source a cannot be read' },
      );
      seen.reportedMs = Date.now() - cutAt;
      expect(report.cluster).toMatchObject({ failure: 'unreachable' });
      // Beats go on through twice B's unhealthy window: the copies are kept as they were.
      const atCut = beatsOf(b, SERVICES);
      await waitUntil(() => beatenSince(b, SERVICES, atCut, 6), { timeoutMs: TIMEOUT, message: '6 more beats of every copy while the source is cut off' });
      seen.beatsDuringCut = [...beatsOf(b, SERVICES)].reduce((n, [k, v]) => n + v - (atCut.get(k) ?? 0), 0);
      expect(copyList(b)).toEqual(before);
    } finally {
      gate.open();
    }
    const healedAt = Date.now();
    try {
      await waitUntil(() => copiesIn(b, 'q1').some((c) => c.ip === '10.93.1.1' && c.healthy), { timeoutMs: TIMEOUT, message: 'the change made during the partition copied' });
      await waitUntil(async () => (await serviceStatuses(url, 'ab')).every((s) => s.lastError === null) && (await clusterStatus(url, 'a'))?.reachability === 'ok', {
        timeoutMs: TIMEOUT,
        message: 'the status clear and source a reachable again',
      });
      seen.repairedMs = Date.now() - healedAt;
    } finally {
      watch.stop();
    }
    console.log(
      `partition source: reported after ${seen.reportedMs} ms, ${seen.beatsDuringCut} beats of ${before.length} copies during the cut ` +
        `(${Date.now() - cutAt} ms), lapses ${watch.violations.length}, repaired ${seen.repairedMs} ms after the link healed`,
    );
    expect(watch.violations).toEqual([]);
    expect(copyList(b)).toEqual([...before, 'q1 10.93.1.1'].sort());
  }, 90_000);
});

describe('regsync cut off from a destination', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let gate: TcpGate;
  let url: string;
  const natives = new Map<string, NativeInstance>();

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', { expiry: EXPIRY });
    b = await addRegistry(fx, 'b', { expiry: EXPIRY, beatIntervalMs: 1_000 });
    gate = await startTcpGate(b.endpoint);
    url = (await startSync(fx)).url as string;
    for (const [id, endpoint] of [['a', a.endpoint], ['b', gate.endpoint]] as const) {
      expect((await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options: CLUSTER_OPTIONS })).status).toBe(201);
    }
  });
  afterAll(async () => {
    for (const n of natives.values()) n.stop();
    await gate?.close();
    if (fx) await stopFixture(fx);
  });

  it('leaves the copies to the destination\'s own expiry and says so, then registers everything again, with what changed, once it is reached', async () => {
    for (const [i, s] of SERVICES.entries()) natives.set(`${s} 10.94.0.${i + 1}`, await registerNative(() => a, s, `10.94.0.${i + 1}`, 8080, {}, 1_000));
    natives.set('q0 10.94.0.9', await registerNative(() => a, 'q0', '10.94.0.9', 8080, {}, 1_000));
    await defineTask(url, 'ab', 'a', 'b', '*', { options: TASK_OPTIONS });
    await waitUntil(() => copyList(b).length === 5 && SERVICES.every((s) => copiesIn(b, s).every((c) => c.beats >= 2)), {
      timeoutMs: TIMEOUT,
      message: 'five copies in B, each beaten twice',
    });
    const cutAt = Date.now();
    const seen = { reportedMs: 0, unhealthyMs: 0, goneMs: 0, repairedMs: 0, writesDuringCut: 0 };
    const changes = countChanges(b);
    try {
      gate.partition();
      // Changes in the source while regsync cannot write them: one instance more, one less.
      natives.set('q1 10.94.1.1', await registerNative(() => a, 'q1', '10.94.1.1', 8080, {}, 1_000));
      await natives.get('q0 10.94.0.9')?.deregister();
      natives.delete('q0 10.94.0.9');
      const report = await waitUntil(
        async () => {
          const failing = (await serviceStatuses(url, 'ab')).filter((s) => s.lastError?.includes('destination b'));
          const cluster = await clusterStatus(url, 'b');
          return failing.length > 0 && cluster?.reachability !== 'ok' ? { failing, cluster } : undefined;
        },
        { timeoutMs: TIMEOUT, message: 'the status to say that destination b cannot be reached' },
      );
      seen.reportedMs = Date.now() - cutAt;
      expect(report.cluster).toMatchObject({ failure: 'unreachable' });
      // Nothing reaches B: its own rules decide, first unhealthy, then gone.
      await waitUntil(() => SERVICES.every((s) => copiesIn(b, s).every((c) => !c.healthy)), { timeoutMs: TIMEOUT, message: 'B marking the unbeaten copies unhealthy' });
      seen.unhealthyMs = Date.now() - cutAt;
      await waitUntil(() => copyList(b).length === 0, { timeoutMs: TIMEOUT, message: 'B removing the unbeaten copies' });
      seen.goneMs = Date.now() - cutAt;
      seen.writesDuringCut = changes.count();
    } finally {
      gate.open();
    }
    const healedAt = Date.now();
    // The copy of the instance removed meanwhile must not come back, not even for a moment.
    const revived: string[] = [];
    const onChange = (): void => {
      if (copiesIn(b, 'q0').some((c) => c.ip === '10.94.0.9')) revived.push(`+${Date.now() - healedAt} ms`);
    };
    b.store.on('change', onChange);
    const expected = [...natives.keys()].sort();
    await waitUntil(() => copyList(b).join(',') === expected.join(',') && SERVICES.every((s) => copiesIn(b, s).every((c) => c.healthy)), {
      timeoutMs: TIMEOUT,
      message: `B holding healthy copies of ${expected.join(', ')}`,
    });
    await waitUntil(async () => (await serviceStatuses(url, 'ab')).every((s) => s.lastError === null) && (await clusterStatus(url, 'b'))?.reachability === 'ok', {
      timeoutMs: TIMEOUT,
      message: 'the status clear and destination b reachable again',
    });
    seen.repairedMs = Date.now() - healedAt;
    // Stays repaired: beaten on, nothing removed again.
    const repaired = beatsOf(b, SERVICES);
    await waitUntil(() => beatenSince(b, SERVICES, repaired, 2), { timeoutMs: TIMEOUT, message: '2 more beats of every copy after the repair' });
    console.log(
      `partition destination: reported after ${seen.reportedMs} ms, copies unhealthy by B's rules at +${seen.unhealthyMs} ms and gone at +${seen.goneMs} ms ` +
        `(B's own changes meanwhile: ${seen.writesDuringCut}), removed copy written again ${revived.length} times, all ${expected.length} copies (one added, one removed meanwhile) repaired ${seen.repairedMs} ms after the link healed`,
    );
    b.store.off('change', onChange);
    expect(revived).toEqual([]);
    expect(copyList(b)).toEqual(expected);
  }, 90_000);
});
