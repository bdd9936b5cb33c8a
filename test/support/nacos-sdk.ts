import { createRequire } from 'node:module';

/** An instance as the official Nacos Node SDK reads and writes it. */
export interface SdkInstance {
  ip: string;
  port: number;
  weight?: number;
  healthy?: boolean;
  enabled?: boolean;
  ephemeral?: boolean;
  clusterName?: string;
  serviceName?: string;
  instanceId?: string;
  metadata?: Record<string, string>;
}

/** The part of the SDK's `NacosNamingClient` the tests use. */
export interface SdkNamingClient {
  ready(): Promise<void>;
  registerInstance(serviceName: string, instance: SdkInstance, groupName?: string): Promise<void>;
  deregisterInstance(serviceName: string, instance: SdkInstance, groupName?: string): Promise<void>;
  getAllInstances(serviceName: string, groupName?: string, clusters?: string, subscribe?: boolean): Promise<SdkInstance[]>;
  subscribe(info: { serviceName: string; groupName?: string; clusters?: string }, listener: (hosts: SdkInstance[]) => void): void;
  unSubscribe(info: { serviceName: string; groupName?: string }, listener?: (hosts: SdkInstance[]) => void): void;
  close(): Promise<void>;
}

const quiet = { info() {}, warn() {}, error() {}, debug() {}, log() {} };

/** Creates the official SDK client (npm `nacos`) against `serverList` (`host:port`), quiet logs. */
export async function createSdkClient(
  serverList: string,
  options: { namespace?: string; username?: string; password?: string } = {},
): Promise<SdkNamingClient> {
  const require = createRequire(import.meta.url);
  const { NacosNamingClient } = require('nacos') as {
    NacosNamingClient: new (config: Record<string, unknown>) => SdkNamingClient & { on(e: string, f: (err: Error) => void): void };
  };
  const client = new NacosNamingClient({ logger: quiet, serverList, ...options });
  // The SDK reports background poll failures as 'error' events; a test asserts on results instead.
  client.on('error', () => {});
  await client.ready();
  return client;
}
