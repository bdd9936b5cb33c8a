import { createSocket, type Socket } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import * as dnsPacket from 'dns-packet';
import { nacosKind } from '../adapters/nacos/index.js';
import { DnsCatalogue } from '../src/dns/catalogue.js';
import { DnsFeed } from '../src/dns/feed.js';
import { silentLogger } from '../src/log.js';
import { startRegistry } from '../src/registry/index.js';
import type { DnsServerWorkerInput } from './dns-server-worker.js';
import { percentiles, round, type Percentiles } from './stats.js';

/** One load run against a UDP server: answered queries per second and their round trips. */
export interface DnsLoadRun {
  queriesPerSecond: number;
  answered: number;
  lost: number;
  latencyMs: Percentiles;
}

/** What the DNS phase measures. */
export interface DnsBenchResult {
  names: number;
  indexedNames: number;
  concurrency: number;
  seconds: number;
  /** regsync's DNS server, in a thread of its own (one core). */
  dns: DnsLoadRun;
  /** A bare UDP echo in the same setup: the loopback ceiling. */
  echo: DnsLoadRun;
  /** From a change in a registry (embedded Nacos, gRPC push after Nacos' 500 ms merge window) to the DNS index answering it, ms. */
  changeMs: Percentiles;
  /** The same with a 20 ms merge window: what the push path and the feed add. */
  changeMsShortWindow: Percentiles;
}

/**
 * The DNS phase: regsync's DNS server with `names` services indexed (3 instances each) answering
 * A queries for random names from a load generator in this thread, `concurrency` in flight over
 * UDP, for `seconds`; the same load against a bare UDP echo server (the ceiling of this setup);
 * and `changes` registry changes timed until the index serves them (a Nacos gRPC push feeding
 * the catalogue through the DNS feed, as `regsync dns` runs it).
 */
export async function measureDns(opts: { names: number; concurrency: number; seconds: number; changes: number }, progress: (line: string) => void): Promise<DnsBenchResult> {
  const queries = Array.from({ length: Math.min(opts.names, 10_000) }, (_, i) =>
    dnsPacket.encode({ type: 'query', id: 0, questions: [{ type: 'A', name: `svc-${(i * 7919) % opts.names}.svc.regsync.internal` }] }),
  );
  progress(`(D) DNS server with ${opts.names.toLocaleString('en-US')} services: ${opts.seconds} s at ${opts.concurrency} in flight`);
  const dnsServer = await serverThread({ mode: 'dns', names: opts.names, instancesPerName: 3 });
  let dns: DnsLoadRun;
  try {
    dns = await load(dnsServer.port, queries, opts.concurrency, opts.seconds);
  } finally {
    await dnsServer.worker.terminate();
  }
  progress(`(D) ${Math.round(dns.queriesPerSecond).toLocaleString('en-US')} queries/s, p99 ${dns.latencyMs.p99.toFixed(2)} ms; now a bare UDP echo`);
  const echoServer = await serverThread({ mode: 'echo', names: 0, instancesPerName: 0 });
  let echo: DnsLoadRun;
  try {
    echo = await load(echoServer.port, queries, opts.concurrency, opts.seconds);
  } finally {
    await echoServer.worker.terminate();
  }
  progress(`(D) echo ${Math.round(echo.queriesPerSecond).toLocaleString('en-US')} round trips/s; now ${opts.changes} registry changes`);
  const changeMs = await measureChanges(opts.changes, 500);
  const changeMsShortWindow = await measureChanges(opts.changes, 20);
  return { names: opts.names, indexedNames: dnsServer.names ?? 0, concurrency: opts.concurrency, seconds: opts.seconds, dns, echo, changeMs, changeMsShortWindow };
}

async function serverThread(input: DnsServerWorkerInput): Promise<{ worker: Worker; port: number; names?: number }> {
  const worker = new Worker(new URL('./dns-server-worker.js', import.meta.url), { workerData: input });
  const ready = await new Promise<{ port: number; names?: number }>((resolve, reject) => {
    worker.once('message', (m: { port?: number; names?: number; error?: string }) => (m.port ? resolve({ port: m.port, names: m.names }) : reject(new Error(`DNS bench server failed: ${m.error}`))));
    worker.once('error', reject);
  });
  return { worker, ...ready };
}

/** `concurrency` queries in flight over one socket each, for `seconds`; a query unanswered for 1 s counts as lost and is replaced. */
async function load(port: number, queries: Buffer[], concurrency: number, seconds: number): Promise<DnsLoadRun> {
  const latencies: number[] = [];
  let answered = 0;
  let lost = 0;
  let next = 0;
  let measuring = false;
  const sockets: Socket[] = [];
  const warmupMs = 500;
  const runs = Array.from({ length: concurrency }, async () => {
    const socket = createSocket('udp4');
    sockets.push(socket);
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    let id = 0;
    for (;;) {
      if (stopped) return;
      const query = Buffer.from(queries[next++ % queries.length] as Buffer);
      id = (id + 1) & 0xffff;
      query.writeUInt16BE(id, 0);
      const sent = performance.now();
      const ok = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          socket.off('message', onMessage);
          resolve(false);
        }, 1_000);
        const onMessage = (reply: Buffer) => {
          if (reply.readUInt16BE(0) !== id) return;
          clearTimeout(timer);
          socket.off('message', onMessage);
          resolve(true);
        };
        socket.on('message', onMessage);
        socket.send(query, port, '127.0.0.1');
      });
      if (!measuring) continue;
      if (ok) {
        answered += 1;
        latencies.push(performance.now() - sent);
      } else lost += 1;
    }
  });
  let stopped = false;
  await new Promise((r) => setTimeout(r, warmupMs));
  measuring = true;
  const started = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  measuring = false;
  const elapsed = (performance.now() - started) / 1000;
  stopped = true;
  await Promise.all(runs);
  for (const s of sockets) s.close();
  return { queriesPerSecond: answered / elapsed, answered, lost, latencyMs: roundPercentiles(percentiles(latencies)) };
}

/** Changes in an embedded registry until the feed's catalogue holds them: register a new address, wait for it in the index. */
async function measureChanges(changes: number, pushMergeWindowMs: number): Promise<Percentiles> {
  const logger = silentLogger();
  const registry = await startRegistry({ port: 0, logger, grpc: { pushMergeWindowMs } });
  const catalogue = new DnsCatalogue({ zone: 'regsync.internal' });
  const spec = { id: 'bench', kind: 'nacos', endpoints: [registry.endpoint], labels: {}, options: { apiVersion: 'grpc', grpcPort: registry.grpcPort } };
  registry.store.register('public', 'DEFAULT_GROUP', 'changing', { ip: '10.200.0.1', port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {} });
  const feed = new DnsFeed({ catalogue, clusters: async () => [spec], adapter: (s) => nacosKind.create(s, { logger }), logger });
  const key = { namespace: 'public', group: 'DEFAULT_GROUP', name: 'changing' };
  const times: number[] = [];
  try {
    await feed.start();
    for (let i = 0; i < changes; i++) {
      const ip = `10.201.${i >> 8}.${i & 255}`;
      const started = performance.now();
      registry.store.register('public', 'DEFAULT_GROUP', 'changing', { ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {} });
      while (!catalogue.service(key)?.instances.some((x) => x.ip === ip)) {
        if (performance.now() - started > 10_000) throw new Error(`change ${i} not in the DNS index after 10 s`);
        await new Promise((r) => setImmediate(r));
      }
      times.push(performance.now() - started);
    }
  } finally {
    await feed.close();
    await registry.close();
  }
  return roundPercentiles(percentiles(times));
}

function roundPercentiles(p: Percentiles): Percentiles {
  return { count: p.count, min: round(p.min, 3), p50: round(p.p50, 3), p90: round(p.p90, 3), p99: round(p.p99, 3), max: round(p.max, 3), mean: round(p.mean, 3) };
}
