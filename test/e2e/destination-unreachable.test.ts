import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { freePort } from '../support/ports.js';
import { addRegistry, api, defineTask, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * A reconcile reads its source and its destination at once; a destination that cannot be read
 * fails the reconcile with that reason (and writes nothing), whatever the source read did.
 */
describe('a destination that cannot be read', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let url: string;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    url = (await startSync(fx)).url as string;
    // Nothing listens there: every connection is refused at once.
    const closed = await freePort();
    for (const [id, endpoint] of [['a', a.endpoint], ['gone', `127.0.0.1:${closed}`]] as const) {
      expect((await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options: { requestTimeoutMs: 1_000 } })).status).toBe(201);
    }
  });
  afterAll(async () => {
    await stopFixture(fx);
  });

  it('records why in the service status: the destination read, not a write', async () => {
    a.store.register('public', 'DEFAULT_GROUP', 'orders', { ip: '10.32.0.1', port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {} });
    await defineTask(url, 'to-gone', 'a', 'gone', 'orders');
    const status = await waitUntil(
      async () => {
        const res = await api(url, 'GET', '/api/v1/tasks/to-gone');
        const service = res.body.status?.services?.[0] as { lastError: string | null } | undefined;
        return service?.lastError ? service : undefined;
      },
      { message: 'the status to say why' },
    );
    expect(status.lastError).toMatch(/^cannot read destination gone: /);
  });
});
