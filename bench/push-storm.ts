import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { pino } from 'pino';
import { startRegistry } from '../src/registry/index.js';
import { TestGrpcClient } from '../test/support/grpc-client.js';
import { startRedis } from '../test/support/redis.js';
import { ByteProxy } from './byte-proxy.js';
import { CopyCounter } from './cold-sync.js';
import { publishServices } from './grpc-load.js';
import { callApi, repoRoot, startRegsyncUp } from './regsync.js';

/*
 * Where the pushes after a cold sync over gRPC come from: registries A and B in this process (as the
 * bench's `rest` phase runs them), one `regsync up`, `services` x `instances` ephemeral instances in A,
 * one `*` task A->B. Every push A sends is counted from its debug log, per service, per attempt and per
 * connection; once a second it prints A's push counters and subscriptions, so that pushes after
 * convergence show whether they are first pushes of new subscriptions, pushes after a change, or
 * retries. Counts only: the machine may be shared.
 *
 * With `proxied`, regsync talks to A and B through the bench's byte-counting relays (as the `rest`
 * phase does), which adds to this process's load and to how late regsync's answers reach A.
 *
 *   node dist/bench/push-storm.js [services=10000] [instances=5] [seconds after convergence=40] [proxied]
 */

const services = Number(process.argv[2] ?? 10_000);
const instances = Number(process.argv[3] ?? 5);
const afterS = Number(process.argv[4] ?? 40);
const proxied = process.argv[5] === 'proxied';

interface PushLine {
  msg?: string;
  service?: string;
  attempt?: number;
  connectionId?: string;
}

const perService = new Map<string, number>();
const perAttempt = new Map<number, number>();
const perConnection = new Map<string, number>();
let pushesLogged = 0;
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.includes('"grpc push"')) continue;
      const entry = JSON.parse(line) as PushLine;
      pushesLogged += 1;
      perService.set(entry.service ?? '?', (perService.get(entry.service ?? '?') ?? 0) + 1);
      perAttempt.set(entry.attempt ?? 0, (perAttempt.get(entry.attempt ?? 0) ?? 0) + 1);
      perConnection.set(entry.connectionId ?? '?', (perConnection.get(entry.connectionId ?? '?') ?? 0) + 1);
    }
    done();
  },
});

async function main(): Promise<void> {
  const redis = await startRedis();
  const logger = pino({ level: 'debug' }, sink);
  const a = await startRegistry({ port: 0, logger });
  const b = await startRegistry({ port: 0 });
  const regsync = await startRegsyncUp({ redisUrl: redis.url, logDir: join(repoRoot(), 'dist', 'bench-logs') });
  const publisher = await TestGrpcClient.connect(a.grpcEndpoint as string);
  const proxies: ByteProxy[] = [];
  try {
    for (const [id, r] of [['a', a], ['b', b]] as const) {
      let endpoint = r.endpoint;
      let grpcPort = r.grpcPort as number;
      if (proxied) {
        const http = await ByteProxy.start(r.port);
        const grpc = await ByteProxy.start(grpcPort);
        proxies.push(http, grpc);
        endpoint = `127.0.0.1:${http.port}`;
        grpcPort = grpc.port;
      }
      await callApi(regsync.url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options: { apiVersion: 'grpc', grpcPort } }, 201);
    }
    await publishServices(publisher, { services, instances });
    const sentBefore = a.grpc?.stats().pushesSent ?? 0;
    const counter = new CopyCounter(b, services * instances);
    const t0 = performance.now();
    await callApi(regsync.url, 'POST', '/api/v1/tasks', { id: 'storm', source: 'a', destination: 'b', service: '*', options: { fullSyncIntervalMs: 600_000 } }, 201);
    let convergedAt: number | undefined;
    let last = { sent: sentBefore, retried: 0, logged: 0 };
    const stopAt = () => (convergedAt === undefined ? t0 + 600_000 : convergedAt + afterS * 1000);
    const connectionsSeen = new Set<string>();
    while (performance.now() < stopAt()) {
      await delay(1000);
      if (convergedAt === undefined && counter.total >= services * instances) convergedAt = performance.now();
      const st = a.grpc?.stats();
      for (const c of a.grpc?.connections() ?? []) connectionsSeen.add(c.id);
      const since = ((performance.now() - t0) / 1000).toFixed(0);
      const rel = convergedAt === undefined ? '' : ` (+${((performance.now() - convergedAt) / 1000).toFixed(0)} s after convergence)`;
      console.log(
        `t=${since}s${rel} copies=${counter.total} A: subs=${st?.subscriptions} conns=${st?.connections} sent+${(st?.pushesSent ?? 0) - last.sent} retried+${(st?.pushesRetried ?? 0) - last.retried} late=${st?.pushesLate} logged+${pushesLogged - last.logged} acked=${st?.pushesAcked} failed=${st?.pushesFailed} subscribes=${st?.requests.SubscribeServiceRequest ?? 0}`,
      );
      last = { sent: st?.pushesSent ?? 0, retried: st?.pushesRetried ?? 0, logged: pushesLogged };
    }
    counter.close();
    const histogram = new Map<number, number>();
    for (const n of perService.values()) histogram.set(n, (histogram.get(n) ?? 0) + 1);
    console.log(`converged after ${convergedAt === undefined ? 'never' : ((convergedAt - t0) / 1000).toFixed(1)} s`);
    console.log(`pushes logged: ${pushesLogged}; services pushed: ${perService.size}; connections pushed to: ${perConnection.size} (seen ${connectionsSeen.size})`);
    console.log(`pushes per attempt: ${JSON.stringify(Object.fromEntries(perAttempt))}`);
    console.log(`services by pushes received: ${JSON.stringify(Object.fromEntries([...histogram].sort((x, y) => x[0] - y[0])))}`);
  } finally {
    publisher.close();
    await regsync.stop();
    for (const p of proxies) await p.close();
    await a.close();
    await b.close();
    await redis.cleanup();
  }
}

await main();
