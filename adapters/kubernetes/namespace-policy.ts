import { KubernetesConfigError } from './kubernetes-config-error.js';
import type { KubernetesAdapterOptions, NamespaceTarget } from './kubernetes-options.js';
import { isNamespaceName } from './kube-names.js';

/**
 * Which Kubernetes namespaces regsync may touch, and how they map to the namespace and group of
 * regsync's service keys (both ways). Pure: no I/O.
 *
 * - Allowed: listed in `allowNamespaces` (or `*` is) and not in `denyNamespaces` (nor `*`); deny wins.
 * - Mapping: `namespaceMap` entries first; any other namespace `ns` maps to `{namespace: ns, group}`,
 *   unless that pair is already the target of an entry (the entry wins; `ns` is then not mapped).
 *   Back: a pair maps to the entry that targets it, else to the namespace of the same name when the
 *   group is `group`, the name is a valid namespace name, and it is not an entry's source.
 */
export class NamespacePolicy {
  private readonly allow: ReadonlySet<string>;
  private readonly deny: ReadonlySet<string>;
  private readonly byTarget = new Map<string, string>();

  constructor(
    clusterId: string,
    private readonly options: Pick<KubernetesAdapterOptions, 'allowNamespaces' | 'denyNamespaces' | 'namespaceMap' | 'group'>,
  ) {
    this.allow = new Set(options.allowNamespaces);
    this.deny = new Set(options.denyNamespaces);
    for (const [from, to] of Object.entries(options.namespaceMap)) {
      const key = targetKey(to);
      const other = this.byTarget.get(key);
      if (other !== undefined) {
        throw new KubernetesConfigError(clusterId, 'options.namespaceMap', `${other} and ${from} both map to ${to.namespace}/${to.group}; the map must be one-to-one`);
      }
      this.byTarget.set(key, from);
    }
  }

  /** Watch every namespace with one cluster-wide list and watch, or only {@link namespaces}. */
  get clusterWide(): boolean {
    return this.allow.has('*');
  }

  /** The namespaces to watch one by one when not {@link clusterWide}. */
  get namespaces(): string[] {
    return [...this.allow].filter((n) => this.allowed(n)).sort();
  }

  allowed(namespace: string): boolean {
    if (this.deny.has('*') || this.deny.has(namespace)) return false;
    return this.allow.has('*') || this.allow.has(namespace);
  }

  /** The namespace and group a Kubernetes namespace's services get; undefined when it maps nowhere. */
  toTarget(namespace: string): NamespaceTarget | undefined {
    const mapped = this.options.namespaceMap[namespace];
    if (mapped) return mapped;
    const identity = { namespace, group: this.options.group };
    return this.byTarget.has(targetKey(identity)) ? undefined : identity;
  }

  /**
   * Whether a scope with a wildcard (`*`: every namespace, every group) covers a Kubernetes
   * namespace: it is allowed, maps somewhere, and its target matches the scope's namespace and group
   * (`*` matching any). Answers the target; undefined when not covered.
   */
  covers(namespace: string, scope: { namespace: string; group: string }): NamespaceTarget | undefined {
    if (!this.allowed(namespace)) return undefined;
    const target = this.toTarget(namespace);
    if (!target) return undefined;
    const matches = (want: string, have: string) => want === ANY || want === have;
    return matches(scope.namespace, target.namespace) && matches(scope.group, target.group) ? target : undefined;
  }

  /** The Kubernetes namespace holding the services of a namespace and group; undefined when none can. */
  toKube(scope: { namespace: string; group: string }): string | undefined {
    const mapped = this.byTarget.get(targetKey(scope));
    if (mapped !== undefined) return mapped;
    if (scope.group !== this.options.group || !isNamespaceName(scope.namespace)) return undefined;
    return Object.hasOwn(this.options.namespaceMap, scope.namespace) ? undefined : scope.namespace;
  }
}

/** The scope wildcard of `*` tasks: every namespace, or every group. */
export const ANY = '*';

function targetKey(t: NamespaceTarget): string {
  return `${t.namespace}\n${t.group}`;
}
