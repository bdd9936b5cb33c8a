import type { ClusterSpec } from '../model/index.js';
import type { PutResult } from '../store/index.js';
import type { RouteContext } from './api-deps.js';
import { notifyEngine } from './notify.js';
import { canonical } from '../util/canonical.js';
import type { TaskComparison } from './task-commands.js';

/** The fields of a cluster a `PUT` can change, in the order a comparison names them. */
const CLUSTER_FIELDS = ['kind', 'endpoints', 'namespace', 'username', 'password', 'labels', 'options'] as const;

/**
 * Creates or replaces a cluster (`PUT`), the store deciding atomically which it was. A spec equal
 * to the stored one writes nothing and tells nobody: the engine keeps its adapter, connections and
 * sessions (a ZooKeeper session owns the copies' ephemeral nodes), so re-applying a file is free.
 */
export async function putCluster(ctx: RouteContext, spec: ClusterSpec): Promise<PutResult> {
  const result = await ctx.store.putCluster(spec);
  if (result !== 'unchanged') {
    await notifyEngine(ctx.log, { clusterId: spec.id, call: 'clusterChanged' }, () => ctx.control.clusterChanged(spec.id));
  }
  return result;
}

/**
 * Whether `PUT` of `spec` would change the stored cluster, and which fields: `password` is named
 * when it differs, its value never (neither the stored one nor the one sent).
 */
export function compareCluster(stored: ClusterSpec | undefined, spec: ClusterSpec): TaskComparison {
  if (stored === undefined) return { exists: false, differs: true, fields: [] };
  const fields = CLUSTER_FIELDS.filter((f) => canonical(stored[f]) !== canonical(spec[f]));
  return { exists: true, differs: fields.length > 0, fields };
}
