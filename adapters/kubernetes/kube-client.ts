import {
  ApiException,
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  ServerConfiguration,
  Watch,
  createConfiguration,
  type RequestContext,
  type ResponseContext,
  type V1EndpointSlice,
  type V1Service,
} from '@kubernetes/client-node';
import { KubernetesConfigError } from './kubernetes-config-error.js';
import type { KubernetesAdapterOptions } from './kubernetes-options.js';
import { KubernetesRequestError } from './kubernetes-request-error.js';
import type { KubeEndpointSlice, KubeService } from './kube-objects.js';

/** A list answer: the items and the resourceVersion to watch from. */
export interface KubeList<T> {
  items: T[];
  resourceVersion: string;
}

/** One watch event as the stream carries it. */
export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

/**
 * The calls the adapter makes, over the real `@kubernetes/client-node` (typed API clients for list,
 * get and writes; its `Watch` for watch streams). Every failure rejects with a
 * {@link KubernetesRequestError}; a missing object reads as `undefined`.
 */
export class KubeClient {
  readonly server: string;
  private readonly core: CoreV1Api;
  private readonly discovery: DiscoveryV1Api;
  private readonly watcher: Watch;

  constructor(
    readonly clusterId: string,
    given: KubeConfig,
    requestTimeoutMs: number,
  ) {
    const kc = allowingPlainHttp(given);
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new KubernetesConfigError(clusterId, 'kubeconfig', 'the current context names no cluster');
    this.server = cluster.server;
    // The generated clients have no timeout of their own; this middleware gives every request one.
    const timeout = {
      pre: async (context: RequestContext) => {
        context.setSignal(AbortSignal.timeout(requestTimeoutMs));
        return context;
      },
      post: async (context: ResponseContext) => context,
    };
    const configuration = createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: kc },
      promiseMiddleware: [timeout],
    });
    this.core = new CoreV1Api(configuration);
    this.discovery = new DiscoveryV1Api(configuration);
    this.watcher = new Watch(kc);
  }

  listServices(namespace: string | undefined): Promise<KubeList<KubeService>> {
    return this.call('list', namespace === undefined ? 'services' : `services in ${namespace}`, async () => {
      const list = namespace === undefined ? await this.core.listServiceForAllNamespaces({}) : await this.core.listNamespacedService({ namespace });
      return { items: list.items as KubeService[], resourceVersion: list.metadata?.resourceVersion ?? '' };
    });
  }

  listSlices(namespace: string | undefined, labelSelector: string | undefined): Promise<KubeList<KubeEndpointSlice>> {
    return this.call('list', namespace === undefined ? 'endpointslices' : `endpointslices in ${namespace}`, async () => {
      const list =
        namespace === undefined
          ? await this.discovery.listEndpointSliceForAllNamespaces(labelSelector === undefined ? {} : { labelSelector })
          : await this.discovery.listNamespacedEndpointSlice({ namespace, ...(labelSelector === undefined ? {} : { labelSelector }) });
      return { items: list.items as KubeEndpointSlice[], resourceVersion: list.metadata?.resourceVersion ?? '' };
    });
  }

  async readService(namespace: string, name: string): Promise<KubeService | undefined> {
    try {
      return await this.call('get', `services ${namespace}/${name}`, () => this.core.readNamespacedService({ namespace, name }) as Promise<KubeService>);
    } catch (err) {
      if (err instanceof KubernetesRequestError && err.status === 404) return undefined;
      throw err;
    }
  }

  createService(namespace: string, body: KubeService): Promise<KubeService> {
    return this.call('create', `services ${namespace}/${body.metadata?.name}`, () =>
      this.core.createNamespacedService({ namespace, body: body as V1Service }) as Promise<KubeService>,
    );
  }

  replaceService(namespace: string, body: KubeService): Promise<KubeService> {
    const name = body.metadata?.name ?? '';
    return this.call('replace', `services ${namespace}/${name}`, () =>
      this.core.replaceNamespacedService({ namespace, name, body: body as V1Service }) as Promise<KubeService>,
    );
  }

  /** Deletes only the version that was read (`preconditions.resourceVersion`): a changed object answers 409. */
  async deleteService(namespace: string, name: string, resourceVersion: string | undefined): Promise<void> {
    await this.call('delete', `services ${namespace}/${name}`, () =>
      this.core.deleteNamespacedService({ namespace, name, body: resourceVersion === undefined ? {} : { preconditions: { resourceVersion } } }),
    );
  }

  createSlice(namespace: string, body: KubeEndpointSlice): Promise<KubeEndpointSlice> {
    return this.call('create', `endpointslices ${namespace}/${body.metadata?.name}`, () =>
      this.discovery.createNamespacedEndpointSlice({ namespace, body: body as V1EndpointSlice }) as Promise<KubeEndpointSlice>,
    );
  }

  replaceSlice(namespace: string, body: KubeEndpointSlice): Promise<KubeEndpointSlice> {
    const name = body.metadata?.name ?? '';
    return this.call('replace', `endpointslices ${namespace}/${name}`, () =>
      this.discovery.replaceNamespacedEndpointSlice({ namespace, name, body: body as V1EndpointSlice }) as Promise<KubeEndpointSlice>,
    );
  }

  async deleteSlice(namespace: string, name: string, resourceVersion: string | undefined): Promise<void> {
    await this.call('delete', `endpointslices ${namespace}/${name}`, () =>
      this.discovery.deleteNamespacedEndpointSlice({ namespace, name, body: resourceVersion === undefined ? {} : { preconditions: { resourceVersion } } }),
    );
  }

  /**
   * Opens a watch stream (`Watch.watch` of the client): events go to `onEvent` as they arrive,
   * `onDone` is called once when the stream ends (`null`) or fails. Resolves with the controller
   * that aborts it, once the server answered.
   */
  watch(
    path: string,
    query: Record<string, string | number | boolean>,
    onEvent: (type: WatchEventType, object: unknown) => void,
    onDone: (err: unknown) => void,
  ): Promise<AbortController> {
    return this.watcher.watch(path, query, (type: string, object: unknown) => onEvent(type as WatchEventType, object), onDone);
  }

  /** Turns whatever a call threw into a {@link KubernetesRequestError}. */
  toError(verb: string, target: string, err: unknown): KubernetesRequestError {
    return toRequestError(this.clusterId, verb, target, err);
  }

  private async call<T>(verb: string, target: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toRequestError(this.clusterId, verb, target, err);
    }
  }
}

/** Maps client errors (ApiException, fetch errors, aborts, a watch's `statusCode`) to {@link KubernetesRequestError}. */
export function toRequestError(clusterId: string, verb: string, target: string, err: unknown): KubernetesRequestError {
  if (err instanceof KubernetesRequestError) return err;
  const base = { clusterId, verb, target, cause: err };
  if (err instanceof ApiException) {
    const status = (err as ApiException<unknown>).code;
    const body = parseStatus((err as ApiException<unknown>).body);
    return new KubernetesRequestError({
      ...base,
      code: 'kubernetes-http-error',
      status,
      reason: body?.reason,
      detail: `HTTP ${status}${body?.reason ? ` ${body.reason}` : ''}${body?.message ? `: ${body.message}` : ''}`,
    });
  }
  const e = err as { name?: string; type?: string; code?: string; statusCode?: number; message?: string } | undefined;
  if (typeof e?.statusCode === 'number') {
    return new KubernetesRequestError({ ...base, code: 'kubernetes-http-error', status: e.statusCode, detail: `HTTP ${e.statusCode} ${e.message ?? ''}`.trim() });
  }
  if (e?.name === 'AbortError' || e?.name === 'TimeoutError' || e?.type === 'aborted') {
    return new KubernetesRequestError({ ...base, code: 'kubernetes-timeout', detail: 'no answer in time' });
  }
  return new KubernetesRequestError({ ...base, code: 'kubernetes-unreachable', detail: e?.message ?? String(err) });
}

function parseStatus(body: unknown): { reason?: string; message?: string } | undefined {
  let value: unknown = body;
  if (typeof body === 'string') {
    try {
      value = JSON.parse(body);
    } catch {
      return { message: body.slice(0, 200) };
    }
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const s = value as { reason?: unknown; message?: unknown };
  return {
    ...(typeof s.reason === 'string' ? { reason: s.reason } : {}),
    ...(typeof s.message === 'string' ? { message: s.message } : {}),
  };
}

/**
 * `kc` itself, or, when its current cluster's server is a plain `http://` URL (as `kubectl proxy`
 * serves), a copy whose cluster says `insecure-skip-tls-verify`: client-node refuses plain HTTP
 * without it, though no TLS is there to verify (the flag only picks its HTTP agent then). Left as
 * it is with a `proxy-url`, where the flag would apply to the proxy's TLS.
 */
export function allowingPlainHttp(kc: KubeConfig): KubeConfig {
  const current = kc.getCurrentCluster();
  if (!current || current.skipTLSVerify || current.proxyUrl || !current.server.startsWith('http:')) return kc;
  const plain = new KubeConfig();
  plain.loadFromOptions({
    clusters: kc.clusters.map((c) => (c.name === current.name ? { ...c, skipTLSVerify: true } : c)),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.getCurrentContext(),
  });
  return plain;
}

/**
 * The KubeConfig of a cluster: `options.kubeconfig` (a file), else the in-cluster config when
 * running in a pod; then `options.context`. Throws {@link KubernetesConfigError} when neither is
 * there, the file cannot be read, or the context does not exist.
 */
export function loadKubeConfig(clusterId: string, options: Pick<KubernetesAdapterOptions, 'kubeconfig' | 'context'>): KubeConfig {
  const kc = new KubeConfig();
  if (options.kubeconfig !== undefined) {
    try {
      kc.loadFromFile(options.kubeconfig);
    } catch (err) {
      throw new KubernetesConfigError(clusterId, 'options.kubeconfig', `cannot read ${options.kubeconfig}: ${err instanceof Error ? err.message : String(err)}`);
    }
  } else if (process.env.KUBERNETES_SERVICE_HOST) {
    kc.loadFromCluster();
  } else {
    throw new KubernetesConfigError(clusterId, 'options.kubeconfig', 'no kubeconfig given and not running in a pod (KUBERNETES_SERVICE_HOST is not set)');
  }
  if (options.context !== undefined) {
    if (!kc.getContextObject(options.context)) {
      throw new KubernetesConfigError(clusterId, 'options.context', `no context ${options.context} in the kubeconfig`);
    }
    kc.setCurrentContext(options.context);
  }
  if (!kc.getCurrentCluster()) throw new KubernetesConfigError(clusterId, 'options.context', 'the current context names no cluster');
  return kc;
}
