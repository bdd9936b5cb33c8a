import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KINDS } from '../../adapters/kinds.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { apiWithToken } from '../support/http.js';
import { buildDashboard, chromiumMissing, openChromium, type OpenBrowser } from '../support/browser.js';
import { waitUntil } from '../support/wait-until.js';
import { addRegistry, copiesIn, registerNative, startFixture, startSync, stopFixture, testLogger, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';

/*
 * The dashboard in a real headless Chromium (Debian's, driven by playwright-core) against a real
 * regsync: Redis, two embedded registries, the API with an admin and a read token. An operator signs
 * in, adds two clusters and a task through the forms, watches the task converge while an instance
 * registers (no reload), checks clusters, shards and workers, pauses the task, then looks again with
 * a read-only token. Screenshots go to dist/screenshots/.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCREENSHOTS = join(ROOT, 'dist', 'screenshots');
const ADMIN_TOKEN = 'dashboard-admin-0123456789abcdef';
const READ_TOKEN = 'dashboard-read-0123456789abcdef';
const TASK = 'orders-east-west';
const SERVICE_ROW = 'tr[data-service="public/DEFAULT_GROUP/orders"]';

// `npm test` installs chromium before any test runs (scripts/system-packages.mjs); run directly,
// this file tries the same, and is skipped only when the browser cannot be installed here.
const browserMissing = chromiumMissing('dashboard browser test');

describe.skipIf(browserMissing)('the dashboard in headless Chromium', () => {
  let fx: SyncFixture;
  let east: RunningRegistry;
  let west: RunningRegistry;
  let url: string;
  let browser: OpenBrowser | undefined;
  let context: BrowserContext;
  let page: Page;
  const natives: NativeInstance[] = [];
  const pageErrors: string[] = [];

  /** The REST API as the admin, for checks the page does not make. */
  const api = apiWithToken(() => url, ADMIN_TOKEN);
  const shot = (name: string) => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  const nav = (name: string) => page.locator('header nav').getByRole('link', { name, exact: true }).click();

  beforeAll(async () => {
    buildDashboard();
    mkdirSync(SCREENSHOTS, { recursive: true });

    fx = await startFixture();
    east = await addRegistry(fx, 'east');
    west = await addRegistry(fx, 'west');
    const node = await startSync(fx, testLogger(), {
      apiTokens: [
        { name: 'ops', scope: 'admin', token: ADMIN_TOKEN },
        { name: 'viewer', scope: 'read', token: READ_TOKEN },
      ],
      // Samples of the task's last hour come often enough to see them drawn.
      historyPeriodMs: 250,
    });
    url = node.url as string;

    browser = await openChromium({ width: 1440, height: 900 }, pageErrors, { acceptDialogs: true });
    ({ context, page } = browser);
  });

  afterAll(async () => {
    for (const n of natives) n.stop();
    await browser?.close();
    if (fx) await stopFixture(fx);
  });

  it('asks for a token, shows why a wrong one is refused, and signs in with the admin token', async () => {
    await page.goto(`${url}/`);
    await page.locator('#login').waitFor({ state: 'visible' });
    await shot('01-sign-in');

    await page.locator('#token').fill('not-a-token-of-this-server');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#login-error', { hasText: 'the token is not valid' }).waitFor();

    await page.locator('#token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#who', { hasText: 'ops (admin)' }).waitFor();
    expect(await page.locator('#login').isHidden()).toBe(true);
    // Kept in the tab's sessionStorage, not in localStorage or a cookie.
    expect(await page.evaluate(() => sessionStorage.getItem('regsync.apiToken'))).toBe(ADMIN_TOKEN);
    expect(await context.cookies()).toEqual([]);
    // Gone if anything below reloads the page: every update must come without a reload.
    await page.evaluate(() => Object.assign(window, { regsyncNotReloaded: true }));
  });

  it('adds two clusters with the form and shows the API\'s own message for a duplicate', async () => {
    await nav('Clusters');
    const form = page.locator('#add-cluster');
    // The kind choices are the server's list of kinds, labelled as it labels them.
    await form.locator('[name=kind] option').first().waitFor({ state: 'attached' });
    const choices = await form.locator('[name=kind] option').evaluateAll((options) => options.map((o) => [(o as HTMLOptionElement).value, o.textContent]));
    expect(choices).toEqual(KINDS.map((k) => [k.name, k.label]));
    for (const [id, registry] of [['east', east], ['west', west]] as const) {
      await form.locator('[name=id]').fill(id);
      await form.locator('[name=kind]').selectOption('nacos');
      await form.locator('[name=endpoints]').fill(registry.endpoint);
      await form.locator('[name=labels]').fill(`region=${id}`);
      await form.getByRole('button', { name: 'Add cluster' }).click();
      await form.locator('[role=status]', { hasText: `cluster ${id} added` }).waitFor();
      await page.locator(`tr[data-cluster="${id}"]`).waitFor();
    }
    expect(await page.locator('tr[data-cluster="west"]').textContent()).toContain('region=west');

    await form.locator('[name=id]').fill('east');
    await form.locator('[name=endpoints]').fill(east.endpoint);
    await form.getByRole('button', { name: 'Add cluster' }).click();
    const shown = form.locator('[role=alert]');
    await shown.waitFor();
    const answer = await api('POST', '/api/v1/clusters', { id: 'east', kind: 'nacos', endpoints: [east.endpoint] });
    expect(answer.status).toBe(409);
    expect(await shown.textContent()).toBe(answer.body.error?.message);
    expect(await shown.getAttribute('data-code')).toBe('cluster_exists');
  });

  it('adds a task with the form and shows it converge live as instances register', async () => {
    await nav('Tasks');
    const form = page.locator('#add-task');
    await form.locator('[name=id]').fill(TASK);
    await form.locator('[name=source]').selectOption('east');
    await form.locator('[name=destination]').selectOption('west');
    await form.locator('[name=service]').fill('orders');
    await form.getByRole('button', { name: 'Add task' }).click();
    await form.locator('[role=status]', { hasText: `task ${TASK} created` }).waitFor();
    await page.locator(`tr[data-task="${TASK}"]`).waitFor();

    await page.getByRole('link', { name: TASK, exact: true }).click();
    await page.locator('#task-state', { hasText: 'running' }).waitFor();

    natives.push(await registerNative(() => east, 'orders', '10.9.0.1', 8080));
    await page.locator(`${SERVICE_ROW} td.src`, { hasText: /^1$/ }).waitFor();
    await page.locator(`${SERVICE_ROW} td.dst`, { hasText: /^1$/ }).waitFor();
    natives.push(await registerNative(() => east, 'orders', '10.9.0.2', 8080));
    await page.locator(`${SERVICE_ROW} td.src`, { hasText: /^2$/ }).waitFor();
    await page.locator(`${SERVICE_ROW} td.dst`, { hasText: /^2$/ }).waitFor();
    expect(copiesIn(west, 'orders').map((i) => i.ip).sort()).toEqual(['10.9.0.1', '10.9.0.2']);

    // The events of the task, from the events route, and the stream that brought the changes.
    if ((await api('GET', `/api/v1/tasks/${TASK}/events`)).status === 200) {
      await page.locator('#events tr[data-kind="reconciled"]').first().waitFor();
      expect(await page.locator('#live').getAttribute('data-mode')).toBe('live');
    }
    expect(await page.evaluate(() => (window as unknown as { regsyncNotReloaded?: boolean }).regsyncNotReloaded)).toBe(true);
    await shot('03-task-detail');

    await nav('Tasks');
    const row = page.locator(`tr[data-task="${TASK}"]`);
    await row.locator('td.dst', { hasText: /^2$/ }).waitFor();
    expect(await row.locator('td.syncs').textContent()).toBe('1');
    await shot('02-tasks');
  });

  it("draws the task's copies and max lag over the last hour from its samples", async () => {
    type Sample = { copies: number; maxLagMs: number | null };
    // Two samples of both copies, as the history route has them.
    await waitUntil(async () => {
      const items = ((await api('GET', `/api/v1/tasks/${TASK}/history`)).body.items ?? []) as Sample[];
      return items.filter((s) => s.copies === 2 && s.maxLagMs !== null).length >= 2;
    });
    await nav('Tasks');
    await page.getByRole('link', { name: TASK, exact: true }).click();
    const copies = page.locator('#history svg.history-chart[data-series="copies"]');
    const lag = page.locator('#history svg.history-chart[data-series="lag"]');
    await copies.waitFor();
    await lag.waitFor();
    const pointsOf = async (chart: typeof copies) => ((await chart.locator('polyline.series').getAttribute('points')) ?? '').split(' ').filter((p) => p !== '');
    expect((await pointsOf(copies)).length).toBeGreaterThanOrEqual(2);
    expect((await pointsOf(lag)).length).toBeGreaterThanOrEqual(2);
    // Axis labels: the scale's top (two copies) and zero, and the hour from left to right.
    const labels = await copies.locator('text.axis-label').allTextContents();
    expect(labels).toEqual(expect.arrayContaining(['2', '0', '60 min ago', 'now', 'Copies']));
    expect(await lag.locator('text.axis-label').allTextContents()).toEqual(expect.arrayContaining(['60 min ago', 'now', 'Max lag']));
    // As wide as the page's content, never wider.
    const width = await page.evaluate(() => ({ chart: document.querySelector('#history')?.getBoundingClientRect().width ?? 0, page: document.documentElement.clientWidth }));
    expect(width.chart).toBeGreaterThan(0);
    expect(width.chart).toBeLessThanOrEqual(width.page);
    await shot('09-task-history');
  });

  it('falls back to polling when the event stream is unavailable, and says when there are no events', async () => {
    const tab = await context.newPage();
    tab.setDefaultTimeout(20_000);
    tab.on('pageerror', (err) => pageErrors.push(err.message));
    // A server without the events routes, as the page sees it.
    const noRoute = { status: 404, contentType: 'application/json', body: JSON.stringify({ error: { code: 'not_found', message: 'no route' } }) };
    await tab.route(/\/api\/v1\/(events|tasks\/[^/]+\/events)(\?.*)?$/, (route) => route.fulfill(noRoute));
    // The token as a signed-in tab keeps it (sessionStorage is per tab).
    await tab.addInitScript((token) => sessionStorage.setItem('regsync.apiToken', token), ADMIN_TOKEN);
    try {
      await tab.goto(`${url}/#/tasks/${TASK}`);
      await tab.locator('#live[data-mode="polling"]').waitFor();
      await tab.getByText('This server keeps no events.').waitFor();
      await tab.locator(`${SERVICE_ROW} td.dst`, { hasText: /^2$/ }).waitFor();
      natives.push(await registerNative(() => east, 'orders', '10.9.0.3', 8080));
      await tab.locator(`${SERVICE_ROW} td.src`, { hasText: /^3$/ }).waitFor();
      await tab.locator(`${SERVICE_ROW} td.dst`, { hasText: /^3$/ }).waitFor();
    } finally {
      await tab.close();
    }
  });

  it('pages, searches and filters a task of 10,000 service syncs, and shows the API\'s refusal of a release', async () => {
    const store = fx.node?.store;
    if (store === undefined) throw new Error('regsync is not running');
    // A paused task (the engine leaves it alone) with statuses as 10,000 services would leave them.
    expect(
      await store.createTask({ id: 'everything', source: 'east', destination: 'west', service: '*', group: 'DEFAULT_GROUP', namespace: 'public', options: {}, state: 'paused', createdAt: new Date().toISOString() }),
    ).toBe('created');
    await Promise.all(
      Array.from({ length: 10_000 }, (_, i) =>
        store.putServiceStatus('everything', {
          service: { namespace: 'public', group: 'DEFAULT_GROUP', name: `svc-${String(i).padStart(5, '0')}` },
          sourceInstances: 3,
          destinationInstances: i % 500 === 7 ? 0 : 3,
          lastSyncAt: new Date().toISOString(),
          lagMs: i % 97,
          lastError: i % 500 === 7 ? 'holding a mass deletion: 3 of 3 copies (100%) would be removed' : null,
          held: i % 500 === 7 ? { removes: 3, copies: 3, since: new Date().toISOString(), confirm: 'operator' } : null,
        }),
      ),
    );

    await page.goto(`${url}/#/tasks/everything`);
    const range = page.locator('.pager .range');
    await range.filter({ hasText: '1–100 of 10,000' }).waitFor();
    expect(await page.locator('#services tbody tr').count()).toBe(100);
    await page.getByRole('button', { name: 'Next →' }).click();
    await range.filter({ hasText: '101–200 of 10,000' }).waitFor();
    await page.locator('tr[data-service="public/DEFAULT_GROUP/svc-00100"]').waitFor();

    await page.getByRole('searchbox', { name: 'Search services' }).fill('SVC-0999');
    await range.filter({ hasText: '1–10 of 10 matching' }).waitFor();
    await page.getByRole('searchbox', { name: 'Search services' }).fill('');
    await page.getByRole('combobox', { name: 'Show' }).selectOption('held');
    await range.filter({ hasText: '1–20 of 20 matching' }).waitFor();
    await shot('08-many-services-held');

    // Releasing a held deletion of a paused task: the API refuses, and the page says what it said.
    await page.locator('tr[data-service="public/DEFAULT_GROUP/svc-00007"]').getByRole('button', { name: 'Release' }).click();
    const refusal = page.locator('[role=alert][data-code="task_paused"]');
    await refusal.waitFor();
    expect(await refusal.textContent()).toBe('task everything is paused; resume it to sync');
    // It never wrote a copy: forget it without the engine's sweep of 10,000 services.
    await store.deleteTask('everything');
  });

  it('shows the clusters as reachable, and the shards, workers and CMDB, each fitting 1280 px', async () => {
    const fits = () => page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth);
    await page.setViewportSize({ width: 1280, height: 800 });
    await nav('Clusters');
    await page.locator('tr[data-cluster="east"] .reachability', { hasText: 'reachable' }).waitFor();
    await page.locator('tr[data-cluster="west"] .reachability', { hasText: 'reachable' }).waitFor();
    expect(await page.locator('tr[data-cluster="east"]').textContent()).toContain(TASK);
    expect(await fits()).toBe(true);
    await shot('04-clusters');

    await nav('Shards and workers');
    await page.locator('#shards tbody tr').first().waitFor();
    const shards = (await api('GET', '/api/v1/shards')).body as { items: unknown[] };
    expect(await page.locator('#shards tbody tr').count()).toBe(shards.items.length);
    await page.locator('#workers tbody tr[data-worker]').first().waitFor();
    expect(await fits()).toBe(true);
    await shot('05-shards-and-workers');

    await nav('CMDB');
    await page.locator('#cmdb', { hasText: 'No worker reads a CMDB' }).waitFor();
    expect(await fits()).toBe(true);
    await page.setViewportSize({ width: 1440, height: 900 });
  });

  it('pauses the task from its page', async () => {
    await page.goto(`${url}/#/tasks/${TASK}`);
    await page.locator('#task-state', { hasText: 'running' }).waitFor();
    await page.locator('.actions').getByRole('button', { name: 'Pause' }).click();
    await page.locator('#task-state', { hasText: 'paused' }).waitFor();
    await page.locator('.actions').getByRole('button', { name: 'Resume' }).waitFor();
    expect((await api('GET', `/api/v1/tasks/${TASK}`)).body.state).toBe('paused');
    await shot('06-task-paused');
  });

  it('disables every action for a read-only token', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.locator('#login').waitFor({ state: 'visible' });
    await page.locator('#token').fill(READ_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#who', { hasText: 'viewer (read-only)' }).waitFor();
    await page.locator('#read-only').waitFor({ state: 'visible' });

    await nav('Tasks');
    const row = page.locator(`tr[data-task="${TASK}"]`);
    await row.waitFor();
    for (const name of ['Resume', 'Resync', 'Delete']) expect(await row.getByRole('button', { name }).isDisabled()).toBe(true);
    // The form's fieldset is disabled, and with it every control in it.
    expect(await page.locator('#add-task').getByRole('button', { name: 'Add task' }).isDisabled()).toBe(true);
    expect(await page.locator('#add-task [name=service]').isDisabled()).toBe(true);
    await shot('07-read-only');
    expect(pageErrors).toEqual([]);
  });
});
