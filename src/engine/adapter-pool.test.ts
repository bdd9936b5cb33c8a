import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import type { RegistryAdapter } from '../model/adapter.js';
import type { ClusterSpec } from '../model/types.js';
import { AdapterPool } from './adapter-pool.js';

const specOf = (id: string): ClusterSpec => ({ id, kind: 'nacos', endpoints: ['127.0.0.1:8848'], labels: {}, options: {} });

/** An adapter that only records being closed. */
function idleAdapter(spec: ClusterSpec): RegistryAdapter & { closed: boolean } {
  return {
    clusterId: spec.id,
    closed: false,
    async listServices() {
      return [];
    },
    async listInstances() {
      return [];
    },
    watch() {
      return () => {};
    },
    async apply() {},
    async close() {
      this.closed = true;
    },
  };
}

/** A store lookup whose answers the test releases one cluster at a time. */
function heldLookup() {
  const waiting = new Map<string, () => void>();
  const lookup = (id: string) =>
    new Promise<ClusterSpec | undefined>((resolve) => {
      waiting.set(id, () => resolve(specOf(id)));
    });
  const release = (id: string) => {
    const answer = waiting.get(id);
    if (!answer) throw new Error(`no lookup of ${id} is waiting`);
    waiting.delete(id);
    answer();
  };
  return { lookup, release };
}

describe('AdapterPool', () => {
  it('keeps the spec of an adapter built while an unrelated cluster was invalidated', async () => {
    const { lookup, release } = heldLookup();
    const pool = new AdapterPool(lookup, { nacos: idleAdapter }, silentLogger());
    const a = pool.get('a');
    await pool.invalidate('b');
    release('a');
    expect((await a).clusterId).toBe('a');
    expect(pool.spec('a')).toEqual(specOf('a'));
    // Cached: the same adapter again, without another lookup (none is waiting to be released).
    expect(await pool.get('a')).toBe(await a);
  });

  it('does not record the spec of an adapter whose own cluster was invalidated while it was built', async () => {
    const { lookup, release } = heldLookup();
    const pool = new AdapterPool(lookup, { nacos: idleAdapter }, silentLogger());
    const first = pool.get('a');
    // Invalidating waits for the adapter under way to close it.
    const invalidated = pool.invalidate('a');
    release('a');
    await invalidated;
    expect(((await first) as { closed?: boolean }).closed).toBe(true);
    expect(pool.spec('a')).toBeUndefined();
    const second = pool.get('a');
    release('a');
    expect(await second).not.toBe(await first);
    expect(pool.spec('a')).toEqual(specOf('a'));
  });
});
