import type { ApplyPlan, BeatResult, Instance, RegistryAdapter, ServiceKey, Unsubscribe, WatchEvent } from '../../src/model/index.js';
import { instanceId, serviceKeyString } from '../../src/model/index.js';

/**
 * A registry in memory behind the adapter contract, for unit tests of the engine: services hold
 * instances by address, `apply` writes them, and a test can make reads or writes fail (`failReads`,
 * `failWrites`, `refuseWrites`) or look at every call made (`calls`). Watches fire on `touch`.
 */
export class FakeAdapter implements RegistryAdapter {
  readonly services = new Map<string, Map<string, Instance>>();
  readonly calls: string[] = [];
  /** When set, `listInstances` rejects with it. */
  failReads: Error | undefined;
  /** When set, `apply` rejects with it (after recording the call). */
  failWrites: Error | undefined;

  /** What a test says the last read skipped (see `RegistryAdapter.readIssues`). */
  readIssues?: (service: ServiceKey) => string[];
  private readonly watchers = new Map<string, Set<(event?: WatchEvent) => void>>();

  constructor(
    readonly clusterId: string,
    /** How often copies written here must be beaten (what `heartbeatIntervalMs` asks of the engine). */
    readonly heartbeatIntervalMs = 5_000,
  ) {}

  /** Sets a service's instances (as another client registering there would). */
  put(service: ServiceKey, instances: readonly Instance[]): void {
    this.services.set(serviceKeyString(service), new Map(instances.map((i) => [instanceId(i), structuredClone(i)])));
  }

  /** A service's instances, sorted by address. */
  instances(service: ServiceKey): Instance[] {
    return [...(this.services.get(serviceKeyString(service))?.values() ?? [])].sort((a, b) => instanceId(a).localeCompare(instanceId(b)));
  }

  /** Tells the watchers of a service that it changed. */
  touch(service: ServiceKey): void {
    for (const onChange of this.watchers.get(serviceKeyString(service)) ?? []) onChange();
  }

  async listServices(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    this.calls.push(`listServices ${scope.namespace}/${scope.group}`);
    if (this.failReads) throw this.failReads;
    return [...this.services.keys()]
      .map((key) => {
        const [namespace, group, name] = key.split('/') as [string, string, string];
        return { namespace, group, name };
      })
      .filter((s) => (scope.namespace === '*' || s.namespace === scope.namespace) && (scope.group === '*' || s.group === scope.group));
  }

  async listInstances(service: ServiceKey): Promise<Instance[]> {
    this.calls.push(`listInstances ${serviceKeyString(service)}`);
    if (this.failReads) throw this.failReads;
    return this.instances(service).map((i) => structuredClone(i));
  }

  watch(service: ServiceKey, onChange: (event?: WatchEvent) => void): Unsubscribe {
    const key = serviceKeyString(service);
    let set = this.watchers.get(key);
    if (!set) this.watchers.set(key, (set = new Set()));
    set.add(onChange);
    return () => set.delete(onChange);
  }

  async apply(service: ServiceKey, plan: ApplyPlan): Promise<void> {
    this.calls.push(`apply ${serviceKeyString(service)} +${plan.upsert.length} -${plan.remove.length}`);
    if (this.failWrites) throw this.failWrites;
    const key = serviceKeyString(service);
    const held = this.services.get(key) ?? new Map<string, Instance>();
    for (const i of plan.remove) held.delete(instanceId(i));
    for (const i of plan.upsert) held.set(instanceId(i), structuredClone(i));
    this.services.set(key, held);
  }

  async heartbeat(service: ServiceKey, instance: Instance): Promise<BeatResult> {
    return this.services.get(serviceKeyString(service))?.has(instanceId(instance)) ? 'ok' : 'unknown';
  }

  async close(): Promise<void> {
    this.watchers.clear();
  }
}

/** A healthy, enabled, persistent instance at `ip:8080` with optional metadata. */
export function instance(ip: string, metadata: Record<string, string> = {}): Instance {
  return { ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, cluster: 'DEFAULT', metadata };
}
