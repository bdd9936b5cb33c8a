import { instanceId, type Instance } from '../../src/model/index.js';

/** What the `regsync.io/instances` annotation keeps of one instance: everything an EndpointSlice cannot hold. */
export interface StoredEntry {
  ip: string;
  port: number;
  weight: number;
  enabled: boolean;
  ephemeral: boolean;
  cluster: string;
  metadata: Record<string, string>;
}

/**
 * Encodes instances as the annotation's JSON: an object keyed by instance id (`ip:port#cluster`),
 * keys and metadata sorted, so that equal sets always give equal text (a slice is rewritten only
 * when something really changed). Health is not stored: it lives in the endpoint's conditions.
 */
export function encodeEntries(instances: readonly Instance[]): string {
  const sorted = [...instances].sort((a, b) => compare(instanceId(a), instanceId(b)));
  const out: Record<string, StoredEntry> = {};
  for (const i of sorted) {
    const metadata: Record<string, string> = {};
    for (const k of Object.keys(i.metadata).sort(compare)) metadata[k] = i.metadata[k] as string;
    out[instanceId(i)] = { ip: i.ip, port: i.port, weight: i.weight, enabled: i.enabled, ephemeral: i.ephemeral, cluster: i.cluster, metadata };
  }
  return JSON.stringify(out);
}

/** Decodes the annotation; entries that are not well formed are reported in `issues` and left out. */
export function decodeEntries(text: string | undefined, where: string): { entries: StoredEntry[]; issues: string[] } {
  if (text === undefined || text === '') return { entries: [], issues: [] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { entries: [], issues: [`${where}: annotation regsync.io/instances is not JSON`] };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { entries: [], issues: [`${where}: annotation regsync.io/instances is not a JSON object`] };
  }
  const entries: StoredEntry[] = [];
  const issues: string[] = [];
  for (const [id, value] of Object.entries(parsed as Record<string, unknown>)) {
    const e = value as Partial<StoredEntry> | null;
    const ok =
      typeof e === 'object' &&
      e !== null &&
      typeof e.ip === 'string' &&
      typeof e.port === 'number' &&
      typeof e.weight === 'number' &&
      typeof e.enabled === 'boolean' &&
      typeof e.ephemeral === 'boolean' &&
      typeof e.cluster === 'string' &&
      typeof e.metadata === 'object' &&
      e.metadata !== null &&
      Object.values(e.metadata).every((v) => typeof v === 'string');
    if (!ok) {
      issues.push(`${where}: malformed entry ${id} in annotation regsync.io/instances`);
      continue;
    }
    entries.push({ ip: e.ip, port: e.port, weight: e.weight, enabled: e.enabled, ephemeral: e.ephemeral, cluster: e.cluster, metadata: { ...e.metadata } } as StoredEntry);
  }
  return { entries, issues };
}

/** Code-unit order, the same on every machine (no locale). */
export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
