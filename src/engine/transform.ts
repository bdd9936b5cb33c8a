import {
  FOREIGN_MARKS,
  MARK_ORIGIN,
  MARK_PATH,
  MARK_TASK,
  instanceId,
  type Instance,
} from '../model/types.js';

/** Who is copying what where: everything the transform needs besides the instances. */
export interface TransformContext {
  taskId: string;
  sourceClusterId: string;
  destinationClusterId: string;
  /**
   * Other names the destination goes by in other tools' marks (nacos-sync cluster ids, polaris-sync
   * names), so that their copies are not sent back to where they came from either.
   */
  destinationAliases?: readonly string[];
  /** Labels stamped on every copy; none when absent. */
  labels?: LabelStamp | undefined;
  /** Which metadata keys copies carry (labels included; marks always); all when absent. */
  metadataKeys?: ((key: string) => boolean) | undefined;
}

/**
 * Where the labels on copies come from, and who wins. Precedence, weakest first: the source
 * cluster's labels, then the CMDB's labels of the instance's IP, with the source instance's own
 * metadata above both unless `override` puts the CMDB on top. regsync's marks are never
 * overwritten by a label.
 */
export interface LabelStamp {
  /** Labels of the source cluster (e.g. `region`), filled in where the instance has no such key. */
  cluster: Readonly<Record<string, string>>;
  /** The CMDB's labels of an IP; undefined when regsync runs without a CMDB. */
  cmdb?: ((ip: string) => Readonly<Record<string, string>>) | undefined;
  /** The CMDB labels to stamp; undefined: all the CMDB has for the IP. */
  names?: readonly string[] | undefined;
  /** CMDB values replace values the source instance already has. */
  override: boolean;
}

export type SkipReason = 'cycle' | 'foreign-copy' | 'unhealthy' | 'disabled';

export interface TransformResult {
  /** What the destination should hold for this task. */
  desired: Instance[];
  skipped: Array<{ instance: Instance; reason: SkipReason }>;
}

/** Splits `regsync.path` into cluster ids. */
export function pathOf(metadata: Record<string, string>): string[] {
  const path = metadata[MARK_PATH];
  return path ? path.split(',').filter((p) => p !== '') : [];
}

/**
 * Turns the instances read from the source into the copies the destination should hold.
 *
 * - Cycle safety: an instance whose origin or path already contains the destination is never
 *   written there (A->B->A, rings, hubs). Marks from nacos-sync (`sourceClusterId`,
 *   `sync.instance.tag`), polaris-sync (`__sync__`) and Consul's `external-source` (consul-k8s) are
 *   honoured the same way, read only.
 * - Marks: `regsync.origin` keeps the first cluster, `regsync.path` grows by the source,
 *   `regsync.task` names the task (ownership).
 * - Unhealthy and disabled source instances are not copied: nobody should route to them, and a
 *   copy of them could not be kept in step (a beat makes an ephemeral copy healthy again, and
 *   Nacos v1 lists hide disabled instances).
 *
 * Pure: no I/O, same input, same output.
 */
export function transform(source: readonly Instance[], ctx: TransformContext): TransformResult {
  const blocked = new Set([ctx.destinationClusterId, ...(ctx.destinationAliases ?? [])]);
  const desired = new Map<string, Instance>();
  const skipped: TransformResult['skipped'] = [];
  for (const instance of source) {
    const md = instance.metadata;
    const origin = md[MARK_ORIGIN] ?? ctx.sourceClusterId;
    const path = pathOf(md);
    if (blocked.has(origin) || path.some((p) => blocked.has(p)) || ctx.sourceClusterId === ctx.destinationClusterId) {
      skipped.push({ instance, reason: 'cycle' });
      continue;
    }
    if (isForeignCopyOf(md, blocked)) {
      skipped.push({ instance, reason: 'foreign-copy' });
      continue;
    }
    if (!instance.enabled) {
      skipped.push({ instance, reason: 'disabled' });
      continue;
    }
    if (!instance.healthy) {
      skipped.push({ instance, reason: 'unhealthy' });
      continue;
    }
    const nextPath = path.includes(ctx.sourceClusterId) ? path : [...path, ctx.sourceClusterId];
    const copy: Instance = {
      ...instance,
      healthy: true,
      metadata: {
        ...keepKeys(ctx.labels ? stampLabels(instance, ctx.labels) : md, ctx.metadataKeys),
        [MARK_ORIGIN]: origin,
        [MARK_PATH]: nextPath.join(','),
        [MARK_TASK]: ctx.taskId,
      },
    };
    desired.set(instanceId(copy), copy);
  }
  return { desired: [...desired.values()], skipped };
}

const MARKS = new Set([MARK_ORIGIN, MARK_PATH, MARK_TASK]);

function keepKeys(md: Record<string, string>, keep: ((key: string) => boolean) | undefined): Record<string, string> {
  if (keep === undefined) return md;
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(md)) if (keep(key)) out[key] = value;
  return out;
}

/** The instance's metadata with the labels of `stamp` added (see {@link LabelStamp} for precedence). */
export function stampLabels(instance: Instance, stamp: LabelStamp): Record<string, string> {
  const md = instance.metadata;
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(stamp.cluster)) if (!MARKS.has(key)) out[key] = value;
  Object.assign(out, md);
  if (stamp.cmdb === undefined) return out;
  const known = stamp.cmdb(instance.ip);
  for (const key of stamp.names ?? Object.keys(known)) {
    if (!Object.hasOwn(known, key) || MARKS.has(key)) continue;
    if (stamp.override || !Object.hasOwn(md, key)) out[key] = known[key] as string;
  }
  return out;
}

function isForeignCopyOf(md: Record<string, string>, blocked: ReadonlySet<string>): boolean {
  const nacosSyncSource = md[FOREIGN_MARKS.nacosSyncSourceCluster];
  const nacosSyncTag = md[FOREIGN_MARKS.nacosSyncTag];
  const polaris = md[FOREIGN_MARKS.polarisSync];
  const external = md[FOREIGN_MARKS.externalSource];
  return (
    (nacosSyncSource !== undefined && blocked.has(nacosSyncSource)) ||
    (nacosSyncTag !== undefined && blocked.has(nacosSyncTag.split('@@')[0] ?? '')) ||
    (polaris !== undefined && blocked.has(polaris)) ||
    (external !== undefined && blocked.has(external))
  );
}

/** The writes that bring a destination service to the desired state. */
export interface SyncPlan {
  upsert: Instance[];
  remove: Instance[];
  /** Desired copies that would overwrite an instance this task does not own; left alone. */
  conflicts: Instance[];
  /** Copies this task owns that already match. */
  unchanged: Instance[];
}

/**
 * Compares the desired copies with what the destination holds. Only instances marked with this
 * task's id are updated or removed; a desired copy whose address is taken by any other instance is
 * reported as a conflict and not written. Nothing changed, nothing written.
 */
export function diff(desired: readonly Instance[], destination: readonly Instance[], taskId: string): SyncPlan {
  const owned = new Map<string, Instance>();
  const foreign = new Map<string, Instance>();
  for (const d of destination) (d.metadata[MARK_TASK] === taskId ? owned : foreign).set(instanceId(d), d);
  const plan: SyncPlan = { upsert: [], remove: [], conflicts: [], unchanged: [] };
  const wanted = new Set<string>();
  for (const want of desired) {
    const id = instanceId(want);
    if (foreign.has(id)) {
      plan.conflicts.push(want);
      continue;
    }
    wanted.add(id);
    const have = owned.get(id);
    if (have && sameInstance(have, want)) plan.unchanged.push(have);
    else plan.upsert.push(want);
  }
  for (const [id, have] of owned) if (!wanted.has(id)) plan.remove.push(have);
  return plan;
}

/** Equality of everything a reader sees. */
export function sameInstance(a: Instance, b: Instance): boolean {
  if (a.weight !== b.weight || a.healthy !== b.healthy || a.enabled !== b.enabled || a.ephemeral !== b.ephemeral) return false;
  const ka = Object.keys(a.metadata);
  return ka.length === Object.keys(b.metadata).length && ka.every((k) => a.metadata[k] === b.metadata[k]);
}
