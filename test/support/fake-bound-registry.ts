import type { ApplyPlan, BeatResult, Instance, RegistryAdapter, ServiceKey, Unsubscribe } from '../../src/model/index.js';
import { instanceId, serviceKeyString } from '../../src/model/index.js';

/**
 * A connection-bound registry in memory, as Nacos 2.x/3.x holds ephemeral instances over gRPC: each
 * connection ({@link FakeBoundAdapter}, one per "process") holds one publish set per service, which
 * a publish replaces whole; the service shows the union of every live connection's set, where
 * byte-identical instances from several connections show once; a connection that dies
 * ({@link FakeBoundAdapter.kill}) takes its sets with it at once. Persistent instances are kept by
 * the registry itself, as an HTTP write would.
 */
export class BoundRegistry {
  readonly connections = new Set<FakeBoundAdapter>();
  readonly persistent = new Map<string, Map<string, Instance>>();

  constructor(readonly clusterId: string) {}

  /** A new connection to this registry (one process's adapter); `beatable`: its adapter has a `heartbeat` too. */
  connect(name: string, beatable = false): FakeBoundAdapter {
    const adapter = beatable ? new BeatableBoundAdapter(this, name) : new FakeBoundAdapter(this, name);
    this.connections.add(adapter);
    return adapter;
  }

  /** What a reader sees of a service: persistent instances, then every live connection's set, identical ones once. */
  instances(service: ServiceKey): Instance[] {
    const key = serviceKeyString(service);
    const shown = new Map<string, Instance>();
    for (const i of this.persistent.get(key)?.values() ?? []) shown.set(canonical(i), i);
    for (const connection of this.connections) for (const i of connection.held(key)) shown.set(canonical(i), i);
    return [...shown.values()].sort((a, b) => instanceId(a).localeCompare(instanceId(b)));
  }

  /** The addresses a reader sees, with repeats where non-identical instances share one. */
  addresses(service: ServiceKey): string[] {
    return this.instances(service).map(instanceId);
  }

  /** Every service name some connection or the registry holds instances of. */
  serviceKeys(): string[] {
    const keys = new Set(this.persistent.keys());
    for (const connection of this.connections) for (const key of connection.services()) keys.add(key);
    return [...keys];
  }
}

/**
 * One process's connection to a {@link BoundRegistry}, behind the adapter contract: `connectionBound`
 * answers true, `publish` keeps one share per owner and sends the merged set of a service only when
 * it differs from the one sent last (`requests` counts what was sent), and there is no `heartbeat`.
 */
export class FakeBoundAdapter implements RegistryAdapter {
  readonly clusterId: string;
  readonly calls: string[] = [];
  /** Publish requests sent to the registry (a set that changed). */
  requests = 0;
  /** When set, `publish` and `apply` reject with it (after recording the call). */
  failWrites: Error | undefined;
  private readonly shares = new Map<string, Map<string, Instance[]>>();
  /** The set the registry holds from this connection, per service. */
  private readonly sent = new Map<string, Instance[]>();
  private dead = false;

  constructor(
    readonly registry: BoundRegistry,
    readonly name: string,
  ) {
    this.clusterId = registry.clusterId;
  }

  /** What this connection holds of a service in the registry. */
  held(serviceKey: string): Instance[] {
    return this.dead ? [] : (this.sent.get(serviceKey) ?? []);
  }

  /** Services this connection holds a non-empty set of. */
  services(): string[] {
    return this.dead ? [] : [...this.sent].filter(([, set]) => set.length > 0).map(([key]) => key);
  }

  /** Owners whose share of a service is not empty (for assertions). */
  owners(service: ServiceKey): string[] {
    return [...(this.shares.get(serviceKeyString(service)) ?? [])].filter(([, set]) => set.length > 0).map(([owner]) => owner);
  }

  /** The connection drops, as when its process is killed with -9: the registry forgets its sets at once. */
  kill(): void {
    this.dead = true;
    this.registry.connections.delete(this);
  }

  async connectionBound(): Promise<boolean> {
    return true;
  }

  async listServices(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    this.alive();
    return this.registry
      .serviceKeys()
      .map((key) => {
        const [namespace, group, name] = key.split('/') as [string, string, string];
        return { namespace, group, name };
      })
      .filter((s) => (scope.namespace === '*' || s.namespace === scope.namespace) && (scope.group === '*' || s.group === scope.group));
  }

  async listInstances(service: ServiceKey): Promise<Instance[]> {
    this.alive();
    this.calls.push(`listInstances ${serviceKeyString(service)}`);
    return this.registry.instances(service).map((i) => structuredClone(i));
  }

  watch(): Unsubscribe {
    return () => undefined;
  }

  async apply(service: ServiceKey, plan: ApplyPlan): Promise<void> {
    this.alive();
    this.calls.push(`apply ${serviceKeyString(service)} +${plan.upsert.length} -${plan.remove.length}${plan.desired ? ` desired ${plan.desired.owner} ${plan.desired.instances.length}` : ''}`);
    if (this.failWrites) throw this.failWrites;
    const key = serviceKeyString(service);
    const held = this.registry.persistent.get(key) ?? new Map<string, Instance>();
    for (const i of plan.remove) if (!i.ephemeral) held.delete(instanceId(i));
    for (const i of plan.upsert) if (!i.ephemeral) held.set(instanceId(i), structuredClone(i));
    this.registry.persistent.set(key, held);
    if (plan.desired) this.share(key, plan.desired.owner, plan.desired.instances);
    else if (plan.upsert.some((i) => i.ephemeral) || plan.remove.some((i) => i.ephemeral)) throw new Error('ephemeral writes to a connection-bound registry need `desired`');
  }

  async publish(service: ServiceKey, owner: string, instances: readonly Instance[]): Promise<void> {
    this.alive();
    this.calls.push(`publish ${serviceKeyString(service)} ${owner} ${instances.length}`);
    if (this.failWrites) throw this.failWrites;
    this.share(serviceKeyString(service), owner, instances);
  }

  async close(): Promise<void> {
    this.kill();
  }

  /** Replaces an owner's share and sends the merged set when it differs from what the registry holds. */
  private share(key: string, owner: string, instances: readonly Instance[]): void {
    let shares = this.shares.get(key);
    if (!shares) this.shares.set(key, (shares = new Map()));
    const ephemeral = instances.filter((i) => i.ephemeral).map((i) => structuredClone(i));
    if (ephemeral.length > 0) shares.set(owner, ephemeral);
    else shares.delete(owner);
    const merged = new Map<string, Instance>();
    for (const set of shares.values()) for (const i of set) merged.set(canonical(i), i);
    const next = [...merged.values()];
    const before = this.sent.get(key) ?? [];
    if (sameSet(before, next)) return;
    this.requests += 1;
    if (next.length === 0) this.sent.delete(key);
    else this.sent.set(key, next);
  }

  private alive(): void {
    if (this.dead) throw new Error(`connection ${this.name} to ${this.clusterId} is closed`);
  }
}

/**
 * A connection whose adapter could beat as well (one adapter class for a registry's HTTP and gRPC
 * dialects): the engine must never call `heartbeat` on it; `beats` counts the calls.
 */
export class BeatableBoundAdapter extends FakeBoundAdapter {
  beats = 0;
  readonly heartbeatIntervalMs = 50;

  async heartbeat(): Promise<BeatResult> {
    this.beats += 1;
    return 'ok';
  }
}

/** An instance as the registry compares them: every field, metadata in key order. */
function canonical(i: Instance): string {
  const metadata = Object.keys(i.metadata)
    .sort()
    .map((k) => [k, i.metadata[k]]);
  return JSON.stringify([i.ip, i.port, i.cluster, i.weight, i.healthy, i.enabled, i.ephemeral, metadata]);
}

function sameSet(a: readonly Instance[], b: readonly Instance[]): boolean {
  if (a.length !== b.length) return false;
  const seen = new Set(a.map(canonical));
  return b.every((i) => seen.has(canonical(i)));
}
