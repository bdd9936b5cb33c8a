import { performance } from 'node:perf_hooks';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { TestGrpcClient, wireHost } from '../test/support/grpc-client.js';
import { copyLikeMetadata, GROUP, ipOf, NAMESPACE, PORT, serviceName } from './instances.js';

/*
 * A Nacos 2.x SDK as a load generator: one gRPC connection (test/support's raw client) that publishes
 * each service's ephemeral instances with one BatchInstanceRequest, as Spring Cloud and Dubbo apps on
 * Nacos 2.x do (connection-bound: they live as long as the connection, no beats).
 */

/** Ephemeral instances of a service as the Java SDK sends them; copy-like metadata when `copyLike`. */
export function batchHosts(service: string, first: number, count: number, copyLike = false): Array<Record<string, unknown>> {
  return Array.from({ length: count }, (_, i) =>
    wireHost(ipOf(first + i), PORT, { metadata: copyLike ? copyLikeMetadata(service) : { app: service, version: '1.0.0' } }),
  );
}

/**
 * Publishes `services` x `instances` ephemeral instances over `client` (`svc-00000`.. in `namespace`),
 * `concurrency` BatchInstanceRequests in flight; rejects on the first refusal.
 */
export async function publishServices(
  client: TestGrpcClient,
  opts: { services: number; instances: number; namespace?: string; concurrency?: number; copyLike?: boolean; prefix?: string; ipBase?: number },
): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < opts.services) {
      const s = next;
      next += 1;
      const name = `${opts.prefix ?? ''}${serviceName(s)}`;
      const answer = await client.naming(
        'BatchInstanceRequest',
        name,
        { type: 'batchRegisterInstance', instances: batchHosts(name, (opts.ipBase ?? 0) + s * opts.instances, opts.instances, opts.copyLike) },
        { namespace: opts.namespace ?? NAMESPACE, groupName: GROUP },
      );
      if (answer.body.resultCode !== 200) throw new Error(`BatchInstanceRequest ${name}: ${JSON.stringify(answer.body).slice(0, 300)}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency ?? 32, opts.services) }, lane));
}

/** What the raw batch-publish generator is asked to do (runs in a worker thread). */
export interface GrpcPublishInput {
  /** `127.0.0.1:<grpcPort>` of a fresh registry. */
  address: string;
  services: number;
  instances: number;
  concurrency: number;
  /** Services published (elsewhere) before the measured ones, to warm both sides up. */
  warmupServices: number;
}

export interface GrpcPublishResult {
  elapsedMs: number;
  /** Instances in the measured batches. */
  published: number;
  generatorLoop: number;
}

async function runPublishLoad(input: GrpcPublishInput, onMeasureStart: () => void): Promise<GrpcPublishResult> {
  const client = await TestGrpcClient.connect(input.address);
  try {
    await publishServices(client, { services: input.warmupServices, instances: input.instances, concurrency: input.concurrency, copyLike: true, prefix: 'warm-', ipBase: input.services * input.instances });
    onMeasureStart();
    const elu = performance.eventLoopUtilization();
    const started = performance.now();
    await publishServices(client, { services: input.services, instances: input.instances, concurrency: input.concurrency, copyLike: true });
    const elapsedMs = performance.now() - started;
    return { elapsedMs, published: input.services * input.instances, generatorLoop: performance.eventLoopUtilization(elu).utilization };
  } finally {
    client.close();
  }
}

if (!isMainThread && parentPort) {
  const port = parentPort;
  runPublishLoad(workerData as GrpcPublishInput, () => port.postMessage({ measuring: true })).then(
    (result) => port.postMessage({ result }),
    (err: unknown) => port.postMessage({ error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
  );
}
