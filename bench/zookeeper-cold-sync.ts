import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { createClient, CreateMode, type Client } from 'node-zookeeper-client';
import { MARK_TASK } from '../src/model/types.js';
import type { RunningRegistry } from '../src/registry/index.js';
import { startZooKeeper } from '../test/support/zookeeper.js';
import { callApi } from './regsync.js';

/** Result of measurement 4: a cold sync of Dubbo providers from ZooKeeper into Nacos. */
export interface ZooKeeperColdSyncResult {
  interfaces: number;
  providersPerInterface: number;
  expected: number;
  reached: number;
  /** From the task's creation until B held every copy. */
  elapsedMs: number;
  copiesPerSecond: number;
  timedOut: boolean;
}

function call<T>(f: (cb: (err: unknown, value?: T) => void) => void): Promise<T | undefined> {
  return new Promise((resolve, reject) => f((err, value) => (err ? reject(err) : resolve(value))));
}

/** Creates `interfaces` x `providers` ephemeral Dubbo provider nodes (made-up addresses, never contacted). */
async function seed(client: Client, interfaces: number, providers: number): Promise<void> {
  const batch = 200;
  for (let start = 0; start < interfaces; start += batch) {
    await Promise.all(
      Array.from({ length: Math.min(batch, interfaces - start) }, async (_, k) => {
        const i = start + k;
        const iface = `com.bench.Service${i}`;
        const dir = `/dubbo/${encodeURIComponent(iface)}/providers`;
        await call((cb) => client.mkdirp(dir, (err) => cb(err)));
        for (let p = 0; p < providers; p += 1) {
          const n = i * providers + p;
          const url = `dubbo://10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}:20880/${iface}?anyhost=true&application=bench&dubbo=2.0.2&interface=${iface}&methods=m&side=provider`;
          await call((cb) => client.create(`${dir}/${encodeURIComponent(url)}`, Buffer.alloc(0), CreateMode.EPHEMERAL, (err) => cb(err)));
        }
      }),
    );
  }
}

function copiesIn(b: RunningRegistry, taskId: string): number {
  let n = 0;
  for (const s of b.store.listServices('public', 'DEFAULT_GROUP')) {
    for (const i of s.instances.values()) if (i.metadata[MARK_TASK] === taskId) n += 1;
  }
  return n;
}

/**
 * Measurement 4: `interfaces` x `providers` Dubbo providers in a real ZooKeeper, then one `*` task
 * ZooKeeper -> B; the time from the task's creation until B holds every copy.
 */
export async function measureZooKeeperColdSync(
  deps: { b: RunningRegistry; api: string; progress: (line: string) => void },
  params: { interfaces: number; providers: number },
  deadlineMs: number,
): Promise<ZooKeeperColdSyncResult> {
  const zk = await startZooKeeper();
  const client = createClient(zk.connectString, { sessionTimeout: 30_000 });
  try {
    client.connect();
    await new Promise<void>((resolve) => client.once('connected', () => resolve()));
    await seed(client, params.interfaces, params.providers);
    deps.progress(`(4) seeded ${params.interfaces * params.providers} provider nodes`);
    await callApi(deps.api, 'POST', '/api/v1/clusters', { id: 'zk', kind: 'zookeeper', endpoints: [zk.connectString], options: { layout: 'dubbo' } }, 201);
    const expected = params.interfaces * params.providers;
    const started = performance.now();
    await callApi(deps.api, 'POST', '/api/v1/tasks', { id: 'zk-b', source: 'zk', destination: 'b', service: '*' }, 201);
    let reached = copiesIn(deps.b, 'zk-b');
    while (reached < expected && performance.now() - started < deadlineMs) {
      await delay(50);
      reached = copiesIn(deps.b, 'zk-b');
    }
    const elapsedMs = performance.now() - started;
    await callApi(deps.api, 'POST', '/api/v1/tasks/zk-b/pause', undefined, 200);
    return {
      interfaces: params.interfaces,
      providersPerInterface: params.providers,
      expected,
      reached,
      elapsedMs,
      copiesPerSecond: (reached / elapsedMs) * 1000,
      timedOut: reached < expected,
    };
  } finally {
    client.close();
    await zk.cleanup();
  }
}
