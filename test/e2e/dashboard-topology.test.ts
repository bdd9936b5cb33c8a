import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { freePort } from '../support/ports.js';
import { addRegistry, api, copiesIn, defineTask, startFixture, startSync, stopFixture, testLogger, type SyncFixture } from '../support/sync-fixture.js';
import { buildDashboard, chromiumMissing, openChromium, type OpenBrowser } from '../support/browser.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * The topology on the dashboard's first page, in a real headless Chromium (as dashboard.test.ts
 * drives it) against a real regsync syncing a ring of three embedded registries a -> b -> c -> a.
 * Then c-to-a is paused and cluster c pointed at a closed port: b-to-c fails, and its arrow says so.
 * The screenshot at 1280 x 800 goes to dist/screenshots/ (its path is printed).
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCREENSHOTS = join(ROOT, 'dist', 'screenshots');
const RING = [
  ['a-to-b', 'a', 'b'],
  ['b-to-c', 'b', 'c'],
  ['c-to-a', 'c', 'a'],
] as const;

const browserMissing = chromiumMissing('dashboard topology test');

describe.skipIf(browserMissing)('the topology on the dashboard', () => {
  let fx: SyncFixture;
  const registries = new Map<string, RunningRegistry>();
  let url: string;
  let browser: OpenBrowser | undefined;
  let page: Page;
  const pageErrors: string[] = [];

  const edge = (from: string, to: string) => page.locator(`#topology [data-edge="${from}->${to}"]`);

  beforeAll(async () => {
    buildDashboard();
    mkdirSync(SCREENSHOTS, { recursive: true });

    fx = await startFixture();
    for (const id of ['a', 'b', 'c']) registries.set(id, await addRegistry(fx, id));
    url = (await startSync(fx, testLogger())).url as string;
    for (const [id, registry] of registries) {
      const res = await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [registry.endpoint], options: { requestTimeoutMs: 1_000 } });
      expect(res.status).toBe(201);
    }
    for (const [id, source, destination] of RING) await defineTask(url, id, source, destination, 'orders');

    browser = await openChromium({ width: 1280, height: 800 }, pageErrors);
    page = browser.page;
  });

  afterAll(async () => {
    await browser?.close();
    if (fx) await stopFixture(fx);
  });

  it('draws the ring as three clusters and three running arrows, each labelled with its copies', async () => {
    registries.get('a')?.store.register('public', 'DEFAULT_GROUP', 'orders', { ip: '10.33.0.1', port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {} });
    // Around the ring once: a's instance reaches b and c, and never comes back to a.
    await waitUntil(() => copiesIn(registries.get('c') as RunningRegistry, 'orders').length === 1, { message: 'the copy to reach c', timeoutMs: 30_000 });
    expect(copiesIn(registries.get('b') as RunningRegistry, 'orders')).toHaveLength(1);

    await page.goto(`${url}/`);
    await page.locator('#topology').waitFor();
    await expect.poll(() => page.locator('#topology [data-node]').count()).toBe(3);
    await expect.poll(() => page.locator('#topology [data-edge]').count()).toBe(3);
    // c-to-a holds no copy: a's own instance is never written back to a.
    for (const [[, from, to], copies] of RING.map((t, i) => [t, i < 2 ? 1 : 0] as const)) {
      await edge(from, to).and(page.locator('[data-tone="running"]')).waitFor();
      await edge(from, to).locator('.edge-label', { hasText: new RegExp(`^copies ${copies}\\b`) }).waitFor();
    }
    expect(await page.locator('#topology [data-node="a"]').textContent()).toContain('nacos');
    await page.locator('#topology [data-node="a"].health-ok').waitFor();
  });

  it('marks the arrow of a failing task, keeps a paused one apart, fits 1280 px, and clicks through', async () => {
    expect((await api(url, 'POST', '/api/v1/tasks/c-to-a/pause')).status).toBe(200);
    const closed = await freePort();
    const put = await api(url, 'PUT', '/api/v1/clusters/c', { kind: 'nacos', endpoints: [`127.0.0.1:${closed}`], options: { requestTimeoutMs: 1_000 } });
    expect(put.status).toBe(200);
    expect((await api(url, 'POST', '/api/v1/tasks/b-to-c/resync')).status).toBeLessThan(300);
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/b-to-c/summary')).body.state === 'error', { message: 'b-to-c to fail', timeoutMs: 30_000 });

    await edge('b', 'c').and(page.locator('[data-tone="failing"]')).waitFor();
    await edge('c', 'a').and(page.locator('[data-tone="paused"]')).waitFor();
    expect(await edge('a', 'b').getAttribute('data-tone')).toBe('running');
    expect(await edge('b', 'c').locator('.edge-label').textContent()).toContain('failing');
    await page.locator('#topology [data-node="c"].health-failing').waitFor();
    // Red is red: the failing arrow is drawn in the dashboard's colour for failures.
    const colours = await page.evaluate(() => {
      const stroke = (sel: string) => getComputedStyle(document.querySelector(sel) as Element).stroke;
      return { failing: stroke('[data-edge="b->c"] .edge-line'), running: stroke('[data-edge="a->b"] .edge-line'), bad: getComputedStyle(document.documentElement).getPropertyValue('--bad').trim() };
    });
    expect(colours.failing).not.toBe(colours.running);
    expect(colours.failing).toBe(hexToRgb(colours.bad));

    const path = join(SCREENSHOTS, 'topology-ring-1280x800.png');
    await page.screenshot({ path });
    console.log(`topology screenshot: ${path}`);
    const { scrollWidth, clientWidth } = await page.evaluate(() => ({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth }));
    expect(scrollWidth).toBeLessThanOrEqual(clientWidth);

    await edge('b', 'c').locator('.edge-label').click();
    await page.waitForURL(/#\/tasks\/b-to-c$/);
    await page.locator('#task-state', { hasText: 'error' }).waitFor();

    await page.goto(`${url}/#/tasks`);
    await page.locator('#topology [data-node="c"]').click();
    await page.waitForURL(/#\/clusters\/c$/);
    await page.locator('tr[data-cluster="c"].selected .reachability', { hasText: 'unreachable' }).waitFor();
  });

  it('bundles two tasks of one direction between one pair into one arrow with a count', async () => {
    await defineTask(url, 'a-to-b-payments', 'a', 'b', 'payments');
    await page.goto(`${url}/#/tasks`);
    await edge('a', 'b').and(page.locator('[data-tasks="a-to-b a-to-b-payments"]')).waitFor();
    expect(await edge('a', 'b').locator('.edge-label').textContent()).toMatch(/^2 tasks/);
    expect(await page.locator('#topology [data-edge]').count()).toBe(3);
    expect(await edge('a', 'b').locator('title').textContent()).toContain('a-to-b-payments: a → b');
    expect(pageErrors).toEqual([]);
  });
});

function hexToRgb(hex: string): string {
  const n = Number.parseInt(hex.replace('#', ''), 16);
  return `rgb(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255})`;
}
