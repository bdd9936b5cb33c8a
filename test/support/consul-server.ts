import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { listenRestartable } from './restartable-server.js';

/** A health check's state, as Consul spells it. */
export type ConsulHealth = 'passing' | 'warning' | 'critical';

/** A service on a node, as the catalog keeps it (`structs.NodeService`). */
export interface ConsulService {
  ID: string;
  Service: string;
  Tags: string[];
  Address: string;
  Port: number;
  Meta: Record<string, string>;
  Weights: { Passing: number; Warning: number };
  EnableTagOverride: boolean;
  CreateIndex: number;
  ModifyIndex: number;
}

/** A health check (`structs.HealthCheck`). `ServiceID` empty: a check of the node itself. */
export interface ConsulCheck {
  Node: string;
  CheckID: string;
  Name: string;
  Status: ConsulHealth;
  Notes: string;
  Output: string;
  ServiceID: string;
  ServiceName: string;
  ServiceTags: string[];
  Type: string;
  CreateIndex: number;
  ModifyIndex: number;
}

/** A catalog node. */
export interface ConsulNode {
  ID: string;
  Node: string;
  Address: string;
  Datacenter: string;
  TaggedAddresses: Record<string, string>;
  Meta: Record<string, string>;
  CreateIndex: number;
  ModifyIndex: number;
}

/** One request the server answered, for tests to count and inspect. */
export interface ConsulRequestRecord {
  method: string;
  /** The path, decoded, without the query. */
  path: string;
  query: Record<string, string>;
  /** The token the request carried (`X-Consul-Token` or `Authorization: Bearer`), if any. */
  token: string | undefined;
  status: number;
  /** Whether it was a blocking query (an `index` above 0). */
  blocking: boolean;
}

/**
 * What an ACL token may do. `none`: a known token whose policies grant no `service:read` or
 * `node:read` (its reads answer as the anonymous token's do, filtered empty); a test may change a
 * token's policy in {@link ConsulServerOptions.tokens} while the server runs.
 */
export type ConsulTokenPolicy = 'none' | 'read' | 'write';

export interface ConsulServerOptions {
  /** The datacenter (default `dc1`); a read or write naming another answers 500 "No path to datacenter". */
  datacenter?: string;
  /** The agent's own node (default `consul-agent-1`), which has a passing `serfHealth` check. */
  nodeName?: string;
  /**
   * ACLs with default policy deny: secret -> what it may do. An anonymous request (no token) reads
   * nothing (lists answer empty with `X-Consul-Results-Filtered-By-ACLs: true`) and writes nothing
   * (403); an unknown secret answers 403 "ACL not found". Absent: ACLs off, everything allowed.
   */
  tokens?: Record<string, ConsulTokenPolicy>;
  /** First index of the store (default 10). */
  startIndex?: number;
  /**
   * Answer over HTTPS only, with this certificate and key (PEM text, e.g. from `makeCertificates`
   * in `redis-tls.ts`), as an agent with `tls.https` does; absent: plain HTTP.
   */
  tls?: { key: string; cert: string };
}

/**
 * A Consul agent + server for tests, on 127.0.0.1 over plain HTTP (HTTPS with `tls`), speaking the parts of the
 * HTTP API (v1) that regsync's adapter and the npm `consul` client use, with Consul's own rules:
 *
 * - catalog: `PUT /v1/catalog/register` and `/deregister` (nodes, services, checks; `SkipNodeUpdate`;
 *   the body's `Datacenter`, never `?dc`), `GET /v1/catalog/services`, `/v1/catalog/service/:name`
 *   (`?tag=`), `/v1/catalog/node-services/:node`, `/v1/catalog/nodes`;
 * - health: `GET /v1/health/service/:name` with `?passing` (every check of the entry, node checks
 *   included, exactly `passing`) and `?tag=`;
 * - agent: `PUT /v1/agent/service/register` (TTL checks that go critical when not renewed,
 *   `service:<id>` check ids), `/v1/agent/service/deregister/:id`, `/v1/agent/check/pass|warn|fail/:id`,
 *   `/v1/agent/check/update/:id`, `GET /v1/agent/services`, `/v1/agent/checks`, `/v1/agent/self`;
 *   `GET /v1/status/leader`;
 * - blocking queries on every catalog and health read: `?index=N&wait=D` hangs until the read's
 *   index passes N or `wait` (Go duration, default 5m, at most 10m) runs out; `X-Consul-Index` on
 *   every read: the service's own index for a service read, the services table's for the list;
 *   a write that changes nothing (the same service registered again) moves no index;
 * - meta rules: at most 64 pairs, keys `^[a-zA-Z0-9_-]+$` of at most 128 characters, values of at
 *   most 512, no `consul-` prefix: 400 "Invalid Service Meta: ..." on the agent endpoint, 500
 *   "Invalid Service Meta for node N and serviceID S: ..." on catalog writes; weights checked
 *   (`Passing` >= 1) on both;
 * - Enterprise parameters refused as Consul CE refuses them: any `ns` query or `X-Consul-Namespace`
 *   header 400, any `partition` 400;
 * - ACLs ({@link ConsulServerOptions.tokens}): 403 "ACL not found", 403 "Permission denied: ...";
 * - errors as `text/plain`, JSON as `application/json` (the npm client decodes only that).
 *
 * The agent's node is a server: it lists the service `consul` (port 8300), as real clusters do.
 *
 * Test helpers write the catalog directly (blocking readers wake as for any write), move the index
 * backwards (a snapshot restore), stop answering and come back on the same port, and list requests.
 *
 * Deliberately left out: script, HTTP, TCP and gRPC checks never run (they keep the status given,
 * else critical), `filter=` expressions, `near`, KV, sessions, Connect, jitter on `wait`, client
 * certificate checks.
 */
export interface ConsulServer {
  /** `127.0.0.1:<port>`. */
  readonly endpoint: string;
  readonly port: number;
  readonly datacenter: string;
  /** Every request answered so far, oldest first. */
  readonly requests: readonly ConsulRequestRecord[];
  /** The store's current index. */
  index(): number;
  /** Instances of a service as `GET /v1/health/service/:name` answers them (no ACL, no filter). */
  healthService(name: string): Array<{ Node: ConsulNode; Service: ConsulService; Checks: ConsulCheck[] }>;
  /** Registers through the catalog, as `PUT /v1/catalog/register` with this body would (no ACL). */
  catalogRegister(body: Record<string, unknown>): void;
  /** Deregisters as `PUT /v1/catalog/deregister` with this body would. */
  catalogDeregister(body: { Node: string; ServiceID?: string; CheckID?: string }): void;
  /** Sets a check's status directly (a health change another tool made). */
  setCheckStatus(node: string, checkId: string, status: ConsulHealth): void;
  /**
   * Moves every index back to `to` (a snapshot restore): reads answer a lower `X-Consul-Index`
   * than before, and the next write goes on from there. Waiting blocking queries are answered.
   */
  resetIndex(to: number): void;
  /** Blocking queries waiting now. */
  waitingQueries(): number;
  /** Stops answering: the port is closed and open connections are cut. State is kept. */
  stop(): Promise<void>;
  /** Answers again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Consul's meta key rule (`validateMetaPair`). */
const META_KEY = /^[a-zA-Z0-9_-]+$/;
const MAX_META_PAIRS = 64;
const MAX_META_KEY = 128;
const MAX_META_VALUE = 512;
const DEFAULT_WAIT_MS = 5 * 60_000;
const MAX_WAIT_MS = 10 * 60_000;
/** The accessor id Consul gives the anonymous token. */
const ANONYMOUS_ACCESSOR = '00000000-0000-0000-0000-000000000002';

/** An error answered with a status and a plain-text message. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

/** Parses a Go duration (`10s`, `1m30s`, `250ms`); a bare number is seconds, as Consul's `wait` reads it. */
export function parseGoDuration(text: string): number {
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  let rest = text;
  if (rest === '') throw new HttpError(400, `Invalid wait time`);
  while (rest !== '') {
    const m = /^(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/.exec(rest);
    if (m === null) throw new HttpError(400, 'Invalid wait time');
    total += Number(m[1]) * (units[m[2] as string] as number);
    rest = rest.slice(m[0].length);
  }
  return total;
}

/** Checks service meta as Consul does; answers the problem or undefined. */
export function metaProblem(meta: Record<string, unknown>): string | undefined {
  const entries = Object.entries(meta);
  if (entries.length > MAX_META_PAIRS) return `Node metadata cannot contain more than ${MAX_META_PAIRS} key/value pairs`;
  for (const [key, value] of entries) {
    if (key === '') return 'Key cannot be blank';
    if (!META_KEY.test(key)) return `Key contains invalid characters`;
    if (key.length > MAX_META_KEY) return `Key is too long (limit: ${MAX_META_KEY} characters)`;
    if (key.startsWith('consul-')) return `Key prefix 'consul-' is reserved for internal use`;
    if (typeof value === 'string' && value.length > MAX_META_VALUE) return `Value is too long (limit: ${MAX_META_VALUE} characters)`;
  }
  return undefined;
}

interface NodeEntry {
  node: ConsulNode;
  services: Map<string, ConsulService>;
  checks: Map<string, ConsulCheck>;
  /** Check ids by the service id they belong to (`''`: the node's own checks). */
  checksOf: Map<string, Set<string>>;
  /** When each check id entered `checks`: their order there, so that a service's checks merge with the node's in it. */
  checkOrder: Map<string, number>;
}

interface Waiter {
  ready(): boolean;
  answer(): void;
  /** The service whose index the query waits on; undefined for the service list. */
  service: string | undefined;
}

interface TtlTimer {
  ttlMs: number;
  timer: ReturnType<typeof setTimeout>;
}

/** Starts a test Consul on a free loopback port. */
export async function startConsulServer(options: ConsulServerOptions = {}): Promise<ConsulServer> {
  const datacenter = options.datacenter ?? 'dc1';
  const agentNode = options.nodeName ?? 'consul-agent-1';
  const tokens = options.tokens;
  let raft = options.startIndex ?? 10;
  const nodes = new Map<string, NodeEntry>();
  /** service name -> last index a write touched it. */
  const serviceIndex = new Map<string, number>();
  let servicesTableIndex = raft;
  /**
   * service name -> node name -> ids of that node's services of that name, in the node's order:
   * a read of one service visits only the nodes that hold it, not every service of every node.
   */
  const byName = new Map<string, Map<string, Set<string>>>();
  let checkSeq = 0;
  const waiters = new Set<Waiter>();
  /**
   * Waiting queries by what moves their index, so that a write asks only the queries it may answer:
   * a service's own index; the services table's for the list and for services never written yet
   * (their index is the table's), in `onTable`.
   */
  const waitersOf = new Map<string, Set<Waiter>>();
  const onTable = new Set<Waiter>();
  /** What writes moved since the last wake. */
  const touched = new Set<string>();
  let tableTouched = false;
  let allTouched = false;
  const ttls = new Map<string, TtlTimer>();
  const requests: ConsulRequestRecord[] = [];

  const bump = (): number => (raft += 1);
  const setServiceIndex = (name: string, index: number): void => {
    serviceIndex.set(name, index);
    touched.add(name);
  };
  const setTableIndex = (index: number): void => {
    servicesTableIndex = index;
    tableTouched = true;
  };
  const addWaiter = (w: Waiter): void => {
    waiters.add(w);
    if (w.service === undefined || !serviceIndex.has(w.service)) onTable.add(w);
    if (w.service !== undefined) {
      let set = waitersOf.get(w.service);
      if (set === undefined) waitersOf.set(w.service, (set = new Set()));
      set.add(w);
    }
  };
  const removeWaiter = (w: Waiter): void => {
    waiters.delete(w);
    onTable.delete(w);
    if (w.service === undefined) return;
    const set = waitersOf.get(w.service);
    set?.delete(w);
    if (set?.size === 0) waitersOf.delete(w.service);
  };
  /** Answers the waiting queries whose index moved: only those a write since the last wake touched can have. */
  const wake = (): void => {
    const asked = new Set<Waiter>();
    if (allTouched) for (const w of waiters) asked.add(w);
    else {
      for (const name of touched) for (const w of waitersOf.get(name) ?? []) asked.add(w);
      if (tableTouched) for (const w of onTable) asked.add(w);
    }
    touched.clear();
    tableTouched = false;
    allTouched = false;
    for (const w of asked) {
      // A service written for the first time has an index of its own from now on.
      if (w.service !== undefined && serviceIndex.has(w.service)) onTable.delete(w);
      if (waiters.has(w) && w.ready()) w.answer();
    }
  };

  const indexService = (entry: NodeEntry, id: string, name: string): void => {
    let onNodes = byName.get(name);
    if (onNodes === undefined) byName.set(name, (onNodes = new Map()));
    let ids = onNodes.get(entry.node.Node);
    if (ids === undefined) onNodes.set(entry.node.Node, (ids = new Set()));
    ids.add(id);
  };
  const unindexService = (entry: NodeEntry, id: string, name: string): void => {
    const onNodes = byName.get(name);
    const ids = onNodes?.get(entry.node.Node);
    if (onNodes === undefined || ids === undefined) return;
    ids.delete(id);
    if (ids.size === 0) onNodes.delete(entry.node.Node);
    if (onNodes.size === 0) byName.delete(name);
  };
  const indexCheck = (entry: NodeEntry, checkId: string, serviceId: string): void => {
    let ids = entry.checksOf.get(serviceId);
    if (ids === undefined) entry.checksOf.set(serviceId, (ids = new Set()));
    ids.add(checkId);
  };
  const unindexCheck = (entry: NodeEntry, checkId: string, serviceId: string): void => {
    const ids = entry.checksOf.get(serviceId);
    ids?.delete(checkId);
    if (ids?.size === 0) entry.checksOf.delete(serviceId);
  };

  const ensureNode = (name: string, address: string | undefined, meta: Record<string, string> | undefined, skipUpdate: boolean): NodeEntry => {
    const existing = nodes.get(name);
    if (existing !== undefined) {
      if (!skipUpdate) {
        const same = (address === undefined || existing.node.Address === address) && (meta === undefined || JSON.stringify(existing.node.Meta) === JSON.stringify(meta));
        if (!same) {
          if (address !== undefined) existing.node.Address = address;
          if (meta !== undefined) existing.node.Meta = { ...meta };
          existing.node.ModifyIndex = bump();
        }
      }
      return existing;
    }
    if (address === undefined || address === '') throw new HttpError(500, 'Must provide address if SkipNodeUpdate is not set');
    const index = bump();
    const entry: NodeEntry = {
      node: { ID: randomUUID(), Node: name, Address: address, Datacenter: datacenter, TaggedAddresses: {}, Meta: { ...(meta ?? {}) }, CreateIndex: index, ModifyIndex: index },
      services: new Map(),
      checks: new Map(),
      checksOf: new Map(),
      checkOrder: new Map(),
    };
    nodes.set(name, entry);
    return entry;
  };

  /** Stores a service; answers whether anything changed. */
  const putService = (entry: NodeEntry, svc: Omit<ConsulService, 'CreateIndex' | 'ModifyIndex'>): boolean => {
    const old = entry.services.get(svc.ID);
    const sameAs = (o: ConsulService) =>
      o.Service === svc.Service &&
      o.Address === svc.Address &&
      o.Port === svc.Port &&
      JSON.stringify(o.Tags) === JSON.stringify(svc.Tags) &&
      JSON.stringify(o.Meta) === JSON.stringify(svc.Meta) &&
      o.Weights.Passing === svc.Weights.Passing &&
      o.Weights.Warning === svc.Weights.Warning &&
      o.EnableTagOverride === svc.EnableTagOverride;
    if (old !== undefined && sameAs(old)) return false;
    const index = bump();
    entry.services.set(svc.ID, { ...svc, CreateIndex: old?.CreateIndex ?? index, ModifyIndex: index });
    if (old === undefined) indexService(entry, svc.ID, svc.Service);
    else if (old.Service !== svc.Service) {
      unindexService(entry, svc.ID, old.Service);
      // The id keeps its place among the node's services: the new name's ids follow that order.
      const ids = new Set([...entry.services.values()].filter((s) => s.Service === svc.Service).map((s) => s.ID));
      let onNodes = byName.get(svc.Service);
      if (onNodes === undefined) byName.set(svc.Service, (onNodes = new Map()));
      onNodes.set(entry.node.Node, ids);
    }
    setServiceIndex(svc.Service, index);
    if (old !== undefined && old.Service !== svc.Service) setServiceIndex(old.Service, index);
    setTableIndex(index);
    return true;
  };

  const putCheck = (entry: NodeEntry, check: Omit<ConsulCheck, 'CreateIndex' | 'ModifyIndex' | 'Node' | 'ServiceName' | 'ServiceTags'>): void => {
    let serviceName = '';
    let serviceTags: string[] = [];
    if (check.ServiceID !== '') {
      const svc = entry.services.get(check.ServiceID);
      if (svc === undefined) throw new HttpError(500, `Unknown service ID '${check.ServiceID}' for check ID '${check.CheckID}'`);
      serviceName = svc.Service;
      serviceTags = svc.Tags;
    }
    const old = entry.checks.get(check.CheckID);
    const next = { ...check, Node: entry.node.Node, ServiceName: serviceName, ServiceTags: serviceTags };
    if (
      old !== undefined &&
      old.Status === next.Status &&
      old.Output === next.Output &&
      old.Name === next.Name &&
      old.ServiceID === next.ServiceID &&
      old.Notes === next.Notes &&
      old.Type === next.Type
    ) {
      return;
    }
    const index = bump();
    entry.checks.set(check.CheckID, { ...next, CreateIndex: old?.CreateIndex ?? index, ModifyIndex: index });
    if (old === undefined) {
      entry.checkOrder.set(check.CheckID, (checkSeq += 1));
      indexCheck(entry, check.CheckID, next.ServiceID);
    } else if (old.ServiceID !== next.ServiceID) {
      unindexCheck(entry, check.CheckID, old.ServiceID);
      indexCheck(entry, check.CheckID, next.ServiceID);
    }
    if (serviceName !== '') setServiceIndex(serviceName, index);
    else for (const svc of entry.services.values()) setServiceIndex(svc.Service, index);
  };

  const removeService = (entry: NodeEntry, id: string): boolean => {
    const svc = entry.services.get(id);
    if (svc === undefined) return false;
    const index = bump();
    entry.services.delete(id);
    unindexService(entry, id, svc.Service);
    for (const checkId of entry.checksOf.get(id) ?? []) {
      entry.checks.delete(checkId);
      entry.checkOrder.delete(checkId);
      clearTtl(entry.node.Node, checkId);
    }
    entry.checksOf.delete(id);
    setServiceIndex(svc.Service, index);
    setTableIndex(index);
    return true;
  };

  const ttlKey = (node: string, checkId: string) => `${node}\u0000${checkId}`;
  const clearTtl = (node: string, checkId: string): void => {
    const key = ttlKey(node, checkId);
    const t = ttls.get(key);
    if (t !== undefined) clearTimeout(t.timer);
    ttls.delete(key);
  };
  const armTtl = (node: string, checkId: string, ttlMs: number): void => {
    clearTtl(node, checkId);
    const timer = setTimeout(() => {
      ttls.delete(ttlKey(node, checkId));
      const entry = nodes.get(node);
      const check = entry?.checks.get(checkId);
      if (entry === undefined || check === undefined) return;
      putCheck(entry, { ...check, Status: 'critical', Output: 'TTL expired' });
      wake();
    }, ttlMs);
    timer.unref();
    ttls.set(ttlKey(node, checkId), { ttlMs, timer });
  };

  // The agent's own node, alive.
  {
    const entry = ensureNode(agentNode, '127.0.0.1', {}, false);
    putCheck(entry, { CheckID: 'serfHealth', Name: 'Serf Health Status', Status: 'passing', Notes: '', Output: 'Agent alive and reachable', ServiceID: '', Type: '' });
    // A server agent lists itself as the service `consul`, as every Consul cluster does.
    putService(entry, { ID: 'consul', Service: 'consul', Tags: [], Address: '', Port: 8300, Meta: { 'raft_version': '3' }, Weights: { Passing: 1, Warning: 1 }, EnableTagOverride: false });
  }

  const serviceOf = (raw: Record<string, unknown>, where: 'agent' | 'catalog', node: string): Omit<ConsulService, 'CreateIndex' | 'ModifyIndex'> => {
    const name = str(raw.Service ?? raw.Name ?? raw.name ?? raw.service);
    const id = str(raw.ID ?? raw.id) || name;
    if (name === '') throw new HttpError(where === 'agent' ? 400 : 500, where === 'agent' ? 'Missing service name' : 'Must provide service name (Service.Service) with ID');
    const meta = (raw.Meta ?? raw.meta ?? {}) as Record<string, unknown>;
    const problem = metaProblem(meta);
    if (problem !== undefined) {
      throw where === 'agent' ? new HttpError(400, `Invalid Service Meta: ${problem}`) : new HttpError(500, `Invalid Service Meta for node ${node} and serviceID ${id}: ${problem}`);
    }
    const rawWeights = (raw.Weights ?? raw.weights) as { Passing?: number; Warning?: number } | undefined;
    const weights = { Passing: rawWeights?.Passing ?? 1, Warning: rawWeights?.Warning ?? 1 };
    if (rawWeights !== undefined && (!(weights.Passing >= 1) || weights.Passing > 65535 || !(weights.Warning >= 0) || weights.Warning > 65535)) {
      throw new HttpError(where === 'agent' ? 400 : 500, `Invalid Weights: Passing must be greater than 0`);
    }
    const address = str(raw.Address ?? raw.address);
    if (address === '0.0.0.0' || address === '::' || address === '[::]') throw new HttpError(400, `Invalid service address`);
    const port = Number(raw.Port ?? raw.port ?? 0);
    return {
      ID: id,
      Service: name,
      Tags: Array.isArray(raw.Tags ?? raw.tags) ? ((raw.Tags ?? raw.tags) as unknown[]).map(String) : [],
      Address: address,
      Port: Number.isInteger(port) ? port : 0,
      Meta: Object.fromEntries(Object.entries(meta).map(([k, v]) => [k, String(v)])),
      Weights: weights,
      EnableTagOverride: raw.EnableTagOverride === true,
    };
  };

  const checkStatusOf = (raw: unknown): ConsulHealth => {
    const s = str(raw);
    if (s === '') return 'critical';
    if (s !== 'passing' && s !== 'warning' && s !== 'critical') throw new HttpError(400, `Invalid check status: "${s}"`);
    return s;
  };

  const catalogRegister = (body: Record<string, unknown>): void => {
    const nodeName = str(body.Node);
    if (nodeName === '') throw new HttpError(500, 'Must provide node');
    const dc = str(body.Datacenter);
    if (dc !== '' && dc !== datacenter) throw new HttpError(500, 'No path to datacenter');
    const nodeMeta = body.NodeMeta as Record<string, string> | undefined;
    if (nodeMeta !== undefined) {
      const problem = metaProblem(nodeMeta);
      if (problem !== undefined) throw new HttpError(500, `Invalid node metadata: ${problem}`);
    }
    // Check the whole request before the first write, as one transaction.
    const svc = body.Service !== undefined && body.Service !== null ? serviceOf(body.Service as Record<string, unknown>, 'catalog', nodeName) : undefined;
    const rawChecks = [...(body.Check ? [body.Check] : []), ...(Array.isArray(body.Checks) ? body.Checks : [])] as Array<Record<string, unknown>>;
    const checks = rawChecks.map((c) => {
      const checkId = str(c.CheckID) || str(c.Name);
      if (checkId === '') throw new HttpError(500, 'Missing check ID');
      return { CheckID: checkId, Name: str(c.Name) || checkId, Status: checkStatusOf(c.Status), Notes: str(c.Notes), Output: str(c.Output), ServiceID: str(c.ServiceID), Type: str(c.Type) };
    });
    const skip = body.SkipNodeUpdate === true;
    const address = body.Address === undefined ? undefined : str(body.Address);
    if (!skip && (address === undefined || address === '')) throw new HttpError(500, 'Must provide address if SkipNodeUpdate is not set');
    const entry = ensureNode(nodeName, address, nodeMeta, skip);
    if (svc !== undefined) putService(entry, svc);
    for (const c of checks) putCheck(entry, c);
    wake();
  };

  const catalogDeregister = (body: { Node?: unknown; ServiceID?: unknown; CheckID?: unknown; Datacenter?: unknown }): void => {
    const nodeName = str(body.Node);
    if (nodeName === '') throw new HttpError(500, 'Must provide node');
    const dc = str(body.Datacenter);
    if (dc !== '' && dc !== datacenter) throw new HttpError(500, 'No path to datacenter');
    const entry = nodes.get(nodeName);
    if (entry === undefined) return;
    const serviceId = str(body.ServiceID);
    const checkId = str(body.CheckID);
    if (serviceId !== '') removeService(entry, serviceId);
    else if (checkId !== '') {
      const check = entry.checks.get(checkId);
      if (check !== undefined) {
        const index = bump();
        entry.checks.delete(checkId);
        entry.checkOrder.delete(checkId);
        unindexCheck(entry, checkId, check.ServiceID);
        clearTtl(nodeName, checkId);
        if (check.ServiceName !== '') setServiceIndex(check.ServiceName, index);
      }
    } else {
      for (const id of [...entry.services.keys()]) removeService(entry, id);
      for (const id of entry.checks.keys()) clearTtl(nodeName, id);
      bump();
      nodes.delete(nodeName);
    }
    wake();
  };

  /** A service's checks and its node's, in the order the node keeps its checks. */
  const checksFor = (entry: NodeEntry, serviceId: string): ConsulCheck[] => {
    const ids = [...(entry.checksOf.get('') ?? []), ...(entry.checksOf.get(serviceId) ?? [])];
    if (ids.length > 1) ids.sort((a, b) => (entry.checkOrder.get(a) as number) - (entry.checkOrder.get(b) as number));
    return ids.map((id) => entry.checks.get(id) as ConsulCheck);
  };

  const healthService = (name: string, tag?: string) => {
    const out: Array<{ Node: ConsulNode; Service: ConsulService; Checks: ConsulCheck[] }> = [];
    const onNodes = byName.get(name);
    if (onNodes === undefined) return out;
    for (const nodeName of [...onNodes.keys()].sort((a, b) => a.localeCompare(b))) {
      const entry = nodes.get(nodeName) as NodeEntry;
      for (const id of onNodes.get(nodeName) as Set<string>) {
        const svc = entry.services.get(id) as ConsulService;
        if (tag !== undefined && !svc.Tags.includes(tag)) continue;
        const checks = checksFor(entry, id);
        out.push({ Node: { ...entry.node }, Service: { ...svc, Tags: [...svc.Tags], Meta: { ...svc.Meta } }, Checks: checks.map((c) => ({ ...c })) });
      }
    }
    return out;
  };

  const catalogService = (name: string, tag?: string) =>
    healthService(name, tag).map(({ Node: n, Service: s }) => ({
      ID: n.ID,
      Node: n.Node,
      Address: n.Address,
      Datacenter: n.Datacenter,
      TaggedAddresses: n.TaggedAddresses,
      NodeMeta: n.Meta,
      ServiceKind: '',
      ServiceID: s.ID,
      ServiceName: s.Service,
      ServiceTags: s.Tags,
      ServiceAddress: s.Address,
      ServiceWeights: s.Weights,
      ServiceMeta: s.Meta,
      ServicePort: s.Port,
      ServiceEnableTagOverride: s.EnableTagOverride,
      CreateIndex: s.CreateIndex,
      ModifyIndex: s.ModifyIndex,
    }));

  const catalogServices = (): Record<string, string[]> => {
    const out: Record<string, Set<string>> = {};
    for (const entry of nodes.values()) for (const svc of entry.services.values()) for (const t of svc.Tags) (out[svc.Service] ??= new Set()).add(t);
    for (const entry of nodes.values()) for (const svc of entry.services.values()) out[svc.Service] ??= new Set();
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...v].sort()]));
  };

  const indexOfService = (name: string): number => Math.max(1, serviceIndex.get(name) ?? servicesTableIndex);

  /** Who a request is, under ACLs: undefined when ACLs are off. */
  const aclOf = (token: string | undefined): { policy: ConsulTokenPolicy | 'none'; accessor: string } | undefined => {
    if (tokens === undefined) return undefined;
    if (token === undefined || token === '') return { policy: 'none', accessor: ANONYMOUS_ACCESSOR };
    const policy = tokens[token];
    if (policy === undefined) throw new HttpError(403, 'ACL not found');
    return { policy, accessor: `accessor-${Buffer.from(token).toString('hex').slice(0, 8)}` };
  };
  const denied = (acl: { accessor: string }, permission: string, on: string): HttpError =>
    new HttpError(
      403,
      acl.accessor === ANONYMOUS_ACCESSOR
        ? `Permission denied: anonymous token lacks permission '${permission}' on "${on}". The anonymous token is used implicitly when a request does not specify a token.`
        : `Permission denied: token with AccessorID '${acl.accessor}' lacks permission '${permission}' on "${on}"`,
    );

  type Reply = { status: number; body: unknown; index?: number; filtered?: boolean };

  /**
   * Answers a read, blocking when asked: `indexOf` is the read's index (cheap: a write asks it of
   * the waiting queries it may answer), `read` its body, `service` the service whose index it is
   * (undefined: the services table's).
   */
  const blockingRead = (
    query: Record<string, string>,
    res: ServerResponse,
    indexOf: () => number,
    read: () => { body: unknown; filtered?: boolean },
    send: (r: Reply) => void,
    service?: string,
  ): void => {
    const min = query.index === undefined ? 0 : Number(query.index);
    if (!Number.isFinite(min) || min < 0) throw new HttpError(400, 'Invalid index');
    const waitMs = Math.min(query.wait === undefined ? DEFAULT_WAIT_MS : parseGoDuration(query.wait), MAX_WAIT_MS);
    // Not blocking, moved past, or moved back (a restore): answered at once.
    if (min === 0 || indexOf() !== min) {
      send({ status: 200, index: indexOf(), ...read() });
      return;
    }
    let done = false;
    const finish = (): void => {
      done = true;
      clearTimeout(timer);
      removeWaiter(waiter);
    };
    const waiter: Waiter = {
      service,
      ready: () => indexOf() !== min,
      answer: () => {
        if (done) return;
        finish();
        send({ status: 200, index: indexOf(), ...read() });
      },
    };
    const timer = setTimeout(() => waiter.answer(), waitMs);
    addWaiter(waiter);
    res.on('close', () => {
      if (!done) finish();
    });
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const path = decodeURIComponent(url.pathname);
    const query = Object.fromEntries(url.searchParams.entries());
    const headerToken = req.headers['x-consul-token'];
    const bearer = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const token = (Array.isArray(headerToken) ? headerToken[0] : headerToken) ?? bearer ?? query.token;
    const record: ConsulRequestRecord = { method: req.method ?? 'GET', path, query, token, status: 0, blocking: Number(query.index ?? 0) > 0 };
    const send = (r: Reply): void => {
      record.status = r.status;
      requests.push(record);
      const headers: Record<string, string> = {
        'X-Consul-Default-ACL-Policy': tokens === undefined ? 'allow' : 'deny',
        'X-Consul-Effective-Consistency': 'leader',
      };
      if (r.index !== undefined) {
        headers['X-Consul-Index'] = String(r.index);
        headers['X-Consul-KnownLeader'] = 'true';
        headers['X-Consul-LastContact'] = '0';
      }
      if (r.filtered === true) headers['X-Consul-Results-Filtered-By-ACLs'] = 'true';
      if (typeof r.body === 'string' && r.status >= 400) {
        res.writeHead(r.status, { ...headers, 'Content-Type': 'text/plain; charset=utf-8' });
        res.end(r.body);
      } else {
        res.writeHead(r.status, { ...headers, 'Content-Type': 'application/json' });
        res.end(JSON.stringify(r.body));
      }
    };
    try {
      const body = await readBody(req);
      if (query.ns !== undefined || req.headers['x-consul-namespace'] !== undefined) throw new HttpError(400, 'Namespaces are a Consul Enterprise feature');
      if (query.partition !== undefined) throw new HttpError(400, 'Partitions are a Consul Enterprise feature');
      if (query.stale !== undefined && query.consistent !== undefined) throw new HttpError(400, 'Cannot specify ?stale with ?consistent, conflicting semantics.');
      if (query.dc !== undefined && query.dc !== '' && query.dc !== datacenter) throw new HttpError(500, 'No path to datacenter');
      const acl = aclOf(token);
      const canRead = acl === undefined || acl.policy !== 'none';
      // A blocking read resolves its token again when it answers, as Consul runs the query again:
      // a policy changed while it waited applies to its answer.
      const mayRead = (): boolean => {
        if (acl === undefined) return true;
        const policy = token === undefined || token === '' ? 'none' : tokens?.[token];
        return policy !== undefined && policy !== 'none';
      };
      const mustWrite = (on: string, permission = 'service:write') => {
        if (acl !== undefined && acl.policy !== 'write') throw denied(acl, permission, on);
      };
      const method = req.method ?? 'GET';
      const route = (verb: string, pattern: RegExp): RegExpExecArray | null => {
        const m = pattern.exec(path);
        if (m === null) return null;
        if (method !== verb) throw new HttpError(405, `method ${method} not allowed`);
        return m;
      };
      let m: RegExpExecArray | null;
      if ((m = route('GET', /^\/v1\/status\/leader$/))) return send({ status: 200, body: '127.0.0.1:8300' });
      if ((m = route('GET', /^\/v1\/agent\/self$/))) {
        return send({ status: 200, body: { Config: { Datacenter: datacenter, NodeName: agentNode, Version: '1.20.0', Server: true }, Member: { Name: agentNode, Addr: '127.0.0.1', Status: 1 } } });
      }
      if ((m = route('GET', /^\/v1\/catalog\/services$/))) {
        blockingRead(query, res, () => Math.max(1, servicesTableIndex), () => ({ body: mayRead() ? catalogServices() : {}, filtered: !mayRead() }), send);
        return;
      }
      if ((m = route('GET', /^\/v1\/catalog\/service\/(.+)$/))) {
        const name = m[1] as string;
        blockingRead(query, res, () => indexOfService(name), () => ({ body: mayRead() ? catalogService(name, query.tag) : [], filtered: !mayRead() }), send, name);
        return;
      }
      if ((m = route('GET', /^\/v1\/health\/service\/(.+)$/))) {
        const name = m[1] as string;
        const passingOnly = query.passing !== undefined && query.passing !== 'false' && query.passing !== '0';
        blockingRead(
          query,
          res,
          () => indexOfService(name),
          () => {
            let entries = mayRead() ? healthService(name, query.tag) : [];
            if (passingOnly) entries = entries.filter((e) => e.Checks.every((c) => c.Status === 'passing'));
            return { body: entries, filtered: !mayRead() };
          },
          send,
          name,
        );
        return;
      }
      if ((m = route('GET', /^\/v1\/catalog\/node-services\/(.+)$/))) {
        const entry = nodes.get(m[1] as string);
        return send({ status: 200, body: entry === undefined || !canRead ? null : { Node: entry.node, Services: [...entry.services.values()] }, index: raft });
      }
      if ((m = route('GET', /^\/v1\/catalog\/nodes$/))) return send({ status: 200, body: canRead ? [...nodes.values()].map((e) => e.node) : [], index: raft });
      if ((m = route('PUT', /^\/v1\/catalog\/register$/))) {
        const b = json(body) as Record<string, unknown>;
        mustWrite(str((b.Service as Record<string, unknown> | undefined)?.Service) || str(b.Node), b.Service ? 'service:write' : 'node:write');
        catalogRegister(b);
        return send({ status: 200, body: true });
      }
      if ((m = route('PUT', /^\/v1\/catalog\/deregister$/))) {
        const b = json(body) as Record<string, unknown>;
        mustWrite(str(b.Node), 'node:write');
        catalogDeregister(b);
        return send({ status: 200, body: true });
      }
      if ((m = route('PUT', /^\/v1\/agent\/service\/register$/))) {
        const b = json(body) as Record<string, unknown>;
        const svc = serviceOf(b, 'agent', agentNode);
        mustWrite(svc.Service);
        const entry = nodes.get(agentNode) as NodeEntry;
        const rawChecks = [...(b.Check ? [b.Check] : []), ...(Array.isArray(b.Checks) ? b.Checks : [])] as Array<Record<string, unknown>>;
        const checks = rawChecks.map((c, i) => {
          const checkId = str(c.CheckID ?? c.ID ?? c.id) || (rawChecks.length === 1 && b.Check ? `service:${svc.ID}` : `service:${svc.ID}:${i + 1}`);
          const ttl = str(c.TTL ?? c.ttl);
          return {
            check: { CheckID: checkId, Name: str(c.Name ?? c.name) || `Service '${svc.Service}' check`, Status: checkStatusOf(c.Status ?? c.status), Notes: str(c.Notes ?? c.notes), Output: '', ServiceID: svc.ID, Type: ttl !== '' ? 'ttl' : '' },
            ttlMs: ttl === '' ? undefined : parseGoDuration(ttl),
          };
        });
        putService(entry, svc);
        for (const c of checks) {
          putCheck(entry, c.check);
          if (c.ttlMs !== undefined) armTtl(agentNode, c.check.CheckID, c.ttlMs);
        }
        wake();
        return send({ status: 200, body: '' });
      }
      if ((m = route('PUT', /^\/v1\/agent\/service\/deregister\/(.+)$/))) {
        const id = m[1] as string;
        const entry = nodes.get(agentNode) as NodeEntry;
        const svc = entry.services.get(id);
        if (svc !== undefined) mustWrite(svc.Service);
        removeService(entry, id);
        wake();
        return send({ status: 200, body: '' });
      }
      if ((m = route('PUT', /^\/v1\/agent\/check\/(pass|warn|fail|update)\/(.+)$/))) {
        const entry = nodes.get(agentNode) as NodeEntry;
        const checkId = m[2] as string;
        const check = entry.checks.get(checkId);
        if (check === undefined) throw new HttpError(404, `Unknown check ID "${checkId}". Ensure that the check ID is passed, not the check name.`);
        mustWrite(check.ServiceName || agentNode);
        let status: ConsulHealth;
        let output = query.note ?? '';
        if (m[1] === 'update') {
          const b = json(body) as { Status?: string; Output?: string };
          status = checkStatusOf(b.Status);
          output = b.Output ?? '';
        } else status = m[1] === 'pass' ? 'passing' : m[1] === 'warn' ? 'warning' : 'critical';
        putCheck(entry, { ...check, Status: status, Output: output });
        const ttl = ttls.get(ttlKey(agentNode, checkId));
        if (ttl !== undefined) armTtl(agentNode, checkId, ttl.ttlMs);
        wake();
        return send({ status: 200, body: '' });
      }
      if ((m = route('GET', /^\/v1\/agent\/services$/))) {
        const entry = nodes.get(agentNode) as NodeEntry;
        return send({ status: 200, body: canRead ? Object.fromEntries([...entry.services.values()].filter((s) => s.ID !== 'consul').map((s) => [s.ID, { ...s, Datacenter: datacenter }])) : {} });
      }
      if ((m = route('GET', /^\/v1\/agent\/checks$/))) {
        const entry = nodes.get(agentNode) as NodeEntry;
        return send({ status: 200, body: canRead ? Object.fromEntries([...entry.checks.values()].filter((c) => c.ServiceID !== '').map((c) => [c.CheckID, c])) : {} });
      }
      throw new HttpError(404, '404 page not found');
    } catch (err) {
      if (err instanceof HttpError) return send({ status: err.status, body: err.message });
      return send({ status: 500, body: String(err) });
    }
  };

  const listener = (): Server =>
    options.tls === undefined
      ? createServer((req, res) => void handle(req, res))
      : // An https.Server is an http.Server over TLS: every use below is common to both.
        (createHttpsServer({ key: options.tls.key, cert: options.tls.cert }, (req, res) => void handle(req, res)) as unknown as Server);
  const listening = await listenRestartable(listener, () => {
    for (const w of [...waiters]) waiters.delete(w);
  });
  const port = listening.port;

  return {
    endpoint: `127.0.0.1:${port}`,
    port,
    datacenter,
    requests,
    index: () => raft,
    healthService: (name) => healthService(name),
    catalogRegister,
    catalogDeregister: (body) => catalogDeregister(body),
    setCheckStatus(node, checkId, status) {
      const entry = nodes.get(node);
      const check = entry?.checks.get(checkId);
      if (entry === undefined || check === undefined) throw new Error(`no check ${checkId} on node ${node}`);
      putCheck(entry, { ...check, Status: status });
      wake();
    },
    resetIndex(to) {
      raft = to;
      servicesTableIndex = Math.min(servicesTableIndex, to);
      for (const [name, index] of serviceIndex) serviceIndex.set(name, Math.min(index, to));
      allTouched = true;
      wake();
    },
    waitingQueries: () => waiters.size,
    stop: () => listening.stop(),
    start: () => listening.start(),
    async close() {
      for (const t of ttls.values()) clearTimeout(t.timer);
      ttls.clear();
      await listening.close();
    },
  };
}

function str(value: unknown): string {
  return typeof value === 'string' ? value : value === undefined || value === null ? '' : String(value);
}

function json(text: string): unknown {
  if (text === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'Request decode failed: invalid character');
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
