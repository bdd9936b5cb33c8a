import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { createLogger, silentLogger } from '../../src/log.js';
import { MARK_TASK } from '../../src/model/types.js';
import { startNode, type NodeOptions, type RegsyncNode } from '../../src/node.js';
import { startRegistry, type RegistryOptions, type RunningRegistry, type StoredInstance } from '../../src/registry/index.js';
import type { InstanceInput } from '../../src/registry/naming-store.js';
import { TestGrpcClient, wireHost } from './grpc-client.js';
import { formOf } from './http.js';
import { startRedis, type RedisServer } from './redis.js';

/** Shared state of an end-to-end sync test: real Redis, embedded registries, a regsync node. */
export interface SyncFixture {
  redis: RedisServer;
  registries: Map<string, RunningRegistry>;
  node: RegsyncNode | undefined;
  prefix: string;
}

/** Starts a real redis-server and a (not yet started) set of registries. */
export async function startFixture(): Promise<SyncFixture> {
  return { redis: await startRedis(), registries: new Map(), node: undefined, prefix: `t${randomUUID().slice(0, 8)}` };
}

export async function addRegistry(fx: SyncFixture, id: string, options: RegistryOptions = {}): Promise<RunningRegistry> {
  const registry = await startRegistry({ port: 0, ...options });
  fx.registries.set(id, registry);
  return registry;
}

/** Silent, unless REGSYNC_TEST_LOG names a level (debugging a failing test). */
export function testLogger(): Logger {
  const level = process.env.REGSYNC_TEST_LOG;
  return level ? createLogger(level as 'debug') : silentLogger();
}

/** Starts regsync (API + worker) in-process on the fixture's Redis. */
export async function startSync(fx: SyncFixture, logger: Logger = testLogger(), extra: Partial<NodeOptions> = {}): Promise<RegsyncNode> {
  fx.node = await startNode({ redisUrl: fx.redis.url, prefix: fx.prefix, listen: { host: '127.0.0.1', port: 0 }, logger, confirmEmptyMs: 1_000, ...extra });
  return fx.node;
}

export async function stopFixture(fx: SyncFixture): Promise<void> {
  await fx.node?.close();
  await Promise.all([...fx.registries.values()].map((r) => r.close()));
  await fx.redis.cleanup();
}

/** Calls the REST API of `url`; answers status and parsed body. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read API answers loosely
export async function api(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${url}${path}`, {
    method,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? undefined : JSON.parse(text) };
}

/** Registers a Nacos cluster for each registry of the fixture, each with `options` (none by default). */
export async function defineClusters(url: string, fx: SyncFixture, options: Record<string, unknown> = {}): Promise<void> {
  for (const [id, registry] of fx.registries) {
    const res = await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [registry.endpoint], ...(Object.keys(options).length > 0 ? { options } : {}) });
    if (res.status !== 201) throw new Error(`cannot define cluster ${id}: ${JSON.stringify(res.body)}`);
  }
}

/**
 * Registers a Nacos cluster for each registry of the fixture that speaks gRPC to it: `apiVersion`
 * (default `grpc`) and the registry's real gRPC port (a free one, not HTTP + 1000); `extra` adds
 * fields to every definition (credentials) and `options` to every cluster's options.
 */
export async function defineGrpcClusters(
  url: string,
  fx: SyncFixture,
  extra: Record<string, unknown> = {},
  options: Record<string, unknown> = {},
): Promise<void> {
  for (const [id, registry] of fx.registries) {
    const body = { id, kind: 'nacos', endpoints: [registry.endpoint], options: { apiVersion: 'grpc', grpcPort: registry.grpcPort, ...options }, ...extra };
    const res = await api(url, 'POST', '/api/v1/clusters', body);
    if (res.status !== 201) throw new Error(`cannot define cluster ${id}: ${JSON.stringify(res.body)}`);
  }
}

export async function defineTask(url: string, id: string, source: string, destination: string, service: string, extra: Record<string, unknown> = {}): Promise<void> {
  const res = await api(url, 'POST', '/api/v1/tasks', { id, source, destination, service, ...extra });
  if (res.status !== 201) throw new Error(`cannot define task ${id}: ${JSON.stringify(res.body)}`);
}

/** Instances of a service in a registry (public namespace, default group). */
export function instancesIn(registry: RunningRegistry, service: string): StoredInstance[] {
  return [...(registry.store.getService('public', 'DEFAULT_GROUP', service)?.instances.values() ?? [])];
}

export function copiesIn(registry: RunningRegistry, service: string): StoredInstance[] {
  return instancesIn(registry, service).filter((i) => i.metadata[MARK_TASK] !== undefined);
}

export function nativesIn(registry: RunningRegistry, service: string): StoredInstance[] {
  return instancesIn(registry, service).filter((i) => i.metadata[MARK_TASK] === undefined);
}

/**
 * An application instance registered over HTTP and kept alive with full beats (so that a
 * restarted registry re-creates it, as with the real SDKs), until `stop()`.
 */
export interface NativeInstance {
  stop(): void;
  deregister(): Promise<void>;
}

export async function registerNative(
  registry: () => RunningRegistry,
  service: string,
  ip: string,
  port: number,
  metadata: Record<string, string> = {},
  beatEveryMs = 300,
): Promise<NativeInstance> {
  const params = { serviceName: service, ip, port, metadata: JSON.stringify(metadata) };
  const res = await fetch(`${registry().url}/nacos/v1/ns/instance?${formOf(params)}`, { method: 'POST' });
  if ((await res.text()) !== 'ok') throw new Error('register failed');
  const beat = JSON.stringify({ serviceName: `DEFAULT_GROUP@@${service}`, ip, port, cluster: 'DEFAULT', weight: 1, metadata, scheduled: false });
  const timer = setInterval(() => {
    void fetch(`${registry().url}/nacos/v1/ns/instance/beat?${formOf({ serviceName: `DEFAULT_GROUP@@${service}`, beat })}`, { method: 'PUT' })
      .then((r) => r.text())
      .catch(() => {});
  }, beatEveryMs);
  return {
    stop: () => clearInterval(timer),
    async deregister() {
      clearInterval(timer);
      await fetch(`${registry().url}/nacos/v1/ns/instance?${formOf({ serviceName: service, ip, port })}`, { method: 'DELETE' });
    },
  };
}

/** A persistent instance as the embedded store takes it (no beats needed); the address is made up. */
export function persistent(ip: string, metadata: Record<string, string> = {}): InstanceInput {
  return { ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata };
}

/** Counts the changes a registry makes visible (each is at least one write). */
export function countChanges(registry: RunningRegistry): { count: () => number } {
  let n = 0;
  registry.store.on('change', () => (n += 1));
  return { count: () => n };
}

/**
 * An application instance published over gRPC as the Nacos 2.x SDK does (`InstanceRequest`
 * registerInstance on its own connection): it lives while `client` stays connected.
 */
export interface PublishedNative {
  client: TestGrpcClient;
  /** Closes the connection: the registry drops the instance at once. */
  close(): void;
}

export async function publishNative(
  registry: RunningRegistry,
  service: string,
  ip: string,
  port: number,
  metadata: Record<string, string> = {},
  headers?: Record<string, string>,
): Promise<PublishedNative> {
  if (!registry.grpcEndpoint) throw new Error('the registry serves no gRPC');
  const client = await TestGrpcClient.connect(registry.grpcEndpoint, headers ? { headers } : {});
  const answer = await client.naming('InstanceRequest', service, { type: 'registerInstance', instance: wireHost(ip, port, { metadata }) });
  if (answer.body.success !== true) {
    client.close();
    throw new Error(`publish failed: ${JSON.stringify(answer.body)}`);
  }
  return { client, close: () => client.close() };
}
