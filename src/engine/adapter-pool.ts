import type { Logger } from 'pino';
import type { RegistryAdapter } from '../model/adapter.js';
import type { ClusterSpec } from '../model/types.js';

/** Builds the adapter of one cluster. */
export type AdapterFactory = (spec: ClusterSpec, deps: { logger: Logger }) => RegistryAdapter;

/** A cluster the engine cannot talk to: unknown id or a kind this build has no adapter for. */
export class ClusterUnavailableError extends Error {
  override readonly name = 'ClusterUnavailableError';
  constructor(
    readonly clusterId: string,
    readonly code: 'unknown_cluster' | 'unsupported_kind',
    message: string,
  ) {
    super(message);
  }
}

/**
 * One adapter per cluster, shared by every task that reads or writes it (one connection, one push
 * socket, one session per cluster). Adapters are created on first use and rebuilt after
 * {@link invalidate}, which the engine calls when a cluster's settings change.
 */
export class AdapterPool {
  private readonly adapters = new Map<string, Promise<RegistryAdapter>>();
  private readonly specs = new Map<string, ClusterSpec>();
  private readonly ready = new Map<string, RegistryAdapter>();
  /** Counts {@link invalidate} calls per cluster id: a build is stale only if its own cluster changed meanwhile. */
  private readonly invalidations = new Map<string, number>();

  constructor(
    private readonly lookup: (clusterId: string) => Promise<ClusterSpec | undefined>,
    /** By kind name. */
    private readonly factories: Readonly<Record<string, AdapterFactory>>,
    private readonly logger: Logger,
  ) {}

  get(clusterId: string): Promise<RegistryAdapter> {
    let adapter = this.adapters.get(clusterId);
    if (!adapter) {
      adapter = this.create(clusterId, this.invalidations.get(clusterId) ?? 0);
      this.adapters.set(clusterId, adapter);
      // A failed creation is not cached: the next use tries again.
      const building = adapter;
      building.then(
        (built) => {
          if (this.adapters.get(clusterId) === building) this.ready.set(clusterId, built);
        },
        () => {
          if (this.adapters.get(clusterId) === building) this.adapters.delete(clusterId);
        },
      );
    }
    return adapter;
  }

  /** The adapters built so far and not invalidated, by cluster id (metrics read them at scrape time). */
  built(): Map<string, RegistryAdapter> {
    return new Map(this.ready);
  }

  /** The spec the cluster's current adapter was built from; undefined before the first `get` resolved. */
  spec(clusterId: string): ClusterSpec | undefined {
    return this.specs.get(clusterId);
  }

  /**
   * Forgets the adapter of a cluster, so that the next `get` builds a new one, and closes it. With
   * `handOver`, the old adapter is closed only once `handOver` settled: the caller moves what the
   * old one holds (watches, beats, copies bound to its session) onto the new one first, so that
   * nothing it wrote vanishes in between.
   */
  async invalidate(clusterId: string, handOver?: () => Promise<void>): Promise<void> {
    const adapter = this.adapters.get(clusterId);
    this.adapters.delete(clusterId);
    this.ready.delete(clusterId);
    this.specs.delete(clusterId);
    this.invalidations.set(clusterId, (this.invalidations.get(clusterId) ?? 0) + 1);
    try {
      await handOver?.();
    } finally {
      if (adapter) await adapter.then((a) => a.close()).catch(() => {});
    }
  }

  async closeAll(): Promise<void> {
    const all = [...this.adapters.keys()];
    await Promise.all(all.map((id) => this.invalidate(id)));
  }

  private async create(clusterId: string, invalidations: number): Promise<RegistryAdapter> {
    const spec = await this.lookup(clusterId);
    if (!spec) throw new ClusterUnavailableError(clusterId, 'unknown_cluster', `cluster ${clusterId} does not exist`);
    // Own keys only: a stored kind such as `constructor` must not reach Object.prototype.
    const factory = Object.hasOwn(this.factories, spec.kind) ? this.factories[spec.kind] : undefined;
    if (!factory) {
      throw new ClusterUnavailableError(clusterId, 'unsupported_kind', `cluster ${clusterId}: kind ${spec.kind} is not supported by this build`);
    }
    const adapter = factory(spec, { logger: this.logger.child({ cluster: clusterId }) });
    // Unless this cluster was invalidated while its adapter was being built (its spec may be stale).
    if ((this.invalidations.get(clusterId) ?? 0) === invalidations) this.specs.set(clusterId, spec);
    return adapter;
  }
}
