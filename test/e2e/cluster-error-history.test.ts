import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { chromiumMissing, openChromium, type OpenBrowser } from '../support/browser.js';
import { freePort } from '../support/ports.js';
import { addRegistry, api, copiesIn, defineTask, registerNative, startFixture, startSync, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * A cluster's failed requests over the last hour, as every process counted them in Redis: a task
 * whose destination is a closed port makes its cluster's history show the Nacos adapter's error
 * code, a reachable destination shows none; the dashboard draws the cluster's chart on
 * `#/clusters/:id` and the task's events on its last-hour charts (real Chromium, `npm run build` first).
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCREENSHOTS = join(ROOT, 'dist', 'screenshots');
type Bucket = { at: string; errors: number; byCode: Record<string, number> };

const browserMissing = chromiumMissing('cluster error history browser check');

describe('per-cluster request error history', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  const natives: NativeInstance[] = [];

  const history = async (cluster: string): Promise<Bucket[]> => {
    const res = await api(url, 'GET', `/api/v1/clusters/${cluster}/history`);
    expect(res.status).toBe(200);
    return res.body.items as Bucket[];
  };
  const total = (buckets: Bucket[], code?: string) => buckets.reduce((n, bucket) => n + (code === undefined ? bucket.errors : (bucket.byCode[code] ?? 0)), 0);

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    // Samples often enough that the task page has charts to mark its events on.
    url = (await startSync(fx, undefined, { historyPeriodMs: 250 })).url as string;
    const clusters = [
      { id: 'a', kind: 'nacos', endpoints: [a.endpoint], options: { apiVersion: 'v1' } },
      { id: 'b', kind: 'nacos', endpoints: [b.endpoint], options: { apiVersion: 'v1' } },
      { id: 'gone', kind: 'nacos', endpoints: [`127.0.0.1:${await freePort()}`], options: { apiVersion: 'v1', requestTimeoutMs: 1_000 } },
    ];
    for (const c of clusters) expect((await api(url, 'POST', '/api/v1/clusters', c)).status).toBe(201);
    natives.push(await registerNative(() => a, 'orders', '10.63.0.1', 8080));
    await defineTask(url, 'to-gone', 'a', 'gone', 'orders');
    await defineTask(url, 'to-b', 'a', 'b', 'orders');
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    if (fx) await stopFixture(fx);
  });

  it("shows the unreachable cluster's failed requests with the adapter's code, and none for a reachable one", async () => {
    const gone = await waitUntil(async () => {
      const buckets = await history('gone');
      return total(buckets, 'nacos-unreachable') > 0 ? buckets : undefined;
    }, { timeoutMs: 30_000, message: "gone's history shows nacos-unreachable" });
    expect(gone).toHaveLength(60);
    expect(total(gone)).toBe(gone.reduce((n, bucket) => n + Object.values(bucket.byCode).reduce((m, v) => m + v, 0), 0));
    // The metric of this process counts the same failures.
    expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/regsync_adapter_request_errors_total\{cluster="gone",kind="nacos-unreachable"\} [1-9]/);

    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'the reachable destination synced' });
    expect(total(await history('b'))).toBe(0);
    expect(total(await history('a'))).toBe(0);
    const unknown = await api(url, 'GET', '/api/v1/clusters/nowhere/history');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('cluster_not_found');
  });

  describe.skipIf(browserMissing)('on the dashboard', () => {
    let browser: OpenBrowser | undefined;
    const pageErrors: string[] = [];

    beforeAll(async () => {
      mkdirSync(SCREENSHOTS, { recursive: true });
      browser = await openChromium({ width: 1280, height: 800 }, pageErrors);
    });
    afterAll(async () => {
      await browser?.close();
    });

    it("draws the cluster's request errors below the clusters table, and a reachable cluster's as none", async () => {
      const page = (browser as OpenBrowser).page;
      await waitUntil(async () => total(await history('gone')) > 0, { timeoutMs: 30_000, message: 'errors recorded for gone' });
      await page.goto(`${url}/#/clusters/gone`);
      const chart = page.locator('#cluster-errors svg.history-chart[data-series="errors"]');
      await chart.waitFor();
      const points = ((await chart.locator('polyline.series').getAttribute('points')) ?? '').split(' ').filter((p) => p !== '');
      // A point a minute (the oldest may have left the page's hour if a minute turned since the answer).
      expect(points.length).toBeGreaterThanOrEqual(59);
      expect(Number(await page.locator('#cluster-errors').getAttribute('data-errors'))).toBeGreaterThan(0);
      await page.locator('#cluster-errors p', { hasText: 'nacos-unreachable' }).waitFor();
      expect(await page.getByRole('heading', { name: 'Request errors, last hour' }).count()).toBe(1);
      // Below the table, as wide as the page at most.
      const box = await page.evaluate(() => ({
        chart: document.querySelector('#cluster-errors')?.getBoundingClientRect(),
        table: document.querySelector('#clusters')?.getBoundingClientRect(),
        page: document.documentElement.clientWidth,
      }));
      expect(box.chart?.top).toBeGreaterThan(box.table?.bottom ?? Infinity);
      expect(box.chart?.right).toBeLessThanOrEqual(box.page);
      await page.screenshot({ path: join(SCREENSHOTS, 'cluster-errors.png'), fullPage: true });

      await page.goto(`${url}/#/clusters/b`);
      await page.locator('#cluster-errors p', { hasText: 'No failed request in the last hour.' }).waitFor();
      expect(pageErrors).toEqual([]);
    });

    it("marks the task's events on its last-hour charts, coloured by kind, each titled with time, kind and message", async () => {
      const page = (browser as OpenBrowser).page;
      await waitUntil(async () => ((await api(url, 'GET', '/api/v1/tasks/to-gone/events')).body.items as Array<{ kind: string }>).some((e) => e.kind === 'error'), {
        timeoutMs: 30_000,
        message: 'an error event of to-gone',
      });
      await waitUntil(async () => ((await api(url, 'GET', '/api/v1/tasks/to-gone/history')).body.items as unknown[]).length > 0, { message: 'a sample of to-gone' });
      await page.goto(`${url}/#/tasks/to-gone`);
      const copies = page.locator('#history svg.history-chart[data-series="copies"]');
      await copies.locator('g.event-mark.event-error').first().waitFor();
      const title = (await copies.locator('g.event-mark.event-error title').first().textContent()) ?? '';
      expect(title).toMatch(/\d\d:\d\d:\d\dZ error: /);
      // The marks sit inside the plot of the chart.
      const inside = await copies.evaluate((svg) => {
        const plot = svg.querySelector('rect.plot')?.getBoundingClientRect();
        return Array.from(svg.querySelectorAll('g.event-mark line')).every((line) => {
          const r = line.getBoundingClientRect();
          return plot !== undefined && r.left >= plot.left - 1 && r.right <= plot.right + 1;
        });
      });
      expect(inside).toBe(true);
      expect(await page.locator('#history svg[data-series="lag"] g.event-mark').count()).toBeGreaterThan(0);
      const width = await page.evaluate(() => ({ chart: document.querySelector('#history')?.getBoundingClientRect().right ?? Infinity, page: document.documentElement.clientWidth }));
      expect(width.chart).toBeLessThanOrEqual(width.page);
      await page.screenshot({ path: join(SCREENSHOTS, 'task-events-on-history.png'), fullPage: true });
      expect(pageErrors).toEqual([]);
    });
  });
});
