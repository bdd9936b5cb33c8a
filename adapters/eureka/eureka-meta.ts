import { DEFAULT_INSTANCE_CLUSTER, type Instance } from '../../src/model/index.js';

/**
 * How regsync's instances map onto Eureka's InstanceInfo, and back. Pure: no I/O.
 *
 * Eureka metadata is a map of strings with any keys, so metadata and regsync's marks are written
 * as they are. Instance fields Eureka has no place for are kept in metadata on the copies regsync
 * writes, only when not the default ({@link FIELD_META}).
 */

/** Instance fields kept in metadata. */
export const FIELD_META = {
  weight: 'regsync.weight',
  ephemeral: 'regsync.ephemeral',
  enabled: 'regsync.enabled',
  cluster: 'regsync.cluster',
} as const;
const FIELD_KEYS = new Set<string>(Object.values(FIELD_META));
/** The metadata key of an instance's secure port, when both its ports are enabled. */
export const SECURE_PORT_KEY = 'eureka.securePort';

/** The part of an InstanceInfo regsync reads (Eureka's JSON: ports as `{"$", "@enabled"}`). */
export interface EurekaInfo {
  instanceId?: string;
  app?: string;
  hostName?: string;
  ipAddr?: string;
  status?: string;
  vipAddress?: string;
  port?: { $?: number | string; '@enabled'?: string | boolean } | null;
  securePort?: { $?: number | string; '@enabled'?: string | boolean } | null;
  metadata?: Record<string, unknown> | null;
  actionType?: string;
}

/** One application of `/apps` or `/apps/{APP}`: a single instance may come as an object, not a list. */
export interface EurekaApplication {
  name?: string;
  instance?: EurekaInfo[] | EurekaInfo | null;
}

/** The instances of an application, whatever form they came in. */
export function instancesOfApp(app: EurekaApplication | undefined | null): EurekaInfo[] {
  const raw = app?.instance;
  if (raw === undefined || raw === null) return [];
  return Array.isArray(raw) ? raw : [raw];
}

/** The applications of an `applications` document, whatever form they came in. */
export function applicationsOf(doc: unknown): EurekaApplication[] {
  const raw = (doc as { applications?: { application?: unknown } } | null)?.applications?.application;
  if (raw === undefined || raw === null) return [];
  return (Array.isArray(raw) ? raw : [raw]) as EurekaApplication[];
}

const enabled = (flag: unknown): boolean => flag === true || flag === 'true';
const portOf = (p: EurekaInfo['port']): number => Number(p?.$);

/**
 * The service name of an application: its VIP address when one names the application (Spring
 * Cloud: `orders-service` for `ORDERS-SERVICE`, and regsync's copies, whose VIP keeps the name's
 * case), else the application's name in lower case.
 */
export function serviceNameOf(app: string, instances: readonly EurekaInfo[]): string {
  const upper = app.toUpperCase();
  for (const i of instances) for (const vip of (i.vipAddress ?? '').split(',')) if (vip.trim().toUpperCase() === upper) return vip.trim();
  return app.toLowerCase();
}

/** The instance an InstanceInfo stands for, with its Eureka id; a string says why it is skipped. */
export function instanceOfInfo(info: EurekaInfo): { instance: Instance; eurekaId: string } | string {
  const id = info.instanceId ?? info.hostName ?? '';
  const where = `instance ${JSON.stringify(id)} of ${JSON.stringify(info.app ?? '')}`;
  const ip = info.ipAddr ?? info.hostName ?? '';
  if (ip === '') return `${where} has no address`;
  const plain = info.port === undefined || info.port === null || enabled(info.port['@enabled']);
  const secure = info.securePort !== undefined && info.securePort !== null && enabled(info.securePort['@enabled']);
  const port = plain ? portOf(info.port) : secure ? portOf(info.securePort) : NaN;
  if (!Number.isInteger(port) || port < 1 || port > 65535) return `${where} has no enabled port`;
  const raw = info.metadata ?? {};
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(raw)) if (key !== '@class' && !FIELD_KEYS.has(key)) metadata[key] = String(value);
  if (plain && secure) metadata[SECURE_PORT_KEY] = String(portOf(info.securePort));
  const weight = Number(raw[FIELD_META.weight]);
  return {
    eurekaId: id,
    instance: {
      ip,
      port,
      weight: raw[FIELD_META.weight] !== undefined && Number.isFinite(weight) ? weight : 1,
      healthy: info.status === 'UP' || info.status === 'OUT_OF_SERVICE',
      enabled: info.status !== 'OUT_OF_SERVICE' && raw[FIELD_META.enabled] !== 'false',
      ephemeral: raw[FIELD_META.ephemeral] !== 'false',
      cluster: typeof raw[FIELD_META.cluster] === 'string' ? (raw[FIELD_META.cluster] as string) : DEFAULT_INSTANCE_CLUSTER,
      metadata,
    },
  };
}

/** The Eureka instance id of a copy: `<ip>:<service>:<port>` as nacos-sync and Spring Cloud write them, `:<cluster>` added outside the default cluster. */
export function copyInstanceId(name: string, instance: Pick<Instance, 'ip' | 'port' | 'cluster'>): string {
  return `${instance.ip}:${name}:${instance.port}${instance.cluster === DEFAULT_INSTANCE_CLUSTER ? '' : `:${instance.cluster}`}`;
}

/** What a copy's InstanceInfo carries besides the instance. */
export interface CopyLease {
  renewalIntervalS: number;
  leaseDurationS: number;
  dataCenterName: string;
  now: number;
}

/**
 * The complete InstanceInfo (`{"instance": ...}`) of a copy, as Eureka itself writes one:
 * `app` upper-cased, `vipAddress` and `secureVipAddress` the service name (Spring Cloud consumers
 * look instances up by VIP), ports as objects with `@enabled` as a string, the `MyOwn` data
 * center, the lease, the status (`UP`, `DOWN` when unhealthy, `OUT_OF_SERVICE` when disabled),
 * status and health URLs on `management.port` when the metadata has one, and a current
 * `lastDirtyTimestamp` so that the server takes it over an older registration.
 */
export function infoOf(name: string, instance: Instance, lease: CopyLease): { instance: Record<string, unknown> } {
  const metadata: Record<string, string> = { ...instance.metadata };
  delete metadata[SECURE_PORT_KEY];
  if (instance.weight !== 1) metadata[FIELD_META.weight] = String(instance.weight);
  if (!instance.ephemeral) metadata[FIELD_META.ephemeral] = 'false';
  if (!instance.enabled) metadata[FIELD_META.enabled] = 'false';
  if (instance.cluster !== DEFAULT_INSTANCE_CLUSTER) metadata[FIELD_META.cluster] = instance.cluster;
  const securePort = Number(instance.metadata[SECURE_PORT_KEY]);
  const hasSecure = Number.isInteger(securePort) && securePort > 0 && securePort < 65536;
  const host = instance.ip.includes(':') ? `[${instance.ip}]` : instance.ip;
  const management = instance.metadata['management.port'] ?? String(instance.port);
  return {
    instance: {
      instanceId: copyInstanceId(name, instance),
      hostName: instance.ip,
      app: name.toUpperCase(),
      ipAddr: instance.ip,
      status: !instance.healthy ? 'DOWN' : instance.enabled ? 'UP' : 'OUT_OF_SERVICE',
      overriddenStatus: 'UNKNOWN',
      port: { $: instance.port, '@enabled': 'true' },
      securePort: { $: hasSecure ? securePort : 443, '@enabled': hasSecure ? 'true' : 'false' },
      countryId: 1,
      dataCenterInfo: { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: lease.dataCenterName },
      leaseInfo: { renewalIntervalInSecs: lease.renewalIntervalS, durationInSecs: lease.leaseDurationS },
      metadata,
      homePageUrl: `http://${host}:${instance.port}/`,
      statusPageUrl: `http://${host}:${management}/actuator/info`,
      healthCheckUrl: `http://${host}:${management}/actuator/health`,
      vipAddress: name,
      secureVipAddress: name,
      isCoordinatingDiscoveryServer: 'false',
      lastUpdatedTimestamp: String(lease.now),
      lastDirtyTimestamp: String(lease.now),
    },
  };
}

/** `apps__hashcode` of instances: each status with its count, sorted by status (`Applications.getReconcileHashCode`). */
export function reconcileHashOf(statuses: Iterable<string>): string {
  const counts = new Map<string, number>();
  for (const s of statuses) counts.set(s, (counts.get(s) ?? 0) + 1);
  return [...counts.keys()]
    .sort()
    .map((s) => `${s}_${counts.get(s)}_`)
    .join('');
}
