import { DEFAULT_INSTANCE_CLUSTER } from '../../src/model/index.js';

/**
 * Metadata key (URL parameter in Dubbo, payload metadata in Curator) that carries a Nacos cluster
 * name other than `DEFAULT` through ZooKeeper, which has no such notion. The adapter writes it and
 * strips it when reading, so an instance's identity (`ip:port#cluster`) survives the round trip.
 */
export const CLUSTER_KEY = 'regsync.cluster';

/** The weight a metadata `weight` entry gives: a finite number >= 0, else 1 (nacos-sync's default). */
export function weightFromMetadata(value: string | undefined): number {
  if (value === undefined || value.trim() === '') return 1;
  const n = Number(value);
  return Number.isFinite(n) && n >= 0 ? n : 1;
}

/**
 * Metadata key listing (comma-separated) the keys a copy carries only because the writer derived
 * them from instance fields (`weight`, and the layout's own, such as Dubbo's `enabled` and
 * `dynamic`): the reader takes them back out, so that any process reads a copy as it was written,
 * not with extra metadata (which the engine would see as a change and write again, moving the node
 * into its own session).
 */
export const DERIVED_KEY = 'regsync.derived';

/**
 * The metadata to write for an instance: its own, with `weight` set when the instance's weight
 * differs from what the metadata says (rounded: Dubbo reads weights as integers), `carriers` (the
 * layout's parameters for other fields) set, the cluster under {@link CLUSTER_KEY} unless it is
 * `DEFAULT`, and every key set here that the metadata did not hold with that value listed under
 * {@link DERIVED_KEY}.
 */
export function metadataToWrite(
  instance: { weight: number; cluster: string; metadata: Record<string, string> },
  carriers: Record<string, string> = {},
): Record<string, string> {
  const out: Record<string, string> = { ...instance.metadata };
  delete out[DERIVED_KEY];
  const derived: string[] = [];
  const weight = Number.isInteger(instance.weight) ? instance.weight : Math.round(instance.weight);
  if (weightFromMetadata(out.weight) !== weight) carriers = { weight: String(weight), ...carriers };
  for (const [key, value] of Object.entries(carriers)) {
    if (out[key] !== value) derived.push(key);
    out[key] = value;
  }
  if (derived.length > 0) out[DERIVED_KEY] = derived.sort().join(',');
  if (instance.cluster !== DEFAULT_INSTANCE_CLUSTER && instance.cluster !== '') out[CLUSTER_KEY] = instance.cluster;
  else delete out[CLUSTER_KEY];
  return out;
}

/**
 * Splits what was read into metadata and cluster (see {@link CLUSTER_KEY}), leaving out the keys
 * {@link DERIVED_KEY} lists. Fields are read from the whole of what was read, before this.
 */
export function clusterFromMetadata(read: Record<string, string>): { cluster: string; metadata: Record<string, string> } {
  const derived = read[DERIVED_KEY];
  const cluster = read[CLUSTER_KEY];
  if (cluster === undefined && derived === undefined) return { cluster: DEFAULT_INSTANCE_CLUSTER, metadata: read };
  const metadata = { ...read };
  delete metadata[CLUSTER_KEY];
  delete metadata[DERIVED_KEY];
  for (const key of derived?.split(',') ?? []) delete metadata[key];
  return { cluster: cluster === undefined || cluster === '' ? DEFAULT_INSTANCE_CLUSTER : cluster, metadata };
}
