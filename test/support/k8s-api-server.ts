import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

/** The two resources the test API server serves. */
export type K8sResource = 'services' | 'endpointslices';

/** A stored object, as JSON on the wire. Tests build and read these loosely. */
export interface K8sObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    generateName?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<Record<string, unknown>>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** How a watch from a resourceVersion older than the kept history is answered. */
export type StaleWatchMode = 'http' | 'event';

/** One request the server answered, for tests to count and inspect. */
export interface K8sRequestRecord {
  method: string;
  resource: K8sResource | undefined;
  namespace: string | undefined;
  name: string | undefined;
  /** `list`, `watch`, `get`, `create`, `update`, `delete`, or `other`. */
  verb: 'list' | 'watch' | 'get' | 'create' | 'update' | 'delete' | 'other';
  query: Record<string, string>;
  status: number;
}

export interface K8sApiServerOptions {
  /** Namespaces that exist (a create elsewhere answers 404). Default `['default']`. */
  namespaces?: string[];
  /** Watch events kept for resuming watches; older resourceVersions answer 410. Default 10 000. */
  maxHistory?: number;
  /** Default `http`. */
  staleWatch?: StaleWatchMode;
  /**
   * A bearer token every request must carry (`Authorization: Bearer <token>`), else 401
   * Unauthorized as a real API server answers an unknown token. Absent: no authentication.
   */
  token?: string;
}

/**
 * A Kubernetes API server for tests, speaking the real wire protocol for Services (core/v1) and
 * EndpointSlices (discovery.k8s.io/v1) on 127.0.0.1 over plain HTTP, so that the real
 * `@kubernetes/client-node` can talk to it:
 *
 * - list (namespaced and across namespaces) answering `{kind, apiVersion, metadata: {resourceVersion}, items}`;
 * - watch (`?watch=1&resourceVersion=..&allowWatchBookmarks=true&timeoutSeconds=..`) as chunked,
 *   newline-delimited JSON events ADDED / MODIFIED / DELETED / BOOKMARK / ERROR, resumed from the
 *   kept history; an object leaving or entering a label selector is sent as DELETED / ADDED, as the
 *   real watch cache does; a resourceVersion older than the history answers 410 Gone, as an HTTP 410
 *   or as an ERROR event carrying a Status with code 410 ({@link staleWatch});
 * - label selectors `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma-joined;
 * - get, create (409 AlreadyExists, `generateName`), replace (409 Conflict on a stale
 *   resourceVersion), delete (with `preconditions`), 404 NotFound for missing objects and namespaces;
 * - one global, monotonically increasing resourceVersion.
 *
 * Test helpers edit objects directly (events flow as if a controller wrote them), cut open watches,
 * compact the history (every older resourceVersion then answers 410), send bookmarks, and make the
 * server answer 503 for a while.
 *
 * Deliberately left out: TLS, authentication beyond one bearer token ({@link K8sApiServerOptions.token}), patch, pagination (`limit`/`continue` are ignored),
 * field selectors, server-side apply, garbage collection of owned objects, any other resource.
 */
export interface K8sApiServer {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  /** A KubeConfig built in code that points the client at this server. */
  kubeConfig(): KubeConfig;
  /** The same as a kubeconfig file's YAML text (for `options.kubeconfig`); its user sends `token` when given. */
  kubeconfigYaml(token?: string): string;
  /** How stale watches are refused; may be changed at any time. */
  staleWatch: StaleWatchMode;
  /** Every request answered so far, oldest first. */
  readonly requests: readonly K8sRequestRecord[];
  /** The current (last written) resourceVersion. */
  resourceVersion(): number;
  addNamespace(namespace: string): void;
  get(resource: K8sResource, namespace: string, name: string): K8sObject | undefined;
  list(resource: K8sResource, namespace?: string): K8sObject[];
  /** Creates or replaces an object without any check; watchers see ADDED or MODIFIED. */
  put(resource: K8sResource, object: K8sObject): K8sObject;
  /** Deletes an object without any check; answers whether it existed. */
  remove(resource: K8sResource, namespace: string, name: string): boolean;
  /** Ends every open watch (`end`: the server closes the stream; `destroy`: the connection breaks). Answers how many. */
  cutWatches(how?: 'end' | 'destroy'): number;
  /** Forgets the whole event history: a watch from any older resourceVersion answers 410. */
  compact(): void;
  /** Sends a BOOKMARK with the current resourceVersion to every open watch that asked for bookmarks. Answers how many. */
  bookmark(): number;
  /** Open watch streams, of one resource or all. */
  openWatches(resource?: K8sResource): number;
  /** While on, every request answers 503 and open watches are cut. */
  setUnavailable(on: boolean): void;
  /**
   * Runs `fn` once, just before the next request with this verb on this resource is handled (after
   * its body was read): how a test makes another writer win a race deterministically.
   */
  beforeNext(verb: K8sRequestRecord['verb'], resource: K8sResource, fn: () => void): void;
  close(): Promise<void>;
}

interface ResourceInfo {
  kind: string;
  listKind: string;
  apiVersion: string;
  /** Collection path prefix before `/namespaces/...`. */
  base: string;
  /** What DELETE answers: the object (Services) or a Status (EndpointSlices). */
  deleteAnswersObject: boolean;
}

const RESOURCES: Record<K8sResource, ResourceInfo> = {
  services: { kind: 'Service', listKind: 'ServiceList', apiVersion: 'v1', base: '/api/v1', deleteAnswersObject: true },
  endpointslices: {
    kind: 'EndpointSlice',
    listKind: 'EndpointSliceList',
    apiVersion: 'discovery.k8s.io/v1',
    base: '/apis/discovery.k8s.io/v1',
    deleteAnswersObject: false,
  },
};

interface HistoryEvent {
  rv: number;
  resource: K8sResource;
  namespace: string;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: K8sObject;
  previous: K8sObject | undefined;
}

interface Watcher {
  resource: K8sResource;
  namespace: string | undefined;
  selector: Requirement[];
  bookmarks: boolean;
  res: ServerResponse;
  timer: NodeJS.Timeout | undefined;
}

type Requirement =
  | { op: 'exists' | 'notexists'; key: string }
  | { op: 'in' | 'notin'; key: string; values: string[] };

/** Thrown inside the server to answer with a Status. */
class StatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

function statusBody(code: number, reason: string, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

const clone = <T>(value: T): T => structuredClone(value);

/** Parses a label selector; throws a 400 StatusError on syntax it does not know. */
export function parseLabelSelector(text: string | undefined): Requirement[] {
  if (text === undefined || text.trim() === '') return [];
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of text) {
    if (ch === '(') depth += 1;
    if (ch === ')') depth -= 1;
    if (ch === ',' && depth === 0) {
      parts.push(current);
      current = '';
    } else current += ch;
  }
  parts.push(current);
  return parts.map((raw) => {
    const part = raw.trim();
    let m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(part);
    if (m) return { op: m[2] as 'in' | 'notin', key: m[1] as string, values: (m[3] as string).split(',').map((v) => v.trim()) };
    m = /^([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)$/.exec(part);
    if (m) return { op: m[2] === '!=' ? 'notin' : 'in', key: m[1] as string, values: [m[3] as string] };
    m = /^(!?)([\w./-]+)$/.exec(part);
    if (m) return { op: m[1] === '!' ? 'notexists' : 'exists', key: m[2] as string };
    throw new StatusError(400, 'BadRequest', `unable to parse requirement: ${JSON.stringify(part)}`);
  });
}

function matches(selector: Requirement[], object: K8sObject): boolean {
  const labels = object.metadata.labels ?? {};
  return selector.every((r) => {
    const value = labels[r.key];
    switch (r.op) {
      case 'exists':
        return value !== undefined;
      case 'notexists':
        return value === undefined;
      case 'in':
        return value !== undefined && r.values.includes(value);
      case 'notin':
        return value === undefined || !r.values.includes(value);
    }
  });
}

interface Route {
  resource: K8sResource;
  namespace: string | undefined;
  name: string | undefined;
}

function route(pathname: string): Route | undefined {
  for (const [resource, info] of Object.entries(RESOURCES) as Array<[K8sResource, ResourceInfo]>) {
    if (!pathname.startsWith(`${info.base}/`)) continue;
    const rest = pathname.slice(info.base.length + 1).split('/').map(decodeURIComponent);
    if (rest.length === 1 && rest[0] === resource) return { resource, namespace: undefined, name: undefined };
    if (rest.length === 3 && rest[0] === 'namespaces' && rest[2] === resource) return { resource, namespace: rest[1], name: undefined };
    if (rest.length === 4 && rest[0] === 'namespaces' && rest[2] === resource) return { resource, namespace: rest[1], name: rest[3] };
  }
  return undefined;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 10 * 1024 * 1024) throw new StatusError(413, 'RequestEntityTooLarge', 'request body too large');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new StatusError(400, 'BadRequest', 'request body is not JSON');
  }
}

const ANNOTATIONS_LIMIT = 256 * 1024;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** The checks the real API server makes that a client is likely to trip over. */
function validate(resource: K8sResource, object: K8sObject): void {
  const invalid = (detail: string) => new StatusError(422, 'Invalid', `${RESOURCES[resource].kind} "${object.metadata.name}" is invalid: ${detail}`);
  const name = object.metadata.name ?? '';
  if (resource === 'services' ? !DNS_1035.test(name) || name.length > 63 : !DNS_SUBDOMAIN.test(name) || name.length > 253) {
    throw invalid(`metadata.name: Invalid value: ${JSON.stringify(name)}`);
  }
  const annotations = object.metadata.annotations ?? {};
  const annotationBytes = Object.entries(annotations).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(String(v)), 0);
  if (annotationBytes > ANNOTATIONS_LIMIT) throw invalid('metadata.annotations: Too long: must have at most 262144 bytes');
  for (const [key, value] of Object.entries(object.metadata.labels ?? {})) {
    if (typeof value !== 'string' || value.length > 63) throw invalid(`metadata.labels: Invalid value: ${JSON.stringify(value)} for ${key}`);
  }
  if (resource === 'endpointslices') {
    if (!['IPv4', 'IPv6', 'FQDN'].includes(String(object.addressType))) throw invalid('addressType: Unsupported value');
    const endpoints = object.endpoints ?? [];
    if (!Array.isArray(endpoints)) throw invalid('endpoints: must be a list');
    if (endpoints.length > 1000) throw invalid('endpoints: Too many: must have at most 1000 items');
    for (const e of endpoints as Array<{ addresses?: unknown }>) {
      if (!Array.isArray(e.addresses) || e.addresses.length < 1 || e.addresses.length > 100) throw invalid('endpoints[].addresses: must have 1 to 100 items');
    }
    const ports = object.ports ?? [];
    if (!Array.isArray(ports) || ports.length > 20000) throw invalid('ports: must be a list');
  } else {
    const spec = (object.spec ?? {}) as { ports?: unknown[]; clusterIP?: string; type?: string };
    const headless = spec.clusterIP === 'None';
    if (spec.type !== 'ExternalName' && !headless && (!Array.isArray(spec.ports) || spec.ports.length === 0)) {
      throw invalid('spec.ports: Required value');
    }
  }
}

/**
 * Starts the test API server on 127.0.0.1, port 0 (a free one). Close it with `close()`.
 */
export async function startK8sApiServer(options: K8sApiServerOptions = {}): Promise<K8sApiServer> {
  const maxHistory = options.maxHistory ?? 10_000;
  const namespaces = new Set(options.namespaces ?? ['default']);
  const objects = new Map<string, K8sObject>();
  const history: HistoryEvent[] = [];
  const watchers = new Set<Watcher>();
  const requests: K8sRequestRecord[] = [];
  let rv = 1;
  /** Watches from a resourceVersion below this answer 410. */
  let compactedBefore = 0;
  let clusterIPs = 0;
  let unavailable = false;
  let staleWatch: StaleWatchMode = options.staleWatch ?? 'http';
  const interceptors: Array<{ verb: K8sRequestRecord['verb']; resource: K8sResource; fn: () => void }> = [];
  const intercept = (entry: K8sRequestRecord) => {
    const i = interceptors.findIndex((x) => x.verb === entry.verb && x.resource === entry.resource);
    if (i >= 0) interceptors.splice(i, 1)[0]?.fn();
  };

  const keyOf = (resource: K8sResource, namespace: string, name: string) => `${resource}/${namespace}/${name}`;
  const withKind = (resource: K8sResource, object: K8sObject): K8sObject => ({
    ...clone(object),
    kind: RESOURCES[resource].kind,
    apiVersion: RESOURCES[resource].apiVersion,
  });

  function send(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  function writeEvent(w: Watcher, type: string, object: unknown): void {
    if (!w.res.writableEnded && !w.res.destroyed) w.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  /** What a watcher with this selector sees of one change (or nothing). */
  function visible(w: Pick<Watcher, 'resource' | 'namespace' | 'selector'>, e: HistoryEvent): { type: string; object: K8sObject } | undefined {
    if (w.resource !== e.resource || (w.namespace !== undefined && w.namespace !== e.namespace)) return undefined;
    const now = e.type !== 'DELETED' && matches(w.selector, e.object);
    const before = e.previous !== undefined && matches(w.selector, e.previous);
    if (e.type === 'DELETED') return before ? { type: 'DELETED', object: e.object } : undefined;
    if (e.type === 'ADDED') return now ? { type: 'ADDED', object: e.object } : undefined;
    if (now && before) return { type: 'MODIFIED', object: e.object };
    if (now) return { type: 'ADDED', object: e.object };
    if (before) return { type: 'DELETED', object: e.object };
    return undefined;
  }

  function record(event: HistoryEvent): void {
    history.push(event);
    while (history.length > maxHistory) {
      const dropped = history.shift();
      if (dropped) compactedBefore = dropped.rv;
    }
    for (const w of watchers) {
      const seen = visible(w, event);
      if (seen) writeEvent(w, seen.type, withKind(event.resource, seen.object));
    }
  }

  function store(resource: K8sResource, object: K8sObject, previous: K8sObject | undefined): K8sObject {
    const namespace = object.metadata.namespace as string;
    rv += 1;
    const stored = clone(object);
    delete stored.kind;
    delete stored.apiVersion;
    stored.metadata.resourceVersion = String(rv);
    stored.metadata.uid = previous?.metadata.uid ?? stored.metadata.uid ?? randomUUID();
    stored.metadata.creationTimestamp = previous?.metadata.creationTimestamp ?? new Date().toISOString();
    if (resource === 'services') {
      const spec = ((stored.spec as Record<string, unknown> | undefined) ?? {}) as Record<string, unknown>;
      stored.spec = spec;
      spec.type ??= 'ClusterIP';
      const before = (previous?.spec as Record<string, unknown> | undefined)?.clusterIP;
      if (before !== undefined && (spec.clusterIP === undefined || spec.clusterIP === '')) spec.clusterIP = before;
      if (spec.type !== 'ExternalName' && (spec.clusterIP === undefined || spec.clusterIP === '')) {
        clusterIPs += 1;
        spec.clusterIP = `10.96.${(clusterIPs >> 8) & 255}.${clusterIPs & 255}`;
      }
    }
    objects.set(keyOf(resource, namespace, stored.metadata.name as string), stored);
    record({ rv, resource, namespace, type: previous ? 'MODIFIED' : 'ADDED', object: clone(stored), previous: previous && clone(previous) });
    return clone(stored);
  }

  function drop(resource: K8sResource, existing: K8sObject): K8sObject {
    const namespace = existing.metadata.namespace as string;
    objects.delete(keyOf(resource, namespace, existing.metadata.name as string));
    rv += 1;
    const gone = clone(existing);
    gone.metadata.resourceVersion = String(rv);
    record({ rv, resource, namespace, type: 'DELETED', object: gone, previous: clone(existing) });
    return clone(gone);
  }

  function listOf(resource: K8sResource, namespace: string | undefined, selector: Requirement[]): K8sObject[] {
    const prefix = namespace === undefined ? `${resource}/` : `${resource}/${namespace}/`;
    return [...objects.entries()]
      .filter(([key, o]) => key.startsWith(prefix) && matches(selector, o))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, o]) => clone(o));
  }

  function openWatch(req: IncomingMessage, res: ServerResponse, r: Route, query: URLSearchParams, selector: Requirement[]): void {
    const fromText = query.get('resourceVersion') ?? '';
    const w: Watcher = {
      resource: r.resource,
      namespace: r.namespace,
      selector,
      bookmarks: ['true', '1'].includes(query.get('allowWatchBookmarks') ?? ''),
      res,
      timer: undefined,
    };
    let replay: Array<{ type: string; object: K8sObject }>;
    if (fromText === '' || fromText === '0') {
      replay = listOf(r.resource, r.namespace, selector).map((object) => ({ type: 'ADDED', object }));
    } else {
      const from = Number(fromText);
      if (!Number.isInteger(from) || from < 0) throw new StatusError(400, 'BadRequest', `invalid resource version: ${fromText}`);
      if (from < compactedBefore) {
        const message = `too old resource version: ${from} (${compactedBefore})`;
        if (staleWatch === 'http') throw new StatusError(410, 'Expired', message);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify({ type: 'ERROR', object: statusBody(410, 'Expired', message) })}\n`);
        return;
      }
      replay = history.filter((e) => e.rv > from).flatMap((e) => visible(w, e) ?? []);
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.flushHeaders();
    for (const e of replay) writeEvent(w, e.type, withKind(r.resource, e.object));
    watchers.add(w);
    const timeoutSeconds = Number(query.get('timeoutSeconds') ?? '');
    if (Number.isFinite(timeoutSeconds) && timeoutSeconds > 0) {
      w.timer = setTimeout(() => res.end(), timeoutSeconds * 1000);
      w.timer.unref();
    }
    const forget = () => {
      if (w.timer) clearTimeout(w.timer);
      watchers.delete(w);
    };
    res.on('close', forget);
    req.on('close', forget);
  }

  async function handle(req: IncomingMessage, res: ServerResponse, entry: K8sRequestRecord): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const query = url.searchParams;
    entry.query = Object.fromEntries(query);
    const r = route(url.pathname);
    if (r) {
      Object.assign(entry, { resource: r.resource, namespace: r.namespace, name: r.name });
      const watching = ['true', '1'].includes(query.get('watch') ?? '');
      const verbs: Record<string, K8sRequestRecord['verb']> =
        r.name === undefined ? { GET: watching ? 'watch' : 'list', POST: 'create' } : { GET: 'get', PUT: 'update', DELETE: 'delete' };
      entry.verb = verbs[req.method ?? 'GET'] ?? 'other';
    }
    if (unavailable) throw new StatusError(503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
    if (options.token !== undefined && req.headers.authorization !== `Bearer ${options.token}`) throw new StatusError(401, 'Unauthorized', 'Unauthorized');
    if (!r) throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    const info = RESOURCES[r.resource];
    const method = req.method ?? 'GET';
    const notFound = (name: string) => new StatusError(404, 'NotFound', `${r.resource} "${name}" not found`);

    if (r.name === undefined) {
      if (method === 'GET') {
        const selector = parseLabelSelector(query.get('labelSelector') ?? undefined);
        if (['true', '1'].includes(query.get('watch') ?? '')) {
            openWatch(req, res, r, query, selector);
          return;
        }
        send(res, 200, { kind: info.listKind, apiVersion: info.apiVersion, metadata: { resourceVersion: String(rv) }, items: listOf(r.resource, r.namespace, selector) });
        return;
      }
      if (method === 'POST' && r.namespace !== undefined) {
        const body = (await readJson(req)) as K8sObject | undefined;
        intercept(entry);
        if (!body || typeof body !== 'object' || typeof body.metadata !== 'object' || body.metadata === null) {
          throw new StatusError(400, 'BadRequest', 'the body must be an object with metadata');
        }
        if (!namespaces.has(r.namespace)) throw new StatusError(404, 'NotFound', `namespaces "${r.namespace}" not found`);
        if (body.metadata.namespace !== undefined && body.metadata.namespace !== r.namespace) {
          throw new StatusError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
        }
        const object = clone(body);
        object.metadata.namespace = r.namespace;
        if (!object.metadata.name && object.metadata.generateName) object.metadata.name = `${object.metadata.generateName}${randomUUID().slice(0, 5)}`;
        delete object.metadata.resourceVersion;
        delete object.metadata.uid;
        validate(r.resource, object);
        const name = object.metadata.name as string;
        if (objects.has(keyOf(r.resource, r.namespace, name))) throw new StatusError(409, 'AlreadyExists', `${r.resource} "${name}" already exists`);
        send(res, 201, withKind(r.resource, store(r.resource, object, undefined)));
        return;
      }
      throw new StatusError(405, 'MethodNotAllowed', `${method} is not supported here`);
    }

    const namespace = r.namespace as string;
    const name = r.name;
    const body = method === 'PUT' || method === 'DELETE' ? await readJson(req) : undefined;
    intercept(entry);
    const existing = objects.get(keyOf(r.resource, namespace, name));
    if (method === 'GET') {
      if (!existing) throw notFound(name);
      send(res, 200, withKind(r.resource, existing));
      return;
    }
    if (method === 'PUT') {
      const sent = body as K8sObject | undefined;
      if (!sent || typeof sent !== 'object' || typeof sent.metadata !== 'object' || sent.metadata === null) {
        throw new StatusError(400, 'BadRequest', 'the body must be an object with metadata');
      }
      if (sent.metadata.name !== name) throw new StatusError(400, 'BadRequest', 'the name of the object does not match the name on the URL');
      if (!existing) throw notFound(name);
      const wanted = sent.metadata.resourceVersion;
      if (wanted !== undefined && wanted !== '' && wanted !== existing.metadata.resourceVersion) {
        throw new StatusError(
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${r.resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        );
      }
      if (sent.metadata.uid !== undefined && sent.metadata.uid !== existing.metadata.uid) {
        throw new StatusError(409, 'Conflict', `Precondition failed: UID in precondition: ${sent.metadata.uid}, UID in object meta: ${existing.metadata.uid}`);
      }
      const object = clone(sent);
      object.metadata.namespace = namespace;
      validate(r.resource, object);
      send(res, 200, withKind(r.resource, store(r.resource, object, existing)));
      return;
    }
    if (method === 'DELETE') {
      if (!existing) throw notFound(name);
      const pre = (body as { preconditions?: { resourceVersion?: string; uid?: string } } | undefined)?.preconditions;
      if (pre?.resourceVersion !== undefined && pre.resourceVersion !== existing.metadata.resourceVersion) {
        throw new StatusError(
          409,
          'Conflict',
          `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${existing.metadata.resourceVersion}`,
        );
      }
      if (pre?.uid !== undefined && pre.uid !== existing.metadata.uid) {
        throw new StatusError(409, 'Conflict', `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${existing.metadata.uid}`);
      }
      const gone = drop(r.resource, existing);
      if (info.deleteAnswersObject) send(res, 200, withKind(r.resource, gone));
      else {
        send(res, 200, {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Success',
          details: { name, group: info.apiVersion.split('/')[0], kind: r.resource, uid: gone.metadata.uid },
        });
      }
      return;
    }
    throw new StatusError(405, 'MethodNotAllowed', `${method} is not supported here`);
  }

  const server: Server = createServer((req, res) => {
    const entry: K8sRequestRecord = {
      method: req.method ?? 'GET',
      resource: undefined,
      namespace: undefined,
      name: undefined,
      verb: 'other',
      query: {},
      status: 0,
    };
    if (requests.length < 200_000) requests.push(entry);
    res.on('finish', () => {
      entry.status = res.statusCode;
    });
    entry.status = 200;
    handle(req, res, entry).catch((err: unknown) => {
      const e = err instanceof StatusError ? err : new StatusError(500, 'InternalError', err instanceof Error ? err.message : String(err));
      entry.status = e.code;
      if (!res.headersSent) send(res, e.code, statusBody(e.code, e.reason, e.message));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;

  const endWatches = (how: 'end' | 'destroy'): number => {
    const open = [...watchers];
    for (const w of open) {
      watchers.delete(w);
      if (w.timer) clearTimeout(w.timer);
      if (how === 'end') w.res.end();
      else w.res.destroy();
    }
    return open.length;
  };

  return {
    url,
    port,
    get staleWatch() {
      return staleWatch;
    },
    set staleWatch(mode: StaleWatchMode) {
      staleWatch = mode;
    },
    requests,
    kubeConfig() {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'test', server: url, skipTLSVerify: true }],
        users: [{ name: 'test' }],
        contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
        currentContext: 'test',
      });
      return kc;
    },
    kubeconfigYaml(token) {
      return [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '  - name: test',
        '    cluster:',
        `      server: ${url}`,
        '      insecure-skip-tls-verify: true',
        'users:',
        '  - name: test',
        token === undefined ? '    user: {}' : `    user: { token: ${JSON.stringify(token)} }`,
        'contexts:',
        '  - name: test',
        '    context: { cluster: test, user: test }',
        'current-context: test',
        '',
      ].join('\n');
    },
    resourceVersion: () => rv,
    addNamespace(namespace) {
      if (!DNS_LABEL.test(namespace)) throw new Error(`not a namespace name: ${namespace}`);
      namespaces.add(namespace);
    },
    get(resource, namespace, name) {
      const o = objects.get(keyOf(resource, namespace, name));
      return o && clone(o);
    },
    list(resource, namespace) {
      return listOf(resource, namespace, []);
    },
    put(resource, object) {
      const namespace = object.metadata.namespace ?? 'default';
      namespaces.add(namespace);
      const existing = objects.get(keyOf(resource, namespace, object.metadata.name as string));
      const copy = clone(object);
      copy.metadata.namespace = namespace;
      validate(resource, copy);
      return store(resource, copy, existing);
    },
    remove(resource, namespace, name) {
      const existing = objects.get(keyOf(resource, namespace, name));
      if (!existing) return false;
      drop(resource, existing);
      return true;
    },
    cutWatches: (how = 'end') => endWatches(how),
    compact() {
      history.length = 0;
      compactedBefore = rv;
    },
    bookmark() {
      let n = 0;
      for (const w of watchers) {
        if (!w.bookmarks) continue;
        writeEvent(w, 'BOOKMARK', { kind: RESOURCES[w.resource].kind, apiVersion: RESOURCES[w.resource].apiVersion, metadata: { resourceVersion: String(rv) } });
        n += 1;
      }
      return n;
    },
    openWatches: (resource) => [...watchers].filter((w) => resource === undefined || w.resource === resource).length,
    beforeNext(verb, resource, fn) {
      interceptors.push({ verb, resource, fn });
    },
    setUnavailable(on) {
      unavailable = on;
      if (on) endWatches('destroy');
    },
    async close() {
      endWatches('destroy');
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The EndpointSlices regsync wrote for a Service (`managed-by: regsync`). */
export function managedSlices(server: K8sApiServer, service: string, namespace = 'default'): K8sObject[] {
  return server
    .list('endpointslices', namespace)
    .filter((s) => s.metadata.labels?.['kubernetes.io/service-name'] === service && s.metadata.labels['endpointslice.kubernetes.io/managed-by'] === 'regsync');
}

/** Every endpoint address of the slices regsync wrote for a Service, sorted. */
export function managedAddresses(server: K8sApiServer, service: string, namespace = 'default'): string[] {
  return managedSlices(server, service, namespace)
    .flatMap((s) => (s.endpoints as Array<{ addresses: string[] }>).flatMap((e) => e.addresses))
    .sort();
}
