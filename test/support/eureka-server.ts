import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenRestartable } from './restartable-server.js';

/** Instance statuses, as Eureka spells them. */
export type EurekaStatus = 'UP' | 'DOWN' | 'STARTING' | 'OUT_OF_SERVICE' | 'UNKNOWN';
const STATUSES: readonly EurekaStatus[] = ['UP', 'DOWN', 'STARTING', 'OUT_OF_SERVICE', 'UNKNOWN'];

/** One registered instance as the server keeps it (the InstanceInfo as parsed, plus its lease). */
export interface EurekaInstance {
  instanceId: string;
  app: string;
  hostName: string;
  ipAddr: string;
  /** The instance's own status (register, or a DOWN/STARTING it reported). */
  status: EurekaStatus;
  /** Set through `PUT .../status`; `UNKNOWN`: none. */
  overriddenStatus: EurekaStatus;
  port: { $: number; '@enabled': boolean };
  securePort: { $: number; '@enabled': boolean };
  vipAddress: string | undefined;
  secureVipAddress: string | undefined;
  homePageUrl: string | undefined;
  statusPageUrl: string | undefined;
  healthCheckUrl: string | undefined;
  dataCenterInfo: Record<string, unknown>;
  metadata: Record<string, string>;
  lease: { renewalIntervalInSecs: number; durationInSecs: number; registrationTimestamp: number; lastRenewalTimestamp: number; serviceUpTimestamp: number };
  /** When the lease runs out: Netflix's `Lease.renew()` sets it to now + duration, and expiry adds the duration again. */
  lastUpdate: number;
  lastDirtyTimestamp: number;
  lastUpdatedTimestamp: number;
  countryId: number;
}

/** One request the server answered. */
export interface EurekaRequestRecord {
  method: string;
  /** The path below the context path, decoded. */
  path: string;
  query: Record<string, string>;
  status: number;
}

export interface EurekaServerOptions {
  /** `/eureka` (Spring Cloud, default) or `/eureka/v2` (Netflix). */
  contextPath?: string;
  /**
   * How long list reads (`/apps`, `/apps/delta`, `/apps/{APP}`) lag behind writes: the server's
   * read-only response cache, copied from the registry every this many ms at multiples of it
   * (Eureka's `responseCacheUpdateIntervalMs`, 30 s). Default 0: reads are live.
   */
  readCacheMs?: number;
  /** How long changes stay in `/apps/delta` (default 3 min, `retentionTimeInMSInDeltaQueue`). */
  deltaRetentionMs?: number;
  /** Period of the eviction of expired leases (default 60 s; 0: never). */
  evictionIntervalMs?: number;
  /** HTTP basic credentials every request must carry; absent: none. */
  basicAuth?: { username: string; password: string };
}

/**
 * A Eureka server for tests, on 127.0.0.1 over plain HTTP, speaking the REST API v2 that Eureka
 * clients use (Netflix's Jersey resources, as Spring Cloud serves them), JSON only:
 *
 * - `POST /apps/{APP}` registers (204; 400 with Eureka's words for a missing instanceId,
 *   hostname, ip address, appName, a mismatched appName, a missing dataCenterInfo or its name);
 *   a stored instance whose `lastDirtyTimestamp` is newer than the body's is kept as it is;
 * - `PUT /apps/{APP}/{id}` renews the lease (200; 404 without one, or when the sent
 *   `lastDirtyTimestamp` is newer than the stored one: register again); `DELETE` cancels (200/404);
 *   `PUT`/`DELETE .../status` sets and clears the override; `PUT .../metadata?k=v` merges;
 * - `GET /apps`, `/apps/delta`, `/apps/{APP}` through the read cache ({@link EurekaServerOptions.readCacheMs}),
 *   `GET /apps/{APP}/{id}`, `/instances/{id}`, `/vips/{vip}`, `/svips/{svip}` live;
 * - Eureka's JSON: `port`/`securePort` as `{"$": 8080, "@enabled": "true"}` (a bare number is
 *   refused as Jackson refuses it), `dataCenterInfo` with `@class`, timestamps as strings, empty
 *   metadata as `{"@class": "java.util.Collections$EmptyMap"}`, `versions__delta` and
 *   `apps__hashcode` (`<STATUS>_<count>_` sorted), app names upper-cased, a single application or
 *   instance still written as a list;
 * - leases: `leaseInfo.durationInSecs` (default 90 s); an instance that stops renewing is evicted
 *   after twice its duration (Netflix's `Lease` keeps that bug), by a task every `evictionIntervalMs`;
 * - the delta: every change of the last `deltaRetentionMs` with its `actionType`.
 *
 * Deliberately left out: XML, gzip, the compact codec, peer replication, self-preservation, the
 * 5-minute read lockout of a lone Netflix server, Amazon data centers, status rules beyond the
 * override (DOWN and STARTING reported by the instance win; otherwise the override).
 */
export interface EurekaServer {
  /** `127.0.0.1:<port>`. */
  readonly endpoint: string;
  readonly port: number;
  /** `http://127.0.0.1:<port><contextPath>/` (what clients take as their service URL). */
  readonly serviceUrl: string;
  readonly requests: readonly EurekaRequestRecord[];
  /** The live registry, as `GET /apps/{APP}/{id}` sees it. */
  instances(app?: string): EurekaInstance[];
  /** Evicts expired leases now (the eviction task's run). Answers how many. */
  evict(now?: number): number;
  /** Copies the registry into the read cache now (the cache timer's run). */
  refreshReadCache(): void;
  /** Stops answering: the port is closed and open connections are cut. State is kept. */
  stop(): Promise<void>;
  /**
   * Answers again on the same port; with `empty`, as a restarted Eureka server does (it keeps
   * nothing on disk): no registrations, no delta, its clients register again as they renew.
   */
  start(options?: { empty?: boolean }): Promise<void>;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

const DEFAULT_DURATION_S = 90;
const DEFAULT_RENEWAL_S = 30;

interface DeltaEntry {
  at: number;
  action: 'ADDED' | 'MODIFIED' | 'DELETED';
  instance: EurekaInstance;
}

/** Starts a test Eureka server on a free loopback port. */
export async function startEurekaServer(options: EurekaServerOptions = {}): Promise<EurekaServer> {
  const contextPath = (options.contextPath ?? '/eureka').replace(/\/+$/, '');
  const readCacheMs = options.readCacheMs ?? 0;
  const deltaRetentionMs = options.deltaRetentionMs ?? 180_000;
  const evictionIntervalMs = options.evictionIntervalMs ?? 60_000;
  /** APP -> id -> instance. */
  const registry = new Map<string, Map<string, EurekaInstance>>();
  const deltas: DeltaEntry[] = [];
  const requests: EurekaRequestRecord[] = [];
  let deltaVersion = 0;
  /** The read cache: rendered documents of the last refresh, by path. */
  let cached: Snapshot = snapshot();

  interface Snapshot {
    apps: Map<string, EurekaInstance[]>;
    deltas: DeltaEntry[];
    version: number;
  }
  function snapshot(): Snapshot {
    const apps = new Map<string, EurekaInstance[]>();
    for (const [app, byId] of registry) apps.set(app, [...byId.values()].map((i) => structuredClone(i)));
    return { apps, deltas: deltas.map((d) => ({ ...d, instance: structuredClone(d.instance) })), version: deltaVersion };
  }
  const refreshReadCache = () => {
    cached = snapshot();
  };
  /**
   * What list reads see: the read cache, or the registry itself when there is none (answered
   * within the same turn, so nothing changes under it; a copy per read would make each
   * `GET /apps/{APP}` cost as much as the whole registry).
   */
  const readView = (): Snapshot => {
    if (readCacheMs > 0) return cached;
    const apps = new Map<string, EurekaInstance[]>();
    for (const [app, byId] of registry) apps.set(app, [...byId.values()]);
    return { apps, deltas, version: deltaVersion };
  };
  /** The instances of one application as list reads see them. */
  const readApp = (app: string): EurekaInstance[] | undefined => {
    if (readCacheMs > 0) return cached.apps.get(app);
    const byId = registry.get(app);
    return byId === undefined ? undefined : [...byId.values()];
  };

  const recordDelta = (action: DeltaEntry['action'], instance: EurekaInstance) => {
    const now = Date.now();
    deltas.push({ at: now, action, instance: structuredClone(instance) });
    while (deltas.length > 0 && (deltas[0] as DeltaEntry).at < now - deltaRetentionMs) deltas.shift();
    deltaVersion += 1;
  };

  const effectiveStatus = (i: EurekaInstance): EurekaStatus => {
    if (i.status === 'DOWN' || i.status === 'STARTING') return i.status;
    if (i.overriddenStatus !== 'UNKNOWN') return i.overriddenStatus;
    return i.status;
  };

  const render = (i: EurekaInstance, action?: DeltaEntry['action']): Record<string, unknown> => ({
    instanceId: i.instanceId,
    hostName: i.hostName,
    app: i.app,
    ipAddr: i.ipAddr,
    status: effectiveStatus(i),
    overriddenStatus: i.overriddenStatus,
    port: { $: i.port.$, '@enabled': String(i.port['@enabled']) },
    securePort: { $: i.securePort.$, '@enabled': String(i.securePort['@enabled']) },
    countryId: i.countryId,
    dataCenterInfo: i.dataCenterInfo,
    leaseInfo: { ...i.lease, evictionTimestamp: 0 },
    metadata: Object.keys(i.metadata).length === 0 ? { '@class': 'java.util.Collections$EmptyMap' } : { ...i.metadata },
    ...(i.homePageUrl !== undefined ? { homePageUrl: i.homePageUrl } : {}),
    ...(i.statusPageUrl !== undefined ? { statusPageUrl: i.statusPageUrl } : {}),
    ...(i.healthCheckUrl !== undefined ? { healthCheckUrl: i.healthCheckUrl } : {}),
    ...(i.vipAddress !== undefined ? { vipAddress: i.vipAddress } : {}),
    ...(i.secureVipAddress !== undefined ? { secureVipAddress: i.secureVipAddress } : {}),
    isCoordinatingDiscoveryServer: 'false',
    lastUpdatedTimestamp: String(i.lastUpdatedTimestamp),
    lastDirtyTimestamp: String(i.lastDirtyTimestamp),
    actionType: action ?? 'ADDED',
  });

  /** `apps__hashcode`: each status with its count, sorted by status name (`Applications.getReconcileHashCode`). */
  const hashOf = (instances: Iterable<EurekaInstance>): string => {
    const counts = new Map<string, number>();
    for (const i of instances) counts.set(effectiveStatus(i), (counts.get(effectiveStatus(i)) ?? 0) + 1);
    return [...counts.keys()]
      .sort()
      .map((s) => `${s}_${counts.get(s)}_`)
      .join('');
  };

  const applicationsDoc = (apps: Map<string, EurekaInstance[]>, version: string, hash: string) => ({
    applications: {
      versions__delta: version,
      apps__hashcode: hash,
      application: [...apps]
        .filter(([, list]) => list.length > 0)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([name, list]) => ({ name, instance: list.map((i) => render(i)) })),
    },
  });

  const parsePort = (raw: unknown, fallback: number, enabledByDefault: boolean, field: string): { $: number; '@enabled': boolean } => {
    if (raw === undefined || raw === null) return { $: fallback, '@enabled': enabledByDefault };
    if (typeof raw !== 'object') throw new HttpError(400, `Cannot deserialize ${field}: expected an object {"$": port, "@enabled": "true"}`);
    const p = raw as { $?: unknown; '@enabled'?: unknown };
    const port = typeof p.$ === 'string' ? Number(p.$) : p.$;
    if (typeof port !== 'number' || !Number.isInteger(port)) throw new HttpError(400, `Cannot deserialize ${field}.$`);
    const enabled = p['@enabled'] === undefined ? enabledByDefault : p['@enabled'] === true || p['@enabled'] === 'true';
    return { $: port, '@enabled': enabled };
  };

  const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined);

  const register = (appInPath: string, body: unknown): void => {
    const info = (body as { instance?: Record<string, unknown> } | null)?.instance;
    if (typeof info !== 'object' || info === null) throw new HttpError(400, 'Cannot deserialize: expected {"instance": {...}}');
    const hostName = str(info.hostName);
    const instanceId = str(info.instanceId) ?? hostName;
    if (instanceId === undefined) throw new HttpError(400, 'Missing instanceId');
    if (hostName === undefined) throw new HttpError(400, 'Missing hostname');
    const ipAddr = str(info.ipAddr);
    if (ipAddr === undefined) throw new HttpError(400, 'Missing ip address');
    const appRaw = str(info.app);
    if (appRaw === undefined) throw new HttpError(400, 'Missing appName');
    const app = appRaw.toUpperCase();
    if (app !== appInPath) throw new HttpError(400, `Mismatched appName, expecting ${appInPath} but was ${app}`);
    const dc = info.dataCenterInfo as Record<string, unknown> | undefined;
    if (typeof dc !== 'object' || dc === null) throw new HttpError(400, 'Missing dataCenterInfo');
    if (str(dc.name) === undefined) throw new HttpError(400, 'Missing dataCenterInfo Name');
    if (typeof dc['@class'] !== 'string') throw new HttpError(400, 'Cannot deserialize dataCenterInfo: missing type id @class');
    const port = parsePort(info.port, 7001, true, 'port');
    const securePort = parsePort(info.securePort, 7002, false, 'securePort');
    const statusRaw = str(info.status) ?? 'UP';
    const status = (STATUSES as readonly string[]).includes(statusRaw) ? (statusRaw as EurekaStatus) : 'UNKNOWN';
    const leaseRaw = (info.leaseInfo ?? {}) as { durationInSecs?: unknown; renewalIntervalInSecs?: unknown };
    const duration = typeof leaseRaw.durationInSecs === 'number' && leaseRaw.durationInSecs > 0 ? leaseRaw.durationInSecs : DEFAULT_DURATION_S;
    const renewal = typeof leaseRaw.renewalIntervalInSecs === 'number' && leaseRaw.renewalIntervalInSecs > 0 ? leaseRaw.renewalIntervalInSecs : DEFAULT_RENEWAL_S;
    const metadataRaw = (info.metadata ?? {}) as Record<string, unknown>;
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(metadataRaw)) if (k !== '@class') metadata[k] = String(v);
    const now = Date.now();
    const dirtyRaw = str(info.lastDirtyTimestamp);
    const lastDirtyTimestamp = dirtyRaw !== undefined && /^\d+$/.test(dirtyRaw) ? Number(dirtyRaw) : now;
    const byId = registry.get(app) ?? new Map<string, EurekaInstance>();
    const existing = byId.get(instanceId);
    // A stored instance dirtied later than this body wins (AbstractInstanceRegistry.register).
    if (existing !== undefined && existing.lastDirtyTimestamp > lastDirtyTimestamp) {
      existing.lastUpdate = now + existing.lease.durationInSecs * 1000;
      return;
    }
    const instance: EurekaInstance = {
      instanceId,
      app,
      hostName,
      ipAddr,
      status,
      overriddenStatus: existing?.overriddenStatus ?? 'UNKNOWN',
      port,
      securePort,
      vipAddress: str(info.vipAddress),
      secureVipAddress: str(info.secureVipAddress),
      homePageUrl: str(info.homePageUrl),
      statusPageUrl: str(info.statusPageUrl),
      healthCheckUrl: str(info.healthCheckUrl),
      dataCenterInfo: { ...dc },
      metadata,
      lease: {
        renewalIntervalInSecs: renewal,
        durationInSecs: duration,
        registrationTimestamp: now,
        lastRenewalTimestamp: now,
        serviceUpTimestamp: existing?.lease.serviceUpTimestamp ?? now,
      },
      lastUpdate: now + duration * 1000,
      lastDirtyTimestamp,
      lastUpdatedTimestamp: now,
      countryId: typeof info.countryId === 'number' ? info.countryId : 1,
    };
    byId.set(instanceId, instance);
    registry.set(app, byId);
    recordDelta(existing === undefined ? 'ADDED' : 'MODIFIED', instance);
  };

  const find = (app: string, id: string): EurekaInstance | undefined => registry.get(app)?.get(id);

  const cancel = (app: string, id: string): boolean => {
    const byId = registry.get(app);
    const instance = byId?.get(id);
    if (byId === undefined || instance === undefined) return false;
    byId.delete(id);
    if (byId.size === 0) registry.delete(app);
    recordDelta('DELETED', instance);
    return true;
  };

  const evict = (now = Date.now()): number => {
    let evicted = 0;
    for (const [app, byId] of [...registry]) {
      for (const [id, i] of [...byId]) {
        // Netflix's Lease.isExpired: lastUpdate (already now + duration at renewal) + duration.
        if (now > i.lastUpdate + i.lease.durationInSecs * 1000) {
          cancel(app, id);
          evicted += 1;
        }
      }
    }
    return evicted;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const query = Object.fromEntries(url.searchParams.entries());
    const record: EurekaRequestRecord = { method: req.method ?? 'GET', path: decodeURIComponent(url.pathname), query, status: 0 };
    const send = (status: number, body?: unknown): void => {
      record.status = status;
      requests.push(record);
      if (body === undefined) {
        res.writeHead(status, { 'Content-Length': '0' });
        res.end();
      } else if (typeof body === 'string') {
        res.writeHead(status, { 'Content-Type': 'text/plain' });
        res.end(body);
      } else {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(body));
      }
    };
    try {
      const text = await readBody(req);
      if (options.basicAuth !== undefined) {
        const expected = `Basic ${Buffer.from(`${options.basicAuth.username}:${options.basicAuth.password}`).toString('base64')}`;
        if (req.headers.authorization !== expected) {
          res.setHeader('WWW-Authenticate', 'Basic realm="Realm"');
          throw new HttpError(401, 'Unauthorized');
        }
      }
      if (!url.pathname.startsWith(`${contextPath}/`)) throw new HttpError(404, 'Not Found');
      const path = decodeURIComponent(url.pathname.slice(contextPath.length)).replace(/\/+$/, '');
      record.path = path;
      const parts = path.split('/').filter((p) => p !== '');
      const method = req.method ?? 'GET';
      const [root, appRaw, id, sub] = parts;
      const app = appRaw?.toUpperCase();
      if (root === 'apps' && parts.length === 1 && method === 'GET') {
        const view = readView();
        const all = [...view.apps.values()].flat();
        return send(200, applicationsDoc(view.apps, '1', hashOf(all)));
      }
      if (root === 'apps' && appRaw === 'delta' && parts.length === 2 && method === 'GET') {
        const view = readView();
        const changed = new Map<string, EurekaInstance[]>();
        const actions = new Map<EurekaInstance, DeltaEntry['action']>();
        for (const d of view.deltas) {
          if (d.at < Date.now() - deltaRetentionMs) continue;
          const list = changed.get(d.instance.app) ?? [];
          list.push(d.instance);
          actions.set(d.instance, d.action);
          changed.set(d.instance.app, list);
        }
        const all = [...view.apps.values()].flat();
        return send(200, {
          applications: {
            versions__delta: String(view.version),
            apps__hashcode: hashOf(all),
            application: [...changed].map(([name, list]) => ({ name, instance: list.map((i) => render(i, actions.get(i))) })),
          },
        });
      }
      if (root === 'apps' && app !== undefined && parts.length === 2) {
        if (method === 'GET') {
          const list = readApp(app);
          if (list === undefined || list.length === 0) throw new HttpError(404, 'Not Found');
          return send(200, { application: { name: app, instance: list.map((i) => render(i)) } });
        }
        if (method === 'POST') {
          register(app, json(text));
          return send(204);
        }
        throw new HttpError(405, 'Method Not Allowed');
      }
      if (root === 'apps' && app !== undefined && id !== undefined && parts.length === 3) {
        const instance = find(app, id);
        if (method === 'GET') {
          if (instance === undefined) throw new HttpError(404, 'Not Found');
          return send(200, { instance: render(instance) });
        }
        if (method === 'PUT') {
          if (instance === undefined) throw new HttpError(404, 'Not Found');
          const sent = query.lastDirtyTimestamp;
          // A client dirtier than the server: it must register again (InstanceResource.validateDirtyTimestamp).
          if (sent !== undefined && /^\d+$/.test(sent) && Number(sent) > instance.lastDirtyTimestamp) throw new HttpError(404, 'Not Found');
          const now = Date.now();
          instance.lastUpdate = now + instance.lease.durationInSecs * 1000;
          instance.lease.lastRenewalTimestamp = now;
          return send(200);
        }
        if (method === 'DELETE') {
          if (!cancel(app, id)) throw new HttpError(404, 'Not Found');
          return send(200);
        }
        throw new HttpError(405, 'Method Not Allowed');
      }
      if (root === 'apps' && app !== undefined && id !== undefined && sub === 'status' && parts.length === 4) {
        const instance = find(app, id);
        if (instance === undefined) throw new HttpError(404, 'Not Found');
        if (method === 'PUT') {
          const value = query.value ?? '';
          instance.overriddenStatus = (STATUSES as readonly string[]).includes(value) ? (value as EurekaStatus) : 'UNKNOWN';
        } else if (method === 'DELETE') instance.overriddenStatus = 'UNKNOWN';
        else throw new HttpError(405, 'Method Not Allowed');
        instance.lastDirtyTimestamp = Date.now();
        instance.lastUpdatedTimestamp = Date.now();
        recordDelta('MODIFIED', instance);
        return send(200);
      }
      if (root === 'apps' && app !== undefined && id !== undefined && sub === 'metadata' && parts.length === 4 && method === 'PUT') {
        const instance = find(app, id);
        if (instance === undefined) throw new HttpError(404, 'Not Found');
        Object.assign(instance.metadata, query);
        instance.lastDirtyTimestamp = Date.now();
        recordDelta('MODIFIED', instance);
        return send(200);
      }
      if (root === 'instances' && appRaw !== undefined && parts.length === 2 && method === 'GET') {
        for (const byId of registry.values()) {
          const instance = byId.get(appRaw);
          if (instance !== undefined) return send(200, { instance: render(instance) });
        }
        throw new HttpError(404, 'Not Found');
      }
      if ((root === 'vips' || root === 'svips') && appRaw !== undefined && parts.length === 2 && method === 'GET') {
        const all = [...registry.values()].flatMap((byId) => [...byId.values()]);
        const matching = all.filter((i) => (root === 'vips' ? i.vipAddress : i.secureVipAddress)?.split(',').includes(appRaw));
        if (matching.length === 0) throw new HttpError(404, 'Not Found');
        const apps = new Map<string, EurekaInstance[]>();
        for (const i of matching) apps.set(i.app, [...(apps.get(i.app) ?? []), i]);
        return send(200, applicationsDoc(apps, '1', hashOf(matching)));
      }
      throw new HttpError(404, 'Not Found');
    } catch (err) {
      if (err instanceof HttpError) return send(err.status, err.message);
      return send(500, String(err));
    }
  };

  const listening = await listenRestartable(() => createServer((req, res) => void handle(req, res)));
  const port = listening.port;

  // The read cache refreshes at multiples of its period, as Eureka's timer does.
  let cacheTimer: ReturnType<typeof setTimeout> | undefined;
  const scheduleCache = () => {
    if (readCacheMs <= 0) return;
    cacheTimer = setTimeout(() => {
      refreshReadCache();
      scheduleCache();
    }, readCacheMs - (Date.now() % readCacheMs));
    cacheTimer.unref();
  };
  scheduleCache();
  const evictionTimer = evictionIntervalMs > 0 ? setInterval(() => evict(), evictionIntervalMs) : undefined;
  evictionTimer?.unref();

  return {
    endpoint: `127.0.0.1:${port}`,
    port,
    serviceUrl: `http://127.0.0.1:${port}${contextPath}/`,
    requests,
    instances: (app) => (app === undefined ? [...registry.values()].flatMap((byId) => [...byId.values()]) : [...(registry.get(app.toUpperCase())?.values() ?? [])]),
    evict,
    refreshReadCache,
    stop: () => listening.stop(),
    start: (opts) => {
      if (opts?.empty === true) {
        registry.clear();
        deltas.length = 0;
        refreshReadCache();
      }
      return listening.start();
    },
    async close() {
      if (cacheTimer !== undefined) clearTimeout(cacheTimer);
      if (evictionTimer !== undefined) clearInterval(evictionTimer);
      await listening.close();
    },
  };
}

function json(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'Cannot deserialize: the body is not JSON');
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
