import { describe, expect, it } from 'vitest';
import type { ServiceStatus } from '../model/service-status.js';
import type { ServiceKey } from '../model/types.js';
import { dueForFullSync, type FullSyncFilterInput } from './full-sync-filter.js';

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

function input(over: Partial<FullSyncFilterInput>, statuses: Map<string, ServiceStatus>, digests: Map<string, string>): FullSyncFilterInput {
  return {
    taskId: 't',
    keys: [...statuses.keys(), 'gone'],
    serviceOf: (key) => service(key),
    source: { cachedDigest: (s) => digests.get(s.name) },
    destinationBound: true,
    verify: false,
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

  it('keeps every key in a verify round, for a destination not bound to connections, and for a source without a feed', async () => {
    for (const over of [{ verify: true }, { destinationBound: false }, { source: {} }]) {
      const { due, skipped } = await dueForFullSync(input(over, statuses, digests));
      expect(due).toHaveLength(6);
      expect(skipped).toBe(0);
    }
  });

  it('treats a status that cannot be read as due', async () => {
    const { due } = await dueForFullSync(input({ statuses: () => Promise.reject(new Error('redis down')) }, statuses, digests));
    expect(due).toContain('same');
  });
});
