import { performance } from 'node:perf_hooks';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { TestGrpcClient } from '../test/support/grpc-client.js';
import { batchHosts } from './grpc-load.js';
import { GROUP, NAMESPACE } from './instances.js';
import { wallNow } from './scale-registry.js';

/*
 * The scale phase's load generator in a worker thread: one Nacos 2.x SDK connection to registry A
 * that publishes each service's ephemeral instances with one BatchInstanceRequest (connection-bound:
 * they live as long as the connection, which stays open until the phase ends).
 */

export interface ScaleLoadInput {
  address: string;
}

type Request =
  | { op: 'publish'; names: string[]; instances: number; ipBase: number; concurrency: number }
  | { op: 'publishOne'; name: string; instances: number; ipBase: number };

/** Names `prefix` + 6 digits: sorted names keep the registry's service list in creation order. */
export function scaleServiceName(prefix: string, index: number): string {
  return `${prefix}${String(index).padStart(6, '0')}`;
}

async function serve(input: ScaleLoadInput): Promise<void> {
  const port = parentPort as NonNullable<typeof parentPort>;
  const client = await TestGrpcClient.connect(input.address);
  const publish = async (name: string, first: number, instances: number) => {
    const answer = await client.naming('BatchInstanceRequest', name, { type: 'batchRegisterInstance', instances: batchHosts(name, first, instances) }, { namespace: NAMESPACE, groupName: GROUP });
    if (answer.body.resultCode !== 200) throw new Error(`BatchInstanceRequest ${name}: ${JSON.stringify(answer.body).slice(0, 300)}`);
  };
  const handle = async (req: Request): Promise<unknown> => {
    if (req.op === 'publishOne') {
      const sentAt = wallNow();
      await publish(req.name, req.ipBase, req.instances);
      return { sentAt, answeredAt: wallNow() };
    }
    let next = 0;
    let done = 0;
    const started = performance.now();
    const ticker = setInterval(() => port.postMessage({ progress: done }), 1_000);
    try {
      const lane = async (): Promise<void> => {
        while (next < req.names.length) {
          const k = next;
          next += 1;
          await publish(req.names[k] as string, req.ipBase + k * req.instances, req.instances);
          done += 1;
        }
      };
      await Promise.all(Array.from({ length: Math.min(req.concurrency, req.names.length) }, lane));
    } finally {
      clearInterval(ticker);
    }
    return { elapsedMs: performance.now() - started, generatorLoop: performance.eventLoopUtilization().utilization };
  };
  port.on('message', (msg: { id: number; req: Request } | { close: true }) => {
    if ('close' in msg) {
      client.close();
      port.postMessage({ closed: true });
      return;
    }
    handle(msg.req).then(
      (result) => port.postMessage({ id: msg.id, result }),
      (err: unknown) => port.postMessage({ id: msg.id, error: err instanceof Error ? err.message : String(err) }),
    );
  });
  port.postMessage({ ready: true });
}

if (!isMainThread && parentPort && (workerData as { scaleLoad?: ScaleLoadInput } | undefined)?.scaleLoad) {
  serve((workerData as { scaleLoad: ScaleLoadInput }).scaleLoad).catch((err: unknown) => {
    parentPort?.postMessage({ failed: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  });
}

/** The main thread's handle on the load generator. */
export class ScaleLoad {
  private next = 0;
  private readonly calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  /** Services published so far by the running `publish` (reported once a second). */
  progress = 0;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (msg: { id?: number; result?: unknown; error?: string; progress?: number }) => {
      if (msg.progress !== undefined) this.progress = msg.progress;
      if (msg.id === undefined) return;
      const call = this.calls.get(msg.id);
      this.calls.delete(msg.id);
      if (msg.error !== undefined) call?.reject(new Error(`load generator: ${msg.error}`));
      else call?.resolve(msg.result);
    });
    worker.on('error', (err) => {
      for (const c of this.calls.values()) c.reject(err);
      this.calls.clear();
    });
  }

  static async start(address: string): Promise<ScaleLoad> {
    const worker = new Worker(new URL('./scale-load.js', import.meta.url), { workerData: { scaleLoad: { address } } });
    await new Promise<void>((resolve, reject) => {
      worker.on('message', (msg: { ready?: true; failed?: string }) => {
        if (msg.ready) resolve();
        else if (msg.failed) reject(new Error(`load generator: ${msg.failed}`));
      });
      worker.once('error', reject);
    });
    return new ScaleLoad(worker);
  }

  private call<T>(req: Request): Promise<T> {
    const id = (this.next += 1);
    return new Promise<T>((resolve, reject) => {
      this.calls.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.worker.postMessage({ id, req });
    });
  }

  /** Publishes `names`, `instances` each (addresses from `ipBase` on), `concurrency` requests in flight. */
  publish(names: string[], instances: number, ipBase: number, concurrency: number): Promise<{ elapsedMs: number; generatorLoop: number }> {
    this.progress = 0;
    return this.call({ op: 'publish', names, instances, ipBase, concurrency });
  }

  /** Publishes one service; answers when the request was sent and answered (wall clock). */
  publishOne(name: string, instances: number, ipBase: number): Promise<{ sentAt: number; answeredAt: number }> {
    return this.call({ op: 'publishOne', name, instances, ipBase });
  }

  async close(): Promise<void> {
    this.worker.postMessage({ close: true });
    await new Promise((resolve) => setTimeout(resolve, 100).unref());
    await this.worker.terminate();
  }
}
