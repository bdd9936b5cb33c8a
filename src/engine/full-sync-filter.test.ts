import { describe, expect, it } from 'vitest';
import type { ServiceStatus } from '../model/service-status.js';
import type { ServiceKey } from '../model/types.js';
import { dueForFullSync, verifyRound, type FullSyncFilterInput } from './full-sync-filter.js';

const service = (name: string): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });
const status = (name: string, over: Partial<ServiceStatus> = {}): ServiceStatus => ({
  service: service(name),
  sourceInstances: 1,
  destinationInstances: 1,
  lastSyncAt: '2026-01-01T00:00:00.000Z',
  lagMs: 1,
  lastError: null,
  problems: [],
  sourceDigest: `d-${name}`,
  held: null,
  ...over,
});

function input(over: Partial<FullSyncFilterInput>, statuses: Map<string, ServiceStatus>, digests: Map<string, string>, memory = new Map<string, string>()): FullSyncFilterInput {
  return {
    taskId: 't',
    keys: [...statuses.keys(), 'gone'],
    serviceOf: (key) => service(key),
    confirmed: (key) => memory.get(key),
    confirm: (key, digest) => (digest === undefined ? memory.delete(key) : memory.set(key, digest)),
    rereads: () => false,
    source: { cachedDigest: (s) => digests.get(s.name) },
    destinationBound: true,
    verifies: () => false,
    inSync: () => Promise.reject(new Error('not checked in this test')),
    statuses: async (_task, services) => services.map((s) => statuses.get(s.name)),
    ...over,
  };
}

describe('dueForFullSync', () => {
  const statuses = new Map([
    ['same', status('same')],
    ['changed', status('changed')],
    ['unfed', status('unfed')],
    ['failing', status('failing', { problems: [{ code: 'destination_unwritable', side: 'destination', cluster: 'b', message: 'x' }] })],
    ['held', status('held', { held: { since: 1, removes: 5, copies: 8, peak: 8, addresses: [] } as unknown as ServiceStatus['held'] })],
  ]);
  const digests = new Map([
    ['same', 'd-same'],
    ['changed', 'd-other'],
    ['failing', 'd-failing'],
    ['held', 'd-held'],
    ['gone', 'd-gone'],
  ]);

  it('leaves out only service syncs whose fed source digest equals their last status, without problems or holds', async () => {
    const { due, skipped } = await dueForFullSync(input({}, statuses, digests));
    expect(due.sort()).toEqual(['changed', 'failing', 'gone', 'held', 'unfed']);
    expect(skipped).toBe(1);
  });

  it('keeps every key for a destination not bound to connections, and for a source without a feed', async () => {
    for (const over of [{ destinationBound: false }, { source: {} }]) {
      const { due, skipped } = await dueForFullSync(input(over, statuses, digests));
      expect(due).toHaveLength(6);
      expect(skipped).toBe(0);
    }
  });

  it('checks the keys of its round that the feed vouches for, and keeps those whose check finds a difference or fails', async () => {
    const vouched = new Map([
      ['quiet', status('quiet')],
      ['drifted', status('drifted')],
      ['unreadable', status('unreadable')],
      ['other-round', status('other-round')],
      ['changed', status('changed')],
    ]);
    const fed = new Map([...vouched.keys()].map((k) => [k, k === 'changed' ? 'd-new' : `d-${k}`]));
    const checked: string[] = [];
    const answers: Record<string, () => Promise<boolean>> = {
      quiet: async () => true,
      drifted: async () => false,
      unreadable: () => Promise.reject(new Error('destination down')),
    };
    const { due, skipped, verified } = await dueForFullSync(
      input(
        {
          keys: [...vouched.keys()],
          verifies: (key) => key !== 'other-round',
          inSync: (key) => {
            checked.push(key);
            return (answers[key] ?? (async () => true))();
          },
        },
        vouched,
        fed,
      ),
    );
    // A key already due (its source changed) is reconciled without a check.
    expect(checked.sort()).toEqual(['drifted', 'quiet', 'unreadable']);
    expect(verified).toBe(3);
    expect(due.sort()).toEqual(['changed', 'drifted', 'unreadable']);
    expect(skipped).toBe(2);
  });

  it('reads the status of a key confirmed before only when its fed digest moved, or in its reread round', async () => {
    const memory = new Map<string, string>();
    const reads: string[][] = [];
    const recorded = new Map(statuses);
    const fed = new Map(digests);
    const statusesOf = async (_task: string, services: readonly ServiceKey[]) => {
      reads.push(services.map((s) => s.name).sort());
      return services.map((s) => recorded.get(s.name));
    };
    const round = (rereads: (key: string) => boolean = () => false) => dueForFullSync(input({ statuses: statusesOf, rereads }, recorded, fed, memory));
    await round();
    expect(memory).toEqual(new Map([['same', 'd-same']]));
    // Nothing moved: only the keys not confirmed are read.
    const quiet = await round();
    expect(reads.at(-1)).toEqual(['changed', 'failing', 'gone', 'held']);
    expect(quiet.skipped).toBe(1);
    // A later reconcile elsewhere recorded a problem: found in the key's reread round, not before.
    recorded.set('same', status('same', { problems: [{ code: 'destination_unwritable', side: 'destination', cluster: 'b', message: 'x' }] }));
    expect((await round()).due).not.toContain('same');
    const reread = await round((key) => key === 'same');
    expect(reads.at(-1)).toContain('same');
    expect(reread.due).toContain('same');
    expect(memory.has('same')).toBe(false);
    // The feed moved: read at once.
    recorded.set('same', status('same'));
    await round();
    fed.set('same', 'd-moved');
    const moved = await round();
    expect(reads.at(-1)).toContain('same');
    expect(moved.due).toContain('same');
  });

  it('treats a status that cannot be read as due', async () => {
    const { due } = await dueForFullSync(input({ statuses: () => Promise.reject(new Error('redis down')) }, statuses, digests));
    expect(due).toContain('same');
  });

  it('spreads keys evenly over the rounds, each key in one round whatever process asks', () => {
    const rounds = 6;
    const counts = new Array<number>(rounds).fill(0);
    for (let n = 0; n < 6_000; n += 1) {
      const round = verifyRound(`t\u0000public\u0000DEFAULT_GROUP\u0000svc-${n}`, rounds);
      expect(round).toBe(verifyRound(`t\u0000public\u0000DEFAULT_GROUP\u0000svc-${n}`, rounds));
      counts[round] = (counts[round] ?? 0) + 1;
    }
    for (const count of counts) expect(count).toBeGreaterThan(800);
    expect(verifyRound('anything', 1)).toBe(0);
  });
});
