import { compileGlobsOf, globsProblem } from './glob.js';
import { DEFAULT_EXCLUDE, serviceKeyString, type ServiceKey, type ServiceMapping, type TaskOptions, type TaskSpec } from './types.js';

/** The wildcard of `service`, `group` and `namespace`: every one. */
export const ANY = '*';

/**
 * Longest service name or metadata key the patterns are matched against. Longer ones are never
 * synced by a `*` task nor copied under a metadata filter: the cost of a match grows with the
 * length of the name, which whoever registers in the source chooses.
 */
export const MAX_MATCHED_NAME_LENGTH = 512;

/** Compiled matchers kept, by pattern list (the oldest goes first). */
const KEPT_MATCHERS = 128;
const matchers = new Map<string, (name: string) => boolean>();

/**
 * A matcher of names against the globs of `field` (see `./glob.ts`); none: matches nothing.
 * Matchers are kept, since every reconcile asks for its task's metadata filter and every listing
 * of the source for its service filter. Throws `GlobError` naming the field.
 */
function matcher(field: string, patterns: readonly string[]): (name: string) => boolean {
  if (patterns.length === 0) return () => false;
  const key = JSON.stringify(patterns);
  let found = matchers.get(key);
  if (found === undefined) {
    found = compileGlobsOf(field, patterns);
    if (matchers.size >= KEPT_MATCHERS) matchers.delete(matchers.keys().next().value as string);
    matchers.set(key, found);
  }
  return found;
}

/**
 * Which services of the source a `*` task syncs: those matching `include` (absent: all) and not
 * matching `exclude` (absent: `consumers:*`, the entries Dubbo registers for its consumers), with
 * names of at most {@link MAX_MATCHED_NAME_LENGTH} characters. Throws `GlobError` for patterns
 * {@link taskRuleProblem} refuses.
 */
export function serviceFilter(options: Pick<TaskOptions, 'include' | 'exclude'>): (name: string) => boolean {
  const include = options.include === undefined ? () => true : matcher('options.include', options.include);
  const exclude = matcher('options.exclude', options.exclude ?? DEFAULT_EXCLUDE);
  return (name) => name.length <= MAX_MATCHED_NAME_LENGTH && include(name) && !exclude(name);
}

/** The destination service of a source service under `mapping` (the same service without one). */
export function mapService(service: ServiceKey, mapping: ServiceMapping | undefined): ServiceKey {
  if (mapping === undefined) return service;
  const renamed = mapping.rename !== undefined && Object.hasOwn(mapping.rename, service.name) ? mapping.rename[service.name] : undefined;
  return {
    namespace: lookup(mapping.namespaces, service.namespace),
    group: lookup(mapping.groups, service.group),
    name: renamed ?? `${mapping.prefix ?? ''}${service.name}${mapping.suffix ?? ''}`,
  };
}

function lookup(map: Record<string, string> | undefined, key: string): string {
  return map !== undefined && Object.hasOwn(map, key) ? (map[key] as string) : key;
}

/**
 * Which metadata keys copies carry under `mapping` (marks are added by the transform regardless);
 * keys longer than {@link MAX_MATCHED_NAME_LENGTH} characters are not copied under a filter.
 */
export function metadataFilter(mapping: ServiceMapping | undefined): ((key: string) => boolean) | undefined {
  if (mapping?.metadataAllow === undefined && mapping?.metadataDeny === undefined) return undefined;
  const allow = mapping.metadataAllow === undefined ? () => true : matcher('options.mapping.metadataAllow', mapping.metadataAllow);
  const deny = matcher('options.mapping.metadataDeny', mapping.metadataDeny ?? []);
  return (key) => key.length <= MAX_MATCHED_NAME_LENGTH && allow(key) && !deny(key);
}

/**
 * What is wrong with a task's scope and rules, in words an operator can act on; undefined when
 * nothing is. Rules that would send two source services to one destination service are refused
 * here when the rules alone show it (two names renamed to one, two namespaces or groups mapped to
 * one); a clash that depends on the services the source has is reported by the running task.
 */
export function taskRuleProblem(spec: Pick<TaskSpec, 'service' | 'group' | 'namespace' | 'options'>): string | undefined {
  const { options } = spec;
  const patterns = patternProblem(options);
  if (patterns !== undefined) return patterns;
  if (spec.service !== ANY) {
    if (spec.group === ANY || spec.namespace === ANY) return `group "*" and namespace "*" need service "*" (got service "${spec.service}")`;
    if (options.include !== undefined || options.exclude !== undefined) return `options.include and options.exclude apply to service "*" only`;
  }
  const mapping = options.mapping;
  if (mapping === undefined) return undefined;
  for (const [what, map] of [
    ['options.mapping.rename', mapping.rename],
    ['options.mapping.namespaces', mapping.namespaces],
    ['options.mapping.groups', mapping.groups],
  ] as const) {
    const problem = manyToOne(what, map);
    if (problem !== undefined) return problem;
  }
  for (const [what, map, scope] of [
    ['namespaces', mapping.namespaces, spec.namespace],
    ['groups', mapping.groups, spec.group],
  ] as const) {
    if (scope !== ANY) continue;
    // With every namespace (group) synced, one mapped onto a namespace that keeps its own services merges them.
    for (const [from, to] of Object.entries(map ?? {})) {
      if (to !== from && !Object.hasOwn(map ?? {}, to)) {
        return `options.mapping.${what} maps "${from}" to "${to}", whose own services are synced as they are: two services would become one (map "${to}" elsewhere too, or narrow the task)`;
      }
    }
  }
  const renames = Object.entries(mapping.rename ?? {});
  if (spec.service !== ANY && renames.length > 0 && !renames.some(([from]) => from === spec.service)) {
    return `options.mapping.rename does not name the task's service "${spec.service}"`;
  }
  for (const [from, to] of spec.service === ANY ? renames : []) {
    // A renamed service lands where another service would land through prefix and suffix.
    const prefix = mapping.prefix ?? '';
    const suffix = mapping.suffix ?? '';
    if ((prefix !== '' || suffix !== '') && to.startsWith(prefix) && to.endsWith(suffix) && to.length >= prefix.length + suffix.length) {
      const other = to.slice(prefix.length, to.length - suffix.length);
      if (other !== from && !Object.hasOwn(mapping.rename ?? {}, other)) {
        return `options.mapping.rename sends "${from}" to "${to}", where service "${other}" would go through prefix and suffix`;
      }
    }
  }
  return undefined;
}

/** The first pattern of the options that cannot be compiled, named by its field. */
function patternProblem(options: TaskOptions): string | undefined {
  return (
    globsProblem('options.include', options.include) ??
    globsProblem('options.exclude', options.exclude) ??
    globsProblem('options.mapping.metadataAllow', options.mapping?.metadataAllow) ??
    globsProblem('options.mapping.metadataDeny', options.mapping?.metadataDeny)
  );
}

function manyToOne(what: string, map: Record<string, string> | undefined): string | undefined {
  const seen = new Map<string, string>();
  for (const [from, to] of Object.entries(map ?? {})) {
    const first = seen.get(to);
    if (first !== undefined) return `${what} maps both "${first}" and "${from}" to "${to}": two services would become one`;
    seen.set(to, from);
  }
  return undefined;
}

/**
 * Destination services that more than one source service maps to, as `destination -> sources`;
 * every source after the first (in the order given) is one the task must not sync.
 */
export function mappingClashes(services: readonly ServiceKey[], mapping: ServiceMapping | undefined): Map<string, ServiceKey[]> {
  const byTarget = new Map<string, ServiceKey[]>();
  if (mapping === undefined) return byTarget;
  for (const service of services) {
    const target = serviceKeyString(mapService(service, mapping));
    const list = byTarget.get(target);
    if (list) list.push(service);
    else byTarget.set(target, [service]);
  }
  for (const [target, list] of byTarget) if (list.length < 2) byTarget.delete(target);
  return byTarget;
}
