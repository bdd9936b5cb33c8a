import {
  ALIASES_OPTION,
  ClusterConfigError,
  NACOS_SYNC_NAME_OPTION,
  SHARED_CLUSTER_OPTIONS,
  type ClusterSpec,
  type KindDescriptor,
} from '../src/model/index.js';
import { consulKind } from './consul/index.js';
import { eurekaKind } from './eureka/index.js';
import { kubernetesKind } from './kubernetes/index.js';
import { nacosKind } from './nacos/index.js';
import { zookeeperKind } from './zookeeper/index.js';

/**
 * Every registry kind this build serves, in the order the API and the dashboard list them. The only
 * place kinds are named: adding a kind is its folder and one entry here (see `adapters/README.md`).
 */
export const KINDS = [nacosKind, zookeeperKind, kubernetesKind, consulKind, eurekaKind] as const;

/** The `kind` of a cluster this build serves. */
export type KindName = (typeof KINDS)[number]['name'];

/** The names of {@link KINDS}, for schemas (`enum`). */
export const KIND_NAMES: readonly KindName[] = KINDS.map((k) => k.name);

/** The descriptor of a kind; undefined for a name this build does not serve. */
export function kindNamed(name: string): KindDescriptor | undefined {
  return KINDS.find((k) => k.name === name);
}

/** Most entries of `options.aliases`. */
const MAX_ALIASES = 256;

/**
 * Checks a cluster before it is stored: a known kind, the kind's endpoint, credential and option
 * rules (its own `validate`, as its factory will check them), and no option the kind and regsync do
 * not know (a typo such as `apiVerison` is refused rather than silently ignored). Throws
 * {@link ClusterConfigError} naming the first bad setting.
 *
 * Expects values already bounded in size and depth (the API's schemas and body checks run first):
 * the parsers quote offending values in their messages.
 */
export function validateCluster(spec: ClusterSpec): void {
  const kind = kindNamed(spec.kind);
  if (kind === undefined) throw new ClusterConfigError(spec.id, 'kind', `expected one of ${KIND_NAMES.join(', ')}`);
  if (kind.endpointsRequired && spec.endpoints.length === 0) {
    throw new ClusterConfigError(spec.id, 'endpoints', `a ${kind.name} cluster needs at least one host:port`);
  }
  checkOptionNames(spec, kind);
  checkSharedOptions(spec);
  kind.validate(spec);
}

function checkOptionNames(spec: ClusterSpec, kind: KindDescriptor): void {
  const known = new Set([...kind.options, ...SHARED_CLUSTER_OPTIONS].map((o) => o.name));
  for (const name of Object.keys(spec.options)) {
    if (!known.has(name)) {
      const names = [...known].join(', ');
      throw new ClusterConfigError(spec.id, `options.${name.slice(0, 64)}`, `not an option of ${kind.name} clusters (known: ${names})`);
    }
  }
}

function checkSharedOptions(spec: ClusterSpec): void {
  const aliases = spec.options[ALIASES_OPTION];
  if (aliases !== undefined) {
    if (!Array.isArray(aliases) || aliases.length > MAX_ALIASES || !aliases.every((a) => typeof a === 'string' && a !== '')) {
      throw new ClusterConfigError(spec.id, `options.${ALIASES_OPTION}`, `expected a list of at most ${MAX_ALIASES} cluster ids`);
    }
  }
  const name = spec.options[NACOS_SYNC_NAME_OPTION];
  if (name !== undefined && (typeof name !== 'string' || name === '' || name.length > 255)) {
    throw new ClusterConfigError(spec.id, `options.${NACOS_SYNC_NAME_OPTION}`, 'expected a name of 1 to 255 characters');
  }
}
