import type { Logger } from 'pino';
import type { RegistryAdapter } from './adapter.js';
import type { ClusterSpec } from './types.js';

/**
 * The JSON shape an option takes, so that a form can offer the fitting input: `integer` (the
 * parsers also take a numeric string), `list` an array of strings, `object` a JSON object.
 */
export type KindOptionType = 'string' | 'integer' | 'boolean' | 'list' | 'object';

/** What a kind says of one option besides its name: a kind keys these by its options type (see {@link kindOptions}). */
export interface KindOptionSpec {
  /** The JSON shape of the value. */
  type: KindOptionType;
  /** What it does and its default, for a human. */
  description: string;
  /** For a `string` taking only some values: all of them (the form then offers a choice). */
  choices?: readonly string[] | undefined;
}

/** One setting of `ClusterSpec.options`, as the API lists it (`GET /api/v1/kinds`). */
export interface KindOption extends KindOptionSpec {
  name: string;
}

/**
 * The option list of a descriptor from a table keyed by the adapter's options type: declared as
 * `Record<keyof XOptions, KindOptionSpec>`, a new option without a type or description does not compile.
 */
export function kindOptions(specs: Readonly<Record<string, KindOptionSpec>>): KindOption[] {
  return Object.entries(specs).map(([name, spec]) => ({ name, ...spec }));
}

/** What a kind's factory gets from the process that builds adapters. */
export interface KindDeps {
  /** A child logger bound to the cluster. */
  logger: Logger;
  /**
   * Told of every failed request to the registry, by a stable error code (metrics). Passed only to
   * kinds whose descriptor sets `reportsRequestErrors`; the others are wrapped by the caller.
   */
  onRequestError?: ((code: string) => void) | undefined;
}

/**
 * A registry kind, as one module (`adapters/<kind>/index.ts`) describes it. The list of
 * descriptors (`adapters/kinds.ts`) is the only place kinds are named: the API's validation, the
 * node's adapter factories, the nacos-sync cluster types and the dashboard's kind choices all derive
 * from it. The model only defines the shape (it cannot import adapters): `ClusterSpec.kind` is a
 * string, checked against the list wherever a cluster enters.
 */
export interface KindDescriptor<Name extends string = string> {
  /** The `kind` of a cluster: lowercase, stable (stored in Redis and in cluster files). */
  readonly name: Name;
  /** How the dashboard names the kind. */
  readonly label: string;
  /** The port of an endpoint given without one (nacos-sync connect keys, docs). */
  readonly defaultPort: number;
  /** Whether a cluster needs at least one endpoint; false where the kind finds its server otherwise (a kubeconfig). */
  readonly endpointsRequired: boolean;
  /** The nacos-sync `clusterType` this kind serves (`/v1/cluster/add`); absent: nacos-sync cannot create it. */
  readonly nacosSyncType?: string | undefined;
  /** Whether the adapter reads `username` and `password`; false where it authenticates otherwise (a kubeconfig). */
  readonly usesCredentials: boolean;
  /**
   * How a nacos-sync connect key written as a URL (`http://h:8761/eureka/`, as nacos-sync stores a
   * Eureka server) reads for this kind: the endpoint and the options the URL says (its path, its
   * scheme). Absent: URLs with a path or `https://` are refused.
   */
  readonly connectKeyUrl?: ((url: URL) => { endpoint: string; options: Record<string, unknown> }) | undefined;
  /** Every option the kind reads from `ClusterSpec.options`; any other key is refused (except {@link SHARED_CLUSTER_OPTIONS}). */
  readonly options: readonly KindOption[];
  /**
   * Checks a cluster's endpoints and options as the factory will, without connecting or reading
   * files; throws `ClusterConfigError` naming the setting.
   */
  validate(spec: ClusterSpec): void;
  /** Builds the adapter of one cluster of this kind. */
  create(spec: ClusterSpec, deps: KindDeps): RegistryAdapter;
  /**
   * How long removals from a cluster of this kind wait after it was unreachable or its instances
   * dropped sharply (ms; 0: not at all): its `warmupSeconds`, else the kind's default, derived from
   * how long the registry's own clients take to come back (see `src/engine/warmup.ts`). Expects a
   * spec that {@link validate} accepts.
   */
  warmupMs(spec: ClusterSpec): number;
  /** True when `create` reports failed requests through `deps.onRequestError` itself. */
  readonly reportsRequestErrors: boolean;
}

/** `options.warmupSeconds`, which every kind declares with its own default (see {@link KindDescriptor.warmupMs}). */
export const WARMUP_OPTION = 'warmupSeconds';

/** The longest warm-up a cluster may have, s. */
export const MAX_WARMUP_SECONDS = 86_400;

/** The option table entry of `warmupSeconds`, with the kind's default and why it is that. */
export function warmupOptionSpec(defaultText: string): KindOptionSpec {
  return {
    type: 'integer',
    description: `Seconds removals from this cluster wait after it was unreachable or after a read found fewer than half of a service's instances (a restart refilling); additions and updates go through. 0 turns it off. Default ${defaultText}.`,
  };
}

/**
 * Reads `options.warmupSeconds`: an integer from 0 to {@link MAX_WARMUP_SECONDS} (a string holding
 * one too), `fallback` when absent; undefined for anything else (the kind's parser refuses it).
 */
export function parseWarmupSeconds(value: unknown, fallback: number): number | undefined {
  if (value === undefined) return fallback;
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= MAX_WARMUP_SECONDS ? n : undefined;
}

/** `options.aliases`: read by the engine, not by any adapter. */
export const ALIASES_OPTION = 'aliases';
/** `options.nacosSyncName`: read by the nacos-sync compatible API, not by any adapter. */
export const NACOS_SYNC_NAME_OPTION = 'nacosSyncName';

/** Options every cluster may have whatever its kind: regsync reads them, adapters do not. */
export const SHARED_CLUSTER_OPTIONS: readonly KindOption[] = [
  {
    name: ALIASES_OPTION,
    type: 'list',
    description: 'Other ids this cluster has in other sync tools (nacos-sync cluster ids): copies marked with them are never sent back here.',
  },
  {
    name: NACOS_SYNC_NAME_OPTION,
    type: 'string',
    description: 'The nacos-sync clusterName of a cluster created through /v1/cluster/add.',
  },
];
