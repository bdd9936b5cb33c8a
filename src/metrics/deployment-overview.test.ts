import { describe, expect, it } from 'vitest';
import type { ServiceStatus } from '../model/service-status.js';
import type { ClusterSpec, HeldDeletion, TaskSpec } from '../model/types.js';
import { clusterStateOf, deploymentOverview, serviceSyncState, taskDisplayName } from './deployment-overview.js';

const cluster = (id: string, options: Record<string, unknown> = {}): ClusterSpec => ({ id, kind: 'nacos', endpoints: ['10.0.0.1:8848'], labels: {}, options });
const task = (id: string, extra: Partial<TaskSpec> = {}): TaskSpec => ({
  id,
  source: 'a',
  destination: 'b',
  service: 'orders',
  group: 'DEFAULT_GROUP',
  namespace: 'public',
  options: {},
  state: 'running',
  createdAt: '2026-01-01T00:00:00.000Z',
  ...extra,
});
const status = (name: string, extra: Partial<ServiceStatus> = {}): ServiceStatus => ({
  service: { namespace: 'public', group: 'DEFAULT_GROUP', name },
  sourceInstances: 2,
  destinationInstances: 2,
  lastSyncAt: '2026-01-01T00:00:00.000Z',
  lagMs: 10,
  lastError: null,
  ...extra,
});
const held: HeldDeletion = { removes: 9, copies: 10, since: '2026-01-01T00:00:00.000Z', confirm: 'operator' };

describe('deploymentOverview', () => {
  it('counts a held service as held only, a service with an error as failing, the others as synced', () => {
    expect(serviceSyncState(status('s'))).toBe('synced');
    expect(serviceSyncState(status('s', { lastError: 'source unreadable' }))).toBe('failing');
    expect(serviceSyncState(status('s', { lastError: 'holding a mass deletion', held }))).toBe('held');
    expect(serviceSyncState(status('s', { held: null }))).toBe('synced');
  });

  it("sums copies and states per task, keeps a running task's own problem, and reads each cluster state from its reachability", () => {
    const overview = deploymentOverview({
      clusters: [cluster('a'), cluster('b'), cluster('c')],
      tasks: [
        {
          spec: task('t1'),
          statuses: [
            status('x'),
            status('y', { lastError: 'boom', destinationInstances: 0 }),
            status('z', { lastError: 'holding', held, destinationInstances: 10 }),
          ],
        },
        { spec: task('t2', { state: 'paused' }), statuses: [], taskProblem: { code: 'source_unlisted', cluster: 'a', message: 'old' } },
        { spec: task('t3', { service: '*', group: '*' }), statuses: [], taskProblem: { code: 'source_unlisted', cluster: 'a', message: 'unreachable' } },
      ],
      reachability: new Map([
        ['a', 'ok'],
        ['b', 'failing'],
        ['c', 'partial'],
      ]),
    });
    expect(overview.tasks).toEqual([
      { id: 't1', name: 't1', source: 'a', destination: 'b', running: true, instances: 12, syncs: { synced: 1, failing: 1, held: 1 }, problem: null },
      // A paused task's problem is as old as the pause.
      { id: 't2', name: 't2', source: 'a', destination: 'b', running: false, instances: 0, syncs: { synced: 0, failing: 0, held: 0 }, problem: null },
      { id: 't3', name: 't3', source: 'a', destination: 'b', running: true, instances: 0, syncs: { synced: 0, failing: 0, held: 0 }, problem: 'source_unlisted' },
    ]);
    expect(overview.clusters.map((c) => [c.id, c.state])).toEqual([
      ['a', 'reachable'],
      ['b', 'unreachable'],
      ['c', 'partial'],
    ]);
    expect(clusterStateOf('unknown')).toBe('unknown');
    expect(clusterStateOf(undefined)).toBe('unknown');
    // A finer cause keeps its word; what is not a short word does not become a label value.
    expect(clusterStateOf('auth_failed')).toBe('auth_failed');
    expect(clusterStateOf('Not A Word {}')).toBe('unknown');
    expect(clusterStateOf('x'.repeat(40))).toBe('unknown');
  });

  it('names a task by its id, and a nacos-sync task (md5 id) by its service and cluster names', () => {
    const clusters = new Map([
      ['28456ef8a3d2d158061fd794894d7127', cluster('28456ef8a3d2d158061fd794894d7127', { nacosSyncName: 'shanghai' })],
      ['5612ec2238b730a4b99dd63b86d6bc07', cluster('5612ec2238b730a4b99dd63b86d6bc07', { nacosSyncName: 'beijing' })],
    ]);
    const pair = { source: '28456ef8a3d2d158061fd794894d7127', destination: '5612ec2238b730a4b99dd63b86d6bc07' };
    expect(taskDisplayName(task('orders-sh-bj', pair), clusters)).toBe('orders-sh-bj');
    expect(taskDisplayName(task('0123456789abcdef0123456789abcdef', pair), clusters)).toBe('orders in DEFAULT_GROUP, shanghai -> beijing');
    expect(taskDisplayName(task('0123456789abcdef0123456789abcdef', { ...pair, service: '*', group: '*' }), clusters)).toBe('every service, shanghai -> beijing');
    // A cluster that is gone, or native, shows its id.
    expect(taskDisplayName(task('0123456789abcdef0123456789abcdef', { source: 'gone' }), clusters)).toBe('orders in DEFAULT_GROUP, gone -> b');
    const long = taskDisplayName(task('0123456789abcdef0123456789abcdef', { service: 'x'.repeat(500) }), clusters);
    expect(long).toHaveLength(200);
  });
});
