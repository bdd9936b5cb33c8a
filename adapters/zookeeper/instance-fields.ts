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
 * The metadata to write for an instance: its own, with `weight` set when the instance's weight
 * differs from what the metadata says (rounded: Dubbo reads weights as integers), and the cluster
 * under {@link CLUSTER_KEY} unless it is `DEFAULT`.
 */
export function metadataToWrite(instance: { weight: number; cluster: string; metadata: Record<string, string> }): Record<string, string> {
  const out: Record<string, string> = { ...instance.metadata };
  const weight = Number.isInteger(instance.weight) ? instance.weight : Math.round(instance.weight);
  if (weightFromMetadata(out.weight) !== weight) out.weight = String(weight);
  if (instance.cluster !== DEFAULT_INSTANCE_CLUSTER && instance.cluster !== '') out[CLUSTER_KEY] = instance.cluster;
  else delete out[CLUSTER_KEY];
  return out;
}

/** Splits what was read into metadata and cluster (see {@link CLUSTER_KEY}). */
export function clusterFromMetadata(metadata: Record<string, string>): { cluster: string; metadata: Record<string, string> } {
  const cluster = metadata[CLUSTER_KEY];
  if (cluster === undefined) return { cluster: DEFAULT_INSTANCE_CLUSTER, metadata };
  const rest = { ...metadata };
  delete rest[CLUSTER_KEY];
  return { cluster: cluster === '' ? DEFAULT_INSTANCE_CLUSTER : cluster, metadata: rest };
}
