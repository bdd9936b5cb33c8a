import { describe, expect, it } from 'vitest';
import type { TransportStats } from '../model/adapter.js';
import { RegsyncMetrics } from './regsync-metrics.js';

describe('registry connection metrics', () => {
  it('reads each adapter’s connection counters at scrape time, and leaves out adapters without a connection', async () => {
    const metrics = new RegsyncMetrics({ defaultMetrics: false });
    let stats: TransportStats = { connections: 1, reconnects: 0, pushesReceived: 3, publishSets: 2 };
    const adapters = new Map<string, { transportStats?(): TransportStats | undefined }>([
      ['sh', { transportStats: () => stats }],
      ['zk', {}],
      ['bj-http', { transportStats: () => undefined }],
    ]);
    metrics.watchConnections(() => adapters);
    let text = await metrics.metrics();
    expect(text).toContain('regsync_registry_connections{cluster="sh"} 1');
    expect(text).toContain('regsync_registry_pushes_received_total{cluster="sh"} 3');
    expect(text).toContain('regsync_registry_publish_sets{cluster="sh"} 2');
    expect(text).not.toMatch(/cluster="(zk|bj-http)"/);
    stats = { connections: 0, reconnects: 1, pushesReceived: 3, publishSets: 2 };
    text = await metrics.metrics();
    expect(text).toContain('regsync_registry_connections{cluster="sh"} 0');
    expect(text).toContain('regsync_registry_reconnects_total{cluster="sh"} 1');
  });
});
