import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { TestGrpcClient, wireHost } from '../support/grpc-client.js';
import { pidOfPeer, RegsyncCluster, settledProbe, shardOfService, type ClusterSnapshot } from '../support/regsync-cluster.js';
import { addRegistry, api, copiesIn, defineTask, startFixture, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * The sharded deployment of shards.test.ts (one `regsync api`, three `regsync worker`s sharing 8
 * shards with 2 replicas, 2 s lease TTL) with both clusters on Nacos gRPC. Copies in B are bound to
 * the connection that publishes them, and every replica of a shard publishes the same sets over its
 * own connection: a leader killed with -9 takes its connection, and none of the copies, with it.
 *
 * The tests share one deployment and build on each other (steady state, the kill, the survivors).
 */

const TIMEOUT = 60_000;
const SHARDS = 8;
const SERVICES = Array.from({ length: 24 }, (_, i) => `g${i}`);
const TASK = 'ab';
const sourceIp = (i: number) => `10.61.0.${i + 1}`;
const MOVED_IP = '10.61.1.1';

/** An HTTP pass-through in front of a registry that records every request regsync sends it there. */
interface HttpTap {
  endpoint: string;
  requests: Array<{ method: string; path: string; at: number }>;
  close(): Promise<void>;
}

async function startHttpTap(target: RunningRegistry): Promise<HttpTap> {
  const requests: HttpTap['requests'] = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '?', path: new URL(req.url ?? '/', 'http://tap').pathname, at: Date.now() });
    const upstream = httpRequest({ host: target.host, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Watches the copies of `services` in `registry` at every visible change and every `everyMs` (a
 * publisher leaving changes nothing visible, so its count is sampled): a copy seen once and gone
 * later, unhealthy, or an address shown twice in a service is a violation. Records the fewest
 * publishers each copy had, and when each copy was first seen.
 */
function watchGrpcCopies(registry: RunningRegistry, services: readonly string[], everyMs = 20) {
  const started = Date.now();
  const seen = new Set<string>();
  const firstSeen = new Map<string, number>();
  const fewest = new Map<string, number>();
  const violations: string[] = [];
  const bad = new Map<string, string>();
  const flag = (key: string, state: string | undefined): void => {
    if (state !== undefined && bad.get(key) !== state) violations.push(`+${Date.now() - started} ms: ${key} ${state}`);
    if (state === undefined) bad.delete(key);
    else bad.set(key, state);
  };
  let looks = 0;
  const look = (): void => {
    looks += 1;
    for (const service of services) {
      const copies = copiesIn(registry, service);
      const byAddress = new Map<string, number>();
      for (const c of copies) {
        const key = `${service}/${c.ip}:${c.port}`;
        byAddress.set(key, (byAddress.get(key) ?? 0) + 1);
        if (!seen.has(key)) firstSeen.set(key, Date.now());
        seen.add(key);
        fewest.set(key, Math.min(fewest.get(key) ?? Infinity, c.publishers ?? 0));
      }
      for (const key of seen) {
        if (!key.startsWith(`${service}/`)) continue;
        const n = byAddress.get(key) ?? 0;
        const c = copies.find((x) => `${service}/${x.ip}:${x.port}` === key);
        flag(key, n === 0 ? 'gone' : n > 1 ? `shown ${n} times` : c?.healthy ? undefined : 'unhealthy');
      }
    }
  };
  look();
  registry.store.on('change', look);
  const timer = setInterval(look, everyMs);
  return {
    violations,
    firstSeen,
    fewest,
    looks: () => looks,
    stop(): void {
      clearInterval(timer);
      registry.store.off('change', look);
    },
  };
}

/** The worker leading most shards (ties: the smallest id). */
function busiest(snapshot: ClusterSnapshot, live: string[]): { id: string; leads: number[] } {
  const leadsOf = (id: string) => [...snapshot.leaders].filter(([, leader]) => leader === id).map(([shard]) => shard).sort((x, y) => x - y);
  const ranked = live.map((id) => ({ id, leads: leadsOf(id) })).sort((x, y) => y.leads.length - x.leads.length || (x.id < y.id ? -1 : 1));
  const top = ranked[0];
  if (!top || top.leads.length === 0) throw new Error(`no worker leads anything: ${JSON.stringify([...snapshot.leaders])}`);
  return top;
}

describe('sharded deployment on Nacos gRPC: every replica publishes, kill -9 of a leader loses no copy', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let tapA: HttpTap;
  let tapB: HttpTap;
  let cluster: RegsyncCluster;
  const clients: TestGrpcClient[] = [];
  let victim: { id: string; leads: number[]; serves: number[] };
  let moved: string;
  const report: string[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    // regsync reaches the HTTP ports through taps, which count every request it sends there
    tapA = await startHttpTap(a);
    tapB = await startHttpTap(b);
    cluster = new RegsyncCluster(fx.redis.url, ['--shards', String(SHARDS), '--replicas', '2', '--lease-ttl-ms', '2000']);
  });
  afterAll(async () => {
    if (report.length > 0) console.log(`[shards-grpc]\n${report.join('\n')}`);
    for (const c of clients) c.close();
    await cluster?.close();
    await tapA?.close();
    await tapB?.close();
    if (fx) await stopFixture(fx);
  });

  const showLogsOnFailure = () => onTestFailed(() => console.log(cluster.logs()));
  const copyKeys = () => SERVICES.flatMap((s) => copiesIn(b, s).map((c) => `${s}/${c.ip}:${c.port}`));
  const grpcRequests = (r: RunningRegistry) => ({ ...(r.grpc?.stats().requests ?? {}) });
  /** Which process holds each of a registry's gRPC connections (worker id, `api`, or `pid n`/`?`). */
  const holders = (r: RunningRegistry): string[] => {
    const pids = cluster.workerPids();
    if (cluster.api?.proc.pid !== undefined) pids.set(cluster.api.proc.pid, 'api');
    pids.set(process.pid, 'test');
    return (r.grpc?.connections() ?? [])
      .map((c) => {
        const pid = pidOfPeer(Number(c.peer.slice(c.peer.lastIndexOf(':') + 1)), r.grpcPort ?? 0, [...pids.keys()]);
        return pid === undefined ? '?' : (pids.get(pid) ?? `pid ${pid}`);
      })
      .sort();
  };
  /** Every copy in B once, with the source's address, published by `publishers` connections. */
  const everyCopyPublishedBy = (publishers: number, extra: Record<string, string[]> = {}) =>
    SERVICES.every((s, i) => {
      const copies = copiesIn(b, s);
      const want = [sourceIp(i), ...(extra[s] ?? [])].sort();
      return copies.map((c) => c.ip).sort().join(',') === want.join(',') && copies.every((c) => c.publishers === publishers && c.healthy);
    });

  it('steady state: each copy in B once, published by both replicas of its shard; no beats, no polls at rest', async () => {
    showLogsOnFailure();
    await cluster.startApi();
    await Promise.all(['w1', 'w2', 'w3'].map((id) => cluster.startWorker(id)));
    await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment of 3 workers' });

    for (const [id, r, tap] of [['a', a, tapA], ['b', b, tapB]] as const) {
      const spec = { id, kind: 'nacos', endpoints: [tap.endpoint], options: { apiVersion: 'grpc', grpcPort: r.grpcPort } };
      expect((await api(cluster.url, 'POST', '/api/v1/clusters', spec)).status).toBe(201);
    }
    const source = await TestGrpcClient.connect(a.grpcEndpoint ?? '');
    clients.push(source);
    for (const [i, s] of SERVICES.entries()) {
      const answer = await source.naming('InstanceRequest', s, { type: 'registerInstance', instance: wireHost(sourceIp(i), 8080) });
      expect(answer.body.resultCode).toBe(200);
    }
    await defineTask(cluster.url, TASK, 'a', 'b', '*');

    await waitUntil(() => everyCopyPublishedBy(2), { timeoutMs: TIMEOUT, message: 'each of the 24 copies in B once, published by 2 connections' });
    const snap = await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment with the task' });
    // One connection per worker to B; each publishes the sets of the shards it serves: 24 services x 2 replicas.
    expect(holders(b)).toEqual(['w1', 'w2', 'w3']);
    // Workers that lost shards to the ones joining after them keep those sets for a hand-over grace (3 lease TTLs).
    await waitUntil(() => b.grpc?.stats().publishSets === SERVICES.length * 2, { timeoutMs: TIMEOUT, message: 'publish sets of the 2 replicas of each shard only' });
    for (const item of snap.shards.items) expect(new Set(item.replicas).size).toBe(2);
    report.push(`B gRPC connections held by: ${holders(b).join(', ')}; A: ${holders(a).join(', ')}`);
    // Each worker tells its connection to B in its record.
    await waitUntil(
      async () => {
        const items = (await api(cluster.url, 'GET', '/api/v1/workers')).body.items as Array<{ id: string; status: { connections?: Record<string, { connections: number; publishSets: number }> } }>;
        return items.length === 3 && items.every((w) => w.status.connections?.b?.connections === 1 && (w.status.connections.b.publishSets ?? 0) > 0);
      },
      { timeoutMs: TIMEOUT, message: 'every worker reporting its connection to B' },
    );

    // At rest: a clock of two health checks per regsync connection to A (each sends one after 5 s
    // without another call), then nothing but health checks and the `*` task's service-list polls
    // (Nacos pushes nothing about services appearing) went to A: no ServiceQueryRequest, nothing at all but health checks to B, no HTTP to either, and no beat ever reached B.
    const regsyncToA = (a.grpc?.stats().connections ?? 0) - clients.length;
    expect(regsyncToA).toBeGreaterThan(0);
    const restA = grpcRequests(a);
    const restB = grpcRequests(b);
    const httpA = tapA.requests.length;
    const httpB = tapB.requests.length;
    const restStart = Date.now();
    await waitUntil(() => (grpcRequests(a).HealthCheckRequest ?? 0) >= (restA.HealthCheckRequest ?? 0) + 2 * regsyncToA, {
      timeoutMs: TIMEOUT,
      message: `${2 * regsyncToA} more health checks at A`,
    });
    const grew = (now: Record<string, number>, then: Record<string, number>) =>
      Object.fromEntries(Object.entries(now).filter(([k, n]) => n !== (then[k] ?? 0)).map(([k, n]) => [k, n - (then[k] ?? 0)]));
    const atRestA = grew(grpcRequests(a), restA);
    const atRestB = grew(grpcRequests(b), restB);
    report.push(`at rest for ${Date.now() - restStart} ms: gRPC requests at A ${JSON.stringify(atRestA)}, at B ${JSON.stringify(atRestB)}`);
    expect(Object.keys(atRestA).filter((k) => k !== 'HealthCheckRequest' && k !== 'ServiceListRequest')).toEqual([]);
    expect(Object.keys(atRestB).filter((k) => k !== 'HealthCheckRequest')).toEqual([]);
    expect(tapA.requests.slice(httpA)).toEqual([]);
    expect(tapB.requests.slice(httpB)).toEqual([]);
    // Over the whole run so far: no HTTP to B at all (so no beat), and no copy ever beaten.
    expect(tapB.requests).toEqual([]);
    expect(SERVICES.flatMap((s) => copiesIn(b, s)).filter((c) => c.beats !== 0)).toEqual([]);
    report.push(`HTTP requests so far: to A ${JSON.stringify(tapA.requests.map((r) => `${r.method} ${r.path}`))}, to B ${tapB.requests.length}`);
  }, 120_000);

  it('kill -9 of the busiest leader: no copy vanishes or shows twice, other replicas lead its shards, a change made meanwhile lands', async () => {
    showLogsOnFailure();
    const before = await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment before the kill' });
    const top = busiest(before, cluster.liveIds());
    victim = { ...top, serves: before.workers.find((w) => w.id === top.id)?.serves ?? [] };
    const candidate = SERVICES.find((s) => victim.leads.includes(shardOfService(TASK, s, SHARDS)));
    if (candidate === undefined) throw new Error(`no service hashes onto a shard ${victim.id} leads (${victim.leads.join(',')})`);
    moved = candidate;
    const movedKey = `${moved}/${MOVED_IP}:8080`;

    const watch = watchGrpcCopies(b, SERVICES);
    const newLeaderAt = new Map<number, number>();
    let killedAt = 0;
    try {
      expect(copyKeys().length).toBe(24);
      killedAt = Date.now();
      await cluster.kill(victim.id);
      const newcomer = await TestGrpcClient.connect(a.grpcEndpoint ?? '');
      clients.push(newcomer);
      expect((await newcomer.naming('InstanceRequest', moved, { type: 'registerInstance', instance: wireHost(MOVED_IP, 8080) })).body.resultCode).toBe(200);
      const registeredAt = Date.now();

      // another replica leads each of the victim's shards (first seen per shard)
      await waitUntil(
        async () => {
          const shards = await cluster.shards();
          for (const n of victim.leads) {
            const item = shards.items[n];
            const ok = item?.leader != null && item.leader !== victim.id && cluster.liveIds().includes(item.leader) && item.replicas.includes(item.leader);
            if (ok && !newLeaderAt.has(n)) newLeaderAt.set(n, Date.now());
          }
          return victim.leads.every((n) => newLeaderAt.has(n));
        },
        { timeoutMs: TIMEOUT, intervalMs: 20, message: `new leaders for shards ${victim.leads.join(',')} of the killed ${victim.id}` },
      );
      await waitUntil(() => watch.firstSeen.has(movedKey), { timeoutMs: TIMEOUT, message: `a copy of ${MOVED_IP} (${moved}) in B` });
      await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment of the 2 survivors' });
      await waitUntil(() => everyCopyPublishedBy(2, { [moved]: [MOVED_IP] }), {
        timeoutMs: TIMEOUT,
        message: 'every copy in B once, published by both survivors',
      });
      const settledAt = Date.now();
      report.push(
        `killed ${victim.id}, leader of shards ${victim.leads.join(',')}, replica of ${victim.serves.join(',')}; new leader after (ms from the kill): ` +
          victim.leads.map((n) => `shard ${n} ${(newLeaderAt.get(n) ?? NaN) - killedAt}`).join(', '),
      );
      report.push(
        `change in ${moved} (shard ${shardOfService(TASK, moved, SHARDS)}) registered ${registeredAt - killedAt} ms after the kill, ` +
          `in B ${(watch.firstSeen.get(movedKey) ?? NaN) - killedAt} ms after the kill (${(watch.firstSeen.get(movedKey) ?? NaN) - registeredAt} ms after its registration)`,
      );
      report.push(`every copy published by 2 connections again ${settledAt - killedAt} ms after the kill`);
    } finally {
      watch.stop();
    }
    const dipped = [...watch.fewest].filter(([, n]) => n < 2);
    report.push(
      `${watch.looks()} looks at B; fewest publishers per copy: ${dipped.length} of ${watch.fewest.size} copies went below 2: ` +
        `${dipped.map(([k, n]) => `${k}=${n}`).join(' ')}; any at 0: ${dipped.some(([, n]) => n === 0)}`,
    );
    expect(watch.violations).toEqual([]);
    expect([...watch.fewest].filter(([, n]) => n < 1)).toEqual([]);
    // Exactly the copies of the shards the victim served lost a publisher for a while; the others never did.
    const ofVictim = SERVICES.filter((s) => victim.serves.includes(shardOfService(TASK, s, SHARDS))).map((s) => `${s}/${sourceIp(SERVICES.indexOf(s))}:8080`);
    expect(dipped.map(([k]) => k).filter((k) => k !== movedKey).sort()).toEqual(ofVictim.sort());
    expect(copiesIn(b, moved).map((c) => c.ip).sort()).toEqual([sourceIp(SERVICES.indexOf(moved)), MOVED_IP].sort());
  }, 150_000);

  it('the survivors: every shard has both as replicas, every copy is published by 2 connections, still no beats', async () => {
    showLogsOnFailure();
    const snap = await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment of the 2 survivors' });
    const survivors = cluster.liveIds();
    expect(survivors).not.toContain(victim.id);
    for (const item of snap.shards.items) expect([...item.replicas].sort()).toEqual(survivors);
    await waitUntil(() => everyCopyPublishedBy(2, { [moved]: [MOVED_IP] }), { timeoutMs: TIMEOUT, message: 'every copy published by both survivors' });
    expect(holders(b)).toEqual(survivors);
    expect(b.grpc?.stats().publishSets).toBe(SERVICES.length * 2);
    expect(tapB.requests).toEqual([]);
    expect(SERVICES.flatMap((s) => copiesIn(b, s)).filter((c) => c.beats !== 0)).toEqual([]);
  }, 120_000);
});
