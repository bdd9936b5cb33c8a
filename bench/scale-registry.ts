import { monitorEventLoopDelay, performance, type EventLoopUtilization } from 'node:perf_hooks';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { startRegistry, type GrpcServerStats, type RunningRegistry } from '../src/registry/index.js';
import type { ServiceChange } from '../src/registry/naming-store.js';
import { NAMESPACE } from './instances.js';
import { RequestCounter, type RequestCounts } from './request-counter.js';

/*
 * An embedded registry of the scale phase in a worker thread of its own: at 1,000,000 instances per
 * registry, A (publishes, pushes to every subscription) and B (every copy written) each keep one
 * event loop busy, and neither should delay the other or the bench's once-a-second sampling. The
 * thread counts what the phase needs where the store is (copies in `public`, copies that vanish,
 * when new services land) and answers the main thread's questions by message.
 *
 * Times crossing threads are wall-clock milliseconds: `performance.timeOrigin + performance.now()`.
 */

export const wallNow = (): number => performance.timeOrigin + performance.now();

/** What the main thread gives the thread at its start. */
export interface ScaleRegistryInput {
  name: string;
  /** The registries' push merge window (Nacos: 500 ms). */
  pushMergeWindowMs: number;
}

/** One sample of the registry's thread (since the previous `sample`). */
export interface RegistrySample {
  at: number;
  grpc: GrpcServerStats | undefined;
  /** Event-loop utilization and delay of the registry's thread since the previous sample (resolution subtracted). */
  loop: number;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  heapUsedMiB: number;
  /** Instances in namespace `public` (counted from the store's change events). */
  copies: number;
  services: number;
  /** The last time pushesSent was seen to grow (sampled every 250 ms), wall clock; undefined: never. */
  lastPushAt: number | undefined;
}

/** Copies that went missing after `armGaps`. */
export interface GapReport {
  armedAt: number;
  /** Instances removed from any service of `public` since then (sum of every decrease). */
  vanished: number;
  services: number;
  /** The first few, with when (ms after arming) and by how many. */
  examples: Array<{ service: string; ms: number; lost: number }>;
}

type Request =
  | { op: 'sample' }
  | { op: 'target'; copies: number }
  | { op: 'armGaps' }
  | { op: 'gaps' }
  | { op: 'watchNew'; names: string[]; instances: number }
  | { op: 'openRequests' }
  | { op: 'requests' };

type Event = { event: 'reached'; at: number; copies: number } | { event: 'landed'; name: string; at: number } | { event: 'firstCopy'; at: number };

const RESOLUTION_MS = 10;

/**
 * The registries' fuzzy-watch limit: Nacos' default (500 services per pattern) would send a `*`
 * task of this size back to list polling, as it does against a real Nacos left at that default.
 */
const FUZZY_WATCH_MAX_SERVICES = 10_000_000;

async function serve(input: ScaleRegistryInput): Promise<void> {
  const port = parentPort as NonNullable<typeof parentPort>;
  const registry: RunningRegistry = await startRegistry({ port: 0, grpc: { pushMergeWindowMs: input.pushMergeWindowMs, fuzzyWatchMaxServices: FUZZY_WATCH_MAX_SERVICES } });
  const requests = new RequestCounter(registry);
  const sizes = new Map<string, number>();
  let copies = 0;
  let target: number | undefined;
  let first = true;
  let gaps: GapReport | undefined;
  const lostBy = new Set<string>();
  const pendingNew = new Map<string, number>();
  const post = (e: Event) => port.postMessage(e);
  const sizeOf = (grouped: string) => {
    const at = grouped.indexOf('@@');
    return registry.store.getService(NAMESPACE, grouped.slice(0, at), grouped.slice(at + 2))?.instances.size ?? 0;
  };
  const onChange = (change: ServiceChange): void => {
    if (change.namespaceId !== NAMESPACE) return;
    const size = sizeOf(change.groupedName);
    const before = sizes.get(change.groupedName) ?? 0;
    if (size === before) return;
    copies += size - before;
    if (size === 0) sizes.delete(change.groupedName);
    else sizes.set(change.groupedName, size);
    if (first && copies > 0) {
      first = false;
      post({ event: 'firstCopy', at: wallNow() });
    }
    if (gaps && size < before) {
      gaps.vanished += before - size;
      lostBy.add(change.groupedName);
      gaps.services = lostBy.size;
      if (gaps.examples.length < 10) gaps.examples.push({ service: change.groupedName, ms: wallNow() - gaps.armedAt, lost: before - size });
    }
    if (target !== undefined && copies >= target) {
      post({ event: 'reached', at: wallNow(), copies });
      target = undefined;
    }
    if (pendingNew.size > 0) {
      const name = change.groupedName.slice(change.groupedName.indexOf('@@') + 2);
      const want = pendingNew.get(name);
      if (want !== undefined && size >= want) {
        pendingNew.delete(name);
        post({ event: 'landed', name, at: wallNow() });
      }
    }
  };
  registry.store.on('change', onChange);

  const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  delay.enable();
  let elu: EventLoopUtilization = performance.eventLoopUtilization();
  let lastPushes = 0;
  let lastPushAt: number | undefined;
  setInterval(() => {
    const sent = registry.grpc?.stats().pushesSent ?? 0;
    if (sent > lastPushes) lastPushAt = wallNow();
    lastPushes = sent;
  }, 250).unref();

  const handle = (req: Request): unknown => {
    switch (req.op) {
      case 'sample': {
        const now = performance.eventLoopUtilization();
        const late = (ns: number) => Math.max(0, ns / 1e6 - RESOLUTION_MS);
        const s: RegistrySample = {
          at: wallNow(),
          grpc: registry.grpc?.stats(),
          loop: performance.eventLoopUtilization(now, elu).utilization,
          loopDelayP99Ms: delay.count > 0 ? late(delay.percentile(99)) : 0,
          loopDelayMaxMs: delay.count > 0 ? late(delay.max) : 0,
          heapUsedMiB: process.memoryUsage().heapUsed / 2 ** 20,
          copies,
          services: sizes.size,
          lastPushAt,
        };
        elu = now;
        delay.reset();
        return s;
      }
      case 'target':
        if (copies >= req.copies) post({ event: 'reached', at: wallNow(), copies });
        else target = req.copies;
        return copies;
      case 'armGaps':
        gaps = { armedAt: wallNow(), vanished: 0, services: 0, examples: [] };
        lostBy.clear();
        return gaps.armedAt;
      case 'gaps':
        return gaps;
      case 'watchNew':
        for (const name of req.names) {
          const size = registry.store.getService(NAMESPACE, 'DEFAULT_GROUP', name)?.instances.size ?? 0;
          if (size >= req.instances) post({ event: 'landed', name, at: wallNow() });
          else pendingNew.set(name, req.instances);
        }
        return pendingNew.size;
      case 'openRequests':
        requests.open();
        return true;
      case 'requests':
        return requests.window();
    }
  };
  port.on('message', (msg: { id: number; req: Request } | { close: true }) => {
    if ('close' in msg) {
      registry.store.off('change', onChange);
      requests.close();
      void registry.close().then(() => port.postMessage({ closed: true }));
      return;
    }
    try {
      port.postMessage({ id: msg.id, result: handle(msg.req) });
    } catch (err) {
      port.postMessage({ id: msg.id, error: err instanceof Error ? err.message : String(err) });
    }
  });
  port.postMessage({ ready: { endpoint: registry.endpoint, grpcPort: registry.grpcPort, grpcEndpoint: registry.grpcEndpoint } });
}

if (!isMainThread && parentPort && (workerData as { scaleRegistry?: ScaleRegistryInput } | undefined)?.scaleRegistry) {
  serve((workerData as { scaleRegistry: ScaleRegistryInput }).scaleRegistry).catch((err: unknown) => {
    parentPort?.postMessage({ failed: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  });
}

/** The main thread's handle on a registry thread. */
export class ScaleRegistry {
  private next = 0;
  private readonly calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly listeners = new Set<(e: Event) => void>();

  private constructor(
    readonly name: string,
    private readonly worker: Worker,
    readonly endpoint: string,
    readonly grpcPort: number,
    readonly grpcEndpoint: string,
  ) {
    worker.on('message', (msg: { id?: number; result?: unknown; error?: string; event?: string }) => {
      if (msg.id !== undefined) {
        const call = this.calls.get(msg.id);
        this.calls.delete(msg.id);
        if (msg.error !== undefined) call?.reject(new Error(`registry ${name}: ${msg.error}`));
        else call?.resolve(msg.result);
      } else if (msg.event !== undefined) {
        for (const l of this.listeners) l(msg as Event);
      }
    });
    worker.on('error', (err) => {
      for (const c of this.calls.values()) c.reject(err);
      this.calls.clear();
    });
  }

  /** Starts registry `name` in a worker thread with room for a few GiB of instances. */
  static async start(input: ScaleRegistryInput): Promise<ScaleRegistry> {
    const worker = new Worker(new URL('./scale-registry.js', import.meta.url), {
      workerData: { scaleRegistry: input },
      resourceLimits: { maxOldGenerationSizeMb: 8_192 },
    });
    const ready = await new Promise<{ endpoint: string; grpcPort: number; grpcEndpoint: string }>((resolve, reject) => {
      worker.on('message', (msg: { ready?: { endpoint: string; grpcPort: number; grpcEndpoint: string }; failed?: string }) => {
        if (msg.ready) resolve(msg.ready);
        else if (msg.failed) reject(new Error(`registry ${input.name}: ${msg.failed}`));
      });
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`registry ${input.name} exited (${code}) before it was ready`)));
    });
    return new ScaleRegistry(input.name, worker, ready.endpoint, ready.grpcPort, ready.grpcEndpoint);
  }

  private call<T>(req: Request): Promise<T> {
    const id = (this.next += 1);
    return new Promise<T>((resolve, reject) => {
      this.calls.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.worker.postMessage({ id, req });
    });
  }

  sample(): Promise<RegistrySample> {
    return this.call({ op: 'sample' });
  }

  /** Resolves with the wall-clock time B first held `copies` copies in `public`, or undefined at `deadline` (wall clock). */
  async reached(copies: number, deadline: number): Promise<number | undefined> {
    let listener: ((e: Event) => void) | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<number | undefined>((resolve) => {
        listener = (e) => {
          if (e.event === 'reached') resolve(e.at);
        };
        this.listeners.add(listener);
        timer = setTimeout(() => resolve(undefined), Math.max(0, deadline - wallNow()));
        void this.call({ op: 'target', copies });
      });
    } finally {
      if (listener) this.listeners.delete(listener);
      if (timer) clearTimeout(timer);
    }
  }

  /** Calls `f` for each event of the thread until the returned function is called. */
  on(f: (e: Event) => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }

  armGaps(): Promise<number> {
    return this.call({ op: 'armGaps' });
  }

  gaps(): Promise<GapReport | undefined> {
    return this.call({ op: 'gaps' });
  }

  /** Reports `landed` once each service holds `instances` copies. */
  watchNew(names: string[], instances: number): Promise<number> {
    return this.call({ op: 'watchNew', names, instances });
  }

  openRequests(): Promise<boolean> {
    return this.call({ op: 'openRequests' });
  }

  /** HTTP requests since `openRequests`, by kind (gRPC requests are in the samples' `grpc.requests`). */
  requests(): Promise<RequestCounts> {
    return this.call({ op: 'requests' });
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => {
      this.worker.on('message', (msg: { closed?: true }) => {
        if (msg.closed) resolve();
      });
      setTimeout(resolve, 5_000).unref();
    });
    this.worker.postMessage({ close: true });
    await closed;
    await this.worker.terminate();
  }
}
