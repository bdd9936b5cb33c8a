import { EventEmitter } from 'node:events';
import { NONE_SELECTOR, type ServiceSelector } from './label-selector.js';

/** The namespace every request without `namespaceId` lands in. Nacos 2.x/3.x call it `public`. */
export const PUBLIC_NAMESPACE = 'public';
export const DEFAULT_GROUP = 'DEFAULT_GROUP';
export const DEFAULT_CLUSTER = 'DEFAULT';
export const GROUP_SEPARATOR = '@@';

/** One registered instance as the embedded registry keeps it. */
export interface StoredInstance {
  ip: string;
  port: number;
  weight: number;
  healthy: boolean;
  enabled: boolean;
  ephemeral: boolean;
  clusterName: string;
  metadata: Record<string, string>;
  /** Wall-clock ms of the last register or beat; drives ephemeral expiry. */
  lastBeat: number;
  /** Beats received since registration (register itself not counted). */
  beats: number;
  /** The id a gRPC publisher gave (or Nacos would generate); HTTP instances derive theirs from ip, port and cluster. */
  instanceId?: string;
  /**
   * Set on instances gRPC connections publish: how many publish it. It lives while one does and is
   * never expired by the beat sweep.
   */
  publishers?: number;
}

/** What a register or update request carries, validated. */
export type InstanceInput = Omit<StoredInstance, 'lastBeat' | 'beats' | 'instanceId' | 'publishers'>;

/** One instance of a gRPC publish set, normalised as Nacos stores it (see src/registry/grpc). */
export type PublishedInput = InstanceInput & { instanceId: string };

/**
 * What the service API (`POST|PUT /nacos/v1/ns/service`) sets on a service. Services that only came
 * into being through an instance registration carry the defaults: threshold 0, no metadata, no selector.
 */
export interface ServiceSettings {
  /** Stored and reported; the registry does not apply health protection. */
  protectThreshold: number;
  metadata: Record<string, string>;
  selector: ServiceSelector;
}

/** A service: instances of one `group@@name` in one namespace. */
export interface StoredService extends ServiceSettings {
  namespaceId: string;
  groupName: string;
  name: string;
  /** `ephemeral` or `persistent` once the first instance fixed it, as in Nacos 2.x. */
  kind: 'ephemeral' | 'persistent' | undefined;
  instances: Map<string, StoredInstance>;
  /** Ms timestamp of the last change, strictly increasing per service. */
  lastRefTime: number;
  /** Ms timestamp since which the service has been empty, for empty-service cleanup. */
  emptySince: number | undefined;
}

export interface NamespaceInfo {
  id: string;
  name: string;
  description: string;
}

/** Expiry timings. Nacos defaults: unhealthy after 15 s without a beat, removed after 30 s. */
export interface ExpiryOptions {
  unhealthyAfterMs: number;
  expireAfterMs: number;
  /** Empty services disappear from service lists after this long (Nacos cleans them after ~60 s). */
  emptyServiceTtlMs: number;
  /** How often the expiry sweep runs. */
  sweepIntervalMs: number;
}

export const DEFAULT_EXPIRY: ExpiryOptions = {
  unhealthyAfterMs: 15_000,
  expireAfterMs: 30_000,
  emptyServiceTtlMs: 60_000,
  sweepIntervalMs: 1_000,
};

/** A request the store refuses; the HTTP layer turns it into the API's error shape. */
export class NamingError extends Error {
  override readonly name = 'NamingError';
  constructor(
    readonly code: 'invalid' | 'instance-not-found' | 'service-not-found' | 'service-exists' | 'namespace-not-found',
    message: string,
  ) {
    super(message);
  }
}

export interface ServiceChange {
  namespaceId: string;
  groupedName: string;
}

/** Normalizes the ways clients name the public namespace (`''`, `public`, absent). */
export function normalizeNamespace(id: string | undefined): string {
  return id === undefined || id === '' ? PUBLIC_NAMESPACE : id;
}

export function groupedName(groupName: string, name: string): string {
  return `${groupName}${GROUP_SEPARATOR}${name}`;
}

export function instanceKey(ip: string, port: number, clusterName: string): string {
  return `${ip}#${port}#${clusterName}`;
}

/**
 * The key of a published instance in a service's instance map: every field a reader sees, metadata in
 * sorted key order, so instances that are equal field for field share one entry (Nacos keys its
 * instance set on `Instance.toString()`; sorting makes the key order of a client's map irrelevant).
 * It ends in `]`, which a cluster name cannot, so it never collides with an {@link instanceKey}.
 */
export function publishedKey(serviceName: string, i: PublishedInput): string {
  return JSON.stringify([i.instanceId, i.ip, i.port, i.weight, i.healthy, i.enabled, i.ephemeral, i.clusterName, serviceName, sortedRecord(i.metadata)]);
}

/** The record itself when its keys are in order (what regsync sends), else a copy with sorted keys. */
function sortedRecord(record: Record<string, string>): Record<string, string> {
  const keys = Object.keys(record);
  let sorted = true;
  for (let k = 1; k < keys.length && sorted; k++) sorted = (keys[k - 1] as string) < (keys[k] as string);
  if (sorted) return record;
  const copy: Record<string, string> = {};
  for (const key of keys.sort()) copy[key] = record[key] as string;
  return copy;
}

/** The events of a {@link NamingStore}. */
export interface NamingStoreEvents {
  /** After every mutation a reader could see (UDP and gRPC push listen to it). */
  change: [ServiceChange];
  /** After `change`, when a service got its first instance (it was empty or did not exist): Nacos' ADD_SERVICE. */
  populated: [ServiceChange];
  /** After `change`, when a service lost its last instance: Nacos' DELETE_SERVICE. The empty service stays listed until cleaned up. */
  emptied: [ServiceChange];
}

/**
 * The embedded registry's state: namespaces, services and instances, with ephemeral expiry.
 * Emits {@link NamingStoreEvents}. No active health checks: instance addresses are never contacted.
 */
export class NamingStore extends EventEmitter<NamingStoreEvents> {
  private readonly namespaces = new Map<string, Map<string, StoredService>>();
  private readonly namespaceInfo = new Map<string, NamespaceInfo>();
  private sweepTimer: NodeJS.Timeout | undefined;
  /**
   * The services the expiry sweep visits: those that may hold beat-kept ephemeral instances or are
   * empty (due for removal). Published and persistent instances never expire, so a registry of
   * 1,000,000 connection-bound instances sweeps nothing.
   */
  private readonly sweepable = new Set<StoredService>();
  /** Per publisher (a gRPC connection id): per service (`namespace\ngroup@@name`), the published keys. */
  private readonly publishSets = new Map<string, Map<string, ReadonlySet<string>>>();
  /**
   * Per namespace, per group: the names of its services in collation order, kept as services come
   * and go, so that a list or a page of it costs what it returns, not a sort of every service.
   */
  private readonly names = new Map<string, Map<string, string[]>>();
  readonly expiry: ExpiryOptions;

  constructor(
    expiry: Partial<ExpiryOptions> = {},
    private readonly now: () => number = Date.now,
  ) {
    super();
    this.expiry = { ...DEFAULT_EXPIRY, ...expiry };
    if (this.expiry.expireAfterMs < this.expiry.unhealthyAfterMs) {
      throw new RangeError('expireAfterMs must not be shorter than unhealthyAfterMs');
    }
    this.namespaceInfo.set(PUBLIC_NAMESPACE, { id: PUBLIC_NAMESPACE, name: 'public', description: 'Public Namespace' });
  }

  /** Starts the periodic expiry sweep. */
  start(): void {
    if (this.sweepTimer) return;
    this.sweepTimer = setInterval(() => this.sweep(), this.expiry.sweepIntervalMs);
    this.sweepTimer.unref();
  }

  stop(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
  }

  createNamespace(info: NamespaceInfo): boolean {
    if (this.namespaceInfo.has(info.id)) return false;
    this.namespaceInfo.set(info.id, info);
    return true;
  }

  /** Configured namespaces plus every namespace that holds a service, public first. */
  listNamespaces(): Array<NamespaceInfo & { serviceCount: number }> {
    const ids = new Set([...this.namespaceInfo.keys(), ...this.namespaces.keys()]);
    return [...ids]
      .sort((a, b) => (a === PUBLIC_NAMESPACE ? -1 : b === PUBLIC_NAMESPACE ? 1 : a.localeCompare(b)))
      .map((id) => ({
        ...(this.namespaceInfo.get(id) ?? { id, name: id, description: '' }),
        serviceCount: this.namespaces.get(id)?.size ?? 0,
      }));
  }

  getService(namespaceId: string, groupName: string, name: string): StoredService | undefined {
    return this.namespaces.get(namespaceId)?.get(groupedName(groupName, name));
  }

  /** Every service of a namespace, in no set order, without copying (fuzzy-watch scans). */
  servicesOf(namespaceId: string): IterableIterator<StoredService> {
    return (this.namespaces.get(namespaceId) ?? new Map<string, StoredService>()).values();
  }

  /** Services of a namespace, optionally of one group, sorted by group then name. */
  listServices(namespaceId: string, groupName?: string): StoredService[] {
    const services = this.namespaces.get(namespaceId);
    const groups = this.names.get(namespaceId);
    if (!services || !groups) return [];
    const out: StoredService[] = [];
    for (const group of groupName === undefined ? [...groups.keys()].sort(collate) : [groupName]) {
      for (const name of groups.get(group) ?? []) out.push(services.get(groupedName(group, name)) as StoredService);
    }
    return out;
  }

  /**
   * One page of the names of a group's services, in the order of {@link listServices}, and how many
   * the group has (`pageNo` from 1): a page costs its size, whatever the group holds.
   */
  serviceNamesPage(namespaceId: string, groupName: string, pageNo: number, pageSize: number): { count: number; names: string[] } {
    const all = this.names.get(namespaceId)?.get(groupName) ?? [];
    const from = Math.max(0, (pageNo - 1) * pageSize);
    return { count: all.length, names: all.slice(from, from + Math.max(0, pageSize)) };
  }

  /**
   * Registers or replaces an instance. A service holds either ephemeral or persistent instances,
   * never both (Nacos 2.x rule); the check runs before anything changes.
   */
  register(namespaceId: string, groupName: string, name: string, input: InstanceInput): StoredInstance {
    const existing = this.getService(namespaceId, groupName, name);
    const kind = input.ephemeral ? 'ephemeral' : 'persistent';
    if (existing?.kind && existing.kind !== kind && existing.instances.size > 0) {
      throw new NamingError(
        'invalid',
        `Current service ${groupedName(groupName, name)} is ${existing.kind} service, can't register ${kind} instance.`,
      );
    }
    const service = existing ?? this.addService(namespaceId, groupName, name);
    service.kind = kind;
    const key = instanceKey(input.ip, input.port, input.clusterName);
    const previous = service.instances.get(key);
    const instance: StoredInstance = { ...input, metadata: { ...input.metadata }, lastBeat: this.now(), beats: 0 };
    service.instances.set(key, instance);
    if (instance.ephemeral) this.sweepable.add(service);
    if (!previous || !sameVisibleState(previous, instance)) this.touch(service);
    return instance;
  }

  /**
   * Creates an empty service with its settings (Nacos `POST /service`); an existing one is refused.
   * Like any empty service it is dropped after `emptyServiceTtlMs` unless an instance arrives first
   * (Nacos cleans empty services the same way). Its kind stays open: the first instance fixes it.
   */
  createService(namespaceId: string, groupName: string, name: string, settings: ServiceSettings): StoredService {
    if (this.getService(namespaceId, groupName, name)) {
      throw new NamingError('service-exists', `specified service ${groupedName(groupName, name)} already exists!`);
    }
    const service = this.addService(namespaceId, groupName, name);
    applySettings(service, settings);
    this.touch(service);
    return service;
  }

  /**
   * Replaces the settings of an existing service (Nacos `PUT /service`): metadata and selector are
   * replaced whole, not merged. Instances are untouched; an update counts as a change, so
   * subscribers are pushed the view the new selector gives them.
   */
  updateService(namespaceId: string, groupName: string, name: string, settings: ServiceSettings): StoredService {
    const service = this.getService(namespaceId, groupName, name);
    if (!service) throw new NamingError('service-not-found', `service ${groupedName(groupName, name)} not found!`);
    applySettings(service, settings);
    this.touch(service);
    return service;
  }

  /** Removes a service that has no instances (Nacos `DELETE /service`). */
  deleteService(namespaceId: string, groupName: string, name: string): void {
    const services = this.namespaces.get(namespaceId);
    const key = groupedName(groupName, name);
    const service = services?.get(key);
    if (!services || !service) throw new NamingError('service-not-found', `service ${key} not found!`);
    if (service.instances.size > 0) {
      throw new NamingError('invalid', `Service ${key} is not empty, can't be delete. Please unregister instance first`);
    }
    this.dropService(services, service);
    this.emit('change', { namespaceId, groupedName: key });
  }

  /** Replaces the attributes of an existing instance (Nacos `PUT /instance`). */
  update(namespaceId: string, groupName: string, name: string, input: InstanceInput): StoredInstance {
    const service = this.getService(namespaceId, groupName, name);
    const key = instanceKey(input.ip, input.port, input.clusterName);
    const previous = service?.instances.get(key);
    if (!service || !previous) {
      throw new NamingError('instance-not-found', `instance not exist: ${key} in ${groupedName(groupName, name)}`);
    }
    const instance: StoredInstance = { ...input, metadata: { ...input.metadata }, lastBeat: previous.lastBeat, beats: previous.beats };
    service.instances.set(key, instance);
    if (instance.ephemeral) this.sweepable.add(service);
    if (!sameVisibleState(previous, instance)) this.touch(service);
    return instance;
  }

  /** Removes an instance; answers whether it existed (Nacos answers `ok` either way). */
  deregister(namespaceId: string, groupName: string, name: string, ip: string, port: number, clusterName: string): boolean {
    const service = this.getService(namespaceId, groupName, name);
    if (!service?.instances.delete(instanceKey(ip, port, clusterName))) return false;
    this.touch(service);
    return true;
  }

  /**
   * Renews an ephemeral instance. Returns false when the instance is unknown (the caller answers
   * 20404 / 21003, or re-creates it from a full beat body).
   */
  beat(namespaceId: string, groupName: string, name: string, ip: string, port: number, clusterName: string): boolean {
    const service = this.getService(namespaceId, groupName, name);
    const instance = service?.instances.get(instanceKey(ip, port, clusterName));
    if (!service || !instance || !instance.ephemeral) return false;
    instance.lastBeat = this.now();
    instance.beats += 1;
    if (!instance.healthy) {
      instance.healthy = true;
      this.touch(service);
    }
    return true;
  }

  /**
   * Replaces the set `owner` publishes for a service (Nacos gRPC `registerInstance` and
   * `batchRegisterInstance`: one set per service per connection; an empty list leaves an empty set).
   * An instance equal field for field to one another owner publishes is shown once and stays until its
   * last publisher withdraws; instances that differ in any field are shown side by side. Published
   * instances are ephemeral: a service of persistent instances refuses them.
   */
  publish(owner: string, namespaceId: string, groupName: string, name: string, instances: readonly PublishedInput[]): void {
    const existing = this.getService(namespaceId, groupName, name);
    if (existing?.kind === 'persistent' && existing.instances.size > 0) {
      throw new NamingError(
        'invalid',
        `Current service ${groupedName(groupName, name)} is persistent service, can't register ephemeral instance.`,
      );
    }
    const service = existing ?? this.addService(namespaceId, groupName, name);
    service.kind = 'ephemeral';
    const serviceName = groupedName(groupName, name);
    const next = new Map<string, PublishedInput>();
    for (const i of instances) {
      const input = i.ephemeral ? i : { ...i, ephemeral: true };
      next.set(publishedKey(serviceName, input), input);
    }
    let sets = this.publishSets.get(owner);
    if (!sets) {
      sets = new Map();
      this.publishSets.set(owner, sets);
    }
    const sKey = serviceKeyOf(namespaceId, serviceName);
    const previous = sets.get(sKey);
    sets.set(sKey, new Set(next.keys()));
    let changed = false;
    if (previous) for (const key of previous) if (!next.has(key) && this.release(service, key)) changed = true;
    for (const [key, input] of next) if (!previous?.has(key) && this.hold(service, key, input)) changed = true;
    if (changed || !existing) this.touch(service);
  }

  /** Removes the set `owner` publishes for a service (Nacos gRPC `deregisterInstance`: the whole entry, whatever was sent). */
  unpublish(owner: string, namespaceId: string, groupName: string, name: string): void {
    const sets = this.publishSets.get(owner);
    const sKey = serviceKeyOf(namespaceId, groupedName(groupName, name));
    const previous = sets?.get(sKey);
    if (!sets || !previous) return;
    sets.delete(sKey);
    if (sets.size === 0) this.publishSets.delete(owner);
    const service = this.getService(namespaceId, groupName, name);
    if (!service) return;
    let changed = false;
    for (const key of previous) if (this.release(service, key)) changed = true;
    if (changed) this.touch(service);
  }

  /** Removes everything `owner` publishes: its connection is gone. */
  unpublishAll(owner: string): void {
    const sets = this.publishSets.get(owner);
    if (!sets) return;
    for (const sKey of [...sets.keys()]) {
      const [namespaceId, grouped] = splitServiceKey(sKey);
      const at = grouped.indexOf(GROUP_SEPARATOR);
      this.unpublish(owner, namespaceId, grouped.slice(0, at), grouped.slice(at + GROUP_SEPARATOR.length));
    }
  }

  /** Publish sets held, over all publishers (an empty set counts: it is an entry a publisher holds). */
  publishSetCount(): number {
    let n = 0;
    for (const sets of this.publishSets.values()) n += sets.size;
    return n;
  }

  private hold(service: StoredService, key: string, input: PublishedInput): boolean {
    const held = service.instances.get(key);
    if (held?.publishers !== undefined) {
      held.publishers += 1;
      return false;
    }
    // Field by field: an object spread here costs ten times as much, which shows on batches of thousands.
    service.instances.set(key, {
      instanceId: input.instanceId,
      ip: input.ip,
      port: input.port,
      weight: input.weight,
      healthy: input.healthy,
      enabled: input.enabled,
      ephemeral: input.ephemeral,
      clusterName: input.clusterName,
      metadata: Object.assign({}, input.metadata),
      lastBeat: this.now(),
      beats: 0,
      publishers: 1,
    });
    return true;
  }

  private release(service: StoredService, key: string): boolean {
    const held = service.instances.get(key);
    if (held?.publishers === undefined) return false;
    if (held.publishers > 1) {
      held.publishers -= 1;
      return false;
    }
    return service.instances.delete(key);
  }

  /** One expiry pass: marks silent ephemeral instances unhealthy, then removes them; drops old empty services. */
  sweep(): void {
    const now = this.now();
    for (const service of this.sweepable) {
      let changed = false;
      let expirable = false;
      for (const [instanceId, instance] of service.instances) {
        if (!instance.ephemeral || instance.publishers !== undefined) continue;
        const silentFor = now - instance.lastBeat;
        if (silentFor >= this.expiry.expireAfterMs) {
          service.instances.delete(instanceId);
          changed = true;
          continue;
        }
        expirable = true;
        if (silentFor >= this.expiry.unhealthyAfterMs && instance.healthy) {
          instance.healthy = false;
          changed = true;
        }
      }
      if (changed) this.touch(service);
      const services = this.namespaces.get(service.namespaceId);
      if (service.instances.size === 0 && service.emptySince !== undefined && now - service.emptySince >= this.expiry.emptyServiceTtlMs && services) {
        this.dropService(services, service);
      } else if (!expirable && service.emptySince === undefined) {
        // Nothing here can expire: published (connection-bound) or persistent instances only.
        this.sweepable.delete(service);
      }
    }
  }

  /** Removes a service from its namespace (and the namespace once empty) and from the name index. */
  private dropService(services: Map<string, StoredService>, service: StoredService): void {
    const { namespaceId, groupName, name } = service;
    services.delete(groupedName(groupName, name));
    this.sweepable.delete(service);
    if (services.size === 0) this.namespaces.delete(namespaceId);
    const groups = this.names.get(namespaceId);
    const names = groups?.get(groupName);
    if (!groups || !names) return;
    for (let i = lowerBound(names, name); i < names.length && collate(names[i] as string, name) === 0; i++) {
      if (names[i] !== name) continue;
      names.splice(i, 1);
      break;
    }
    if (names.length === 0) groups.delete(groupName);
    if (groups.size === 0) this.names.delete(namespaceId);
  }

  private addService(namespaceId: string, groupName: string, name: string): StoredService {
    let services = this.namespaces.get(namespaceId);
    if (!services) {
      services = new Map();
      this.namespaces.set(namespaceId, services);
    }
    const service: StoredService = {
      namespaceId,
      groupName,
      name,
      kind: undefined,
      instances: new Map(),
      lastRefTime: this.now(),
      // Empty from its creation: the first instance makes it `populated`.
      emptySince: this.now(),
      protectThreshold: 0,
      metadata: {},
      selector: NONE_SELECTOR,
    };
    services.set(groupedName(groupName, name), service);
    this.sweepable.add(service);
    let groups = this.names.get(namespaceId);
    if (!groups) {
      groups = new Map();
      this.names.set(namespaceId, groups);
    }
    let names = groups.get(groupName);
    if (!names) {
      names = [];
      groups.set(groupName, names);
    }
    // After every name that collates equal: services that compare equal keep their order of creation.
    const last = names[names.length - 1];
    if (last === undefined || collate(last, name) <= 0) names.push(name);
    else names.splice(upperBound(names, name), 0, name);
    return service;
  }

  private touch(service: StoredService): void {
    service.lastRefTime = Math.max(this.now(), service.lastRefTime + 1);
    const wasEmpty = service.emptySince !== undefined;
    const isEmpty = service.instances.size === 0;
    service.emptySince = isEmpty ? this.now() : undefined;
    if (isEmpty) this.sweepable.add(service);
    const change = { namespaceId: service.namespaceId, groupedName: groupedName(service.groupName, service.name) };
    this.emit('change', change);
    if (wasEmpty && !isEmpty) this.emit('populated', change);
    else if (!wasEmpty && isEmpty) this.emit('emptied', change);
  }
}

/** The order of `String.prototype.localeCompare` (default locale), as a reusable comparator. */
const collate = new Intl.Collator().compare;

/** The first index whose name collates at or after `name`. */
function lowerBound(names: readonly string[], name: string): number {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (collate(names[mid] as string, name) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The first index whose name collates after `name`. */
function upperBound(names: readonly string[], name: string): number {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (collate(names[mid] as string, name) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function serviceKeyOf(namespaceId: string, grouped: string): string {
  return `${namespaceId}\n${grouped}`;
}

function splitServiceKey(key: string): [string, string] {
  const at = key.indexOf('\n');
  return [key.slice(0, at), key.slice(at + 1)];
}

function applySettings(service: StoredService, settings: ServiceSettings): void {
  service.protectThreshold = settings.protectThreshold;
  service.metadata = { ...settings.metadata };
  service.selector = settings.selector;
}

function sameVisibleState(a: StoredInstance, b: StoredInstance): boolean {
  return (
    a.weight === b.weight &&
    a.healthy === b.healthy &&
    a.enabled === b.enabled &&
    a.ephemeral === b.ephemeral &&
    sameRecord(a.metadata, b.metadata)
  );
}

function sameRecord(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}
