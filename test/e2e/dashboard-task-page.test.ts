import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { apiWithToken } from '../support/http.js';
import { buildDashboard, chromiumMissing, openChromium, type OpenBrowser } from '../support/browser.js';
import { addRegistry, copiesIn, persistent, startFixture, startSync, stopFixture, testLogger, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * A task's page in a real headless Chromium at 1280 x 800 against a real regsync (real Redis,
 * embedded Nacos registries east and west): a task's service is edited from its page and the sync
 * follows it; an edit that would sync what another task syncs, or into a cluster deleted meanwhile,
 * shows the API's refusal; the Tasks page keeps its search and state filter in the address across a
 * reload; a real held mass deletion (every source instance of a guarded service deregistered) lists
 * the addresses its Release button removes, and Release removes them from the destination.
 * The screenshot goes to dist/screenshots/task-page-1280x800.png (its path is printed).
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCREENSHOTS = join(ROOT, 'dist', 'screenshots');
const TOKEN = 'task-page-admin-0123456789abcdef';
const HELD_IPS = ['10.73.0.1', '10.73.0.2', '10.73.0.3', '10.73.0.4', '10.73.0.5'];

const browserMissing = chromiumMissing('dashboard task page test');

describe.skipIf(browserMissing)("a task's page in the dashboard", () => {
  let fx: SyncFixture;
  let east: RunningRegistry;
  let west: RunningRegistry;
  let url: string;
  let browser: OpenBrowser | undefined;
  let page: Page;
  const pageErrors: string[] = [];

  /** The REST API as the admin, for checks the page does not make. */
  const api = apiWithToken(() => url, TOKEN);
  const copyIps = (service: string) => copiesIn(west, service).map((i) => i.ip).sort();
  const shownIds = () => page.locator('#tasks tbody tr[data-task]').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.task));
  const editForm = () => page.locator('#edit-task');

  beforeAll(async () => {
    buildDashboard();
    mkdirSync(SCREENSHOTS, { recursive: true });

    fx = await startFixture();
    east = await addRegistry(fx, 'east');
    west = await addRegistry(fx, 'west');
    url = (await startSync(fx, testLogger(), { apiTokens: [{ name: 'ops', scope: 'admin', token: TOKEN }] })).url as string;
    for (const [id, registry] of [
      ['east', east],
      ['west', west],
    ] as const) {
      // A held mass deletion on its own: no source warm-up holds the drop first (see source-warmup.test.ts).
      expect((await api('POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [registry.endpoint], options: { warmupSeconds: 0 } })).status).toBe(201);
    }
    east.store.register('public', 'DEFAULT_GROUP', 'orders', persistent('10.71.0.1'));
    east.store.register('public', 'DEFAULT_GROUP', 'invoices', persistent('10.72.0.1'));
    east.store.register('public', 'DEFAULT_GROUP', 'invoices', persistent('10.72.0.2'));
    east.store.register('public', 'DEFAULT_GROUP', 'payments', persistent('10.74.0.1'));
    for (const ip of HELD_IPS) east.store.register('public', 'DEFAULT_GROUP', 'catalog', persistent(ip));
    const tasks: Array<[id: string, source: string, destination: string, service: string, options?: Record<string, unknown>]> = [
      ['orders-east-west', 'east', 'west', 'orders'],
      ['payments-east-west', 'east', 'west', 'payments'],
      ['catalog-east-west', 'east', 'west', 'catalog', { massDeletionConfirm: 'operator' }],
      ['users-west-east', 'west', 'east', 'users'],
    ];
    for (const [id, source, destination, service, options] of tasks) {
      expect((await api('POST', '/api/v1/tasks', { id, source, destination, service, ...(options ? { options } : {}) })).status).toBe(201);
    }
    await waitUntil(() => copyIps('orders').length === 1 && copyIps('payments').length === 1 && copyIps('catalog').length === HELD_IPS.length, {
      message: 'the first copies in west',
      timeoutMs: 30_000,
    });

    browser = await openChromium({ width: 1280, height: 800 }, pageErrors, { acceptDialogs: true });
    ({ page } = browser);
    await page.goto(`${url}/#/tasks`);
    await page.locator('#token').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#tasks tbody tr[data-task]').first().waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    if (fx) await stopFixture(fx);
  });

  it("edits a task's service from its page, filled from the stored task, and the sync follows", async () => {
    await page.goto(`${url}/#/tasks/orders-east-west`);
    await page.locator('#task-state').waitFor();
    await page.locator('#edit-task-toggle').click();
    const form = editForm();
    await form.waitFor();
    // Filled from GET /api/v1/tasks/:id; the id cannot change; the clusters are the stored ones.
    expect(await form.locator('[name=id]').inputValue()).toBe('orders-east-west');
    expect(await form.locator('[name=id]').getAttribute('readonly')).not.toBeNull();
    expect(await form.locator('[name=source]').inputValue()).toBe('east');
    expect(await form.locator('[name=destination]').inputValue()).toBe('west');
    expect(await form.locator('[name=service]').inputValue()).toBe('orders');
    expect(await form.locator('[name=group]').inputValue()).toBe('DEFAULT_GROUP');
    expect(await form.locator('[name=namespace]').inputValue()).toBe('public');
    expect(await form.locator('[name=source] option').allTextContents()).toEqual(['choose a cluster', 'east', 'west']);

    await form.locator('[name=service]').fill('invoices');
    await form.getByRole('button', { name: 'Save task' }).click();
    await form.locator('[role=status]', { hasText: 'task orders-east-west saved' }).waitFor();
    await waitUntil(() => copyIps('invoices').join() === '10.72.0.1,10.72.0.2', { message: 'the edited service copied to west', timeoutMs: 30_000 });
    // What the task copied before is removed, and the stored task is the edited one.
    expect(copyIps('orders')).toEqual([]);
    const stored = (await api('GET', '/api/v1/tasks/orders-east-west')).body;
    expect(stored).toMatchObject({ id: 'orders-east-west', source: 'east', destination: 'west', service: 'invoices', state: 'running' });
    await page.locator('.facts', { hasText: 'public/DEFAULT_GROUP/invoices from east to west' }).waitFor();
    // The form still shows what is stored.
    expect(await form.locator('[name=service]').inputValue()).toBe('invoices');
  });

  it("shows the API's refusal of an edit (a service another task syncs, the same or a deleted cluster) and changes nothing", async () => {
    const form = editForm();
    await form.locator('[name=service]').fill('payments');
    await form.getByRole('button', { name: 'Save task' }).click();
    const alert = form.locator('[role=alert]');
    await alert.waitFor();
    expect(await alert.textContent()).toBe('task payments-east-west already syncs public/DEFAULT_GROUP/payments from east to west');
    expect(await alert.getAttribute('data-code')).toBe('task_exists');
    expect((await api('GET', '/api/v1/tasks/orders-east-west')).body.service).toBe('invoices');
    expect(copyIps('invoices')).toEqual(['10.72.0.1', '10.72.0.2']);
    // Any refusal shows as the API words it: here, the source as destination.
    await form.locator('[name=service]').fill('invoices');
    await form.locator('[name=destination]').selectOption('east');
    await form.getByRole('button', { name: 'Save task' }).click();
    await form.locator('[role=alert]', { hasText: 'source and destination are both east' }).waitFor();
    expect((await api('GET', '/api/v1/tasks/orders-east-west')).body.destination).toBe('west');

    // Another operator deletes a cluster while this page still offers it (its reads of the cluster
    // list are answered with the list it had): the API names the missing cluster.
    expect((await api('POST', '/api/v1/clusters', { id: 'north', kind: 'nacos', endpoints: ['127.0.0.1:1'] })).status).toBe(201);
    await page.locator('#edit-task-toggle').click();
    await page.locator('#edit-task-toggle').click();
    await editForm().locator('[name=destination] option[value=north]').waitFor({ state: 'attached' });
    const stale = JSON.stringify((await api('GET', '/api/v1/clusters')).body);
    await page.route(/\/api\/v1\/clusters$/, (route) => route.fulfill({ status: 200, contentType: 'application/json', body: stale }));
    try {
      expect((await api('DELETE', '/api/v1/clusters/north')).status).toBe(204);
      await editForm().locator('[name=destination]').selectOption('north');
      await editForm().getByRole('button', { name: 'Save task' }).click();
      await editForm().locator('[role=alert][data-code=unknown_cluster]', { hasText: 'no cluster for destination north' }).waitFor();
    } finally {
      await page.unroute(/\/api\/v1\/clusters$/);
    }
    expect((await api('GET', '/api/v1/tasks/orders-east-west')).body).toMatchObject({ service: 'invoices', destination: 'west' });
  });

  it('keeps the task filter in the address: a reload shows the same filter and the same rows', async () => {
    await page.goto(`${url}/#/tasks`);
    await page.locator('#tasks tbody tr[data-task]').first().waitFor();
    await page.locator('#tasks-search').fill('EAST-west');
    await page.locator('#tasks-state').selectOption('running');
    await expect.poll(() => page.evaluate(() => location.hash)).toBe('#/tasks?q=EAST-west&state=running');
    const rows = ['catalog-east-west', 'orders-east-west', 'payments-east-west'];
    await expect.poll(shownIds).toEqual(rows);
    await page.reload();
    await page.locator('#tasks tbody tr[data-task]').first().waitFor();
    expect(await page.locator('#tasks-search').inputValue()).toBe('EAST-west');
    expect(await page.locator('#tasks-state').inputValue()).toBe('running');
    await expect.poll(shownIds).toEqual(rows);

    // A link opens the list filtered as it says.
    await page.goto(`${url}/#/tasks?q=users&state=paused`);
    await page.locator('#tasks tr.empty', { hasText: 'No task matches' }).waitFor();
    expect(await page.locator('#tasks-state').inputValue()).toBe('paused');
    await page.locator('#tasks-state').selectOption('');
    await expect.poll(shownIds).toEqual(['users-west-east']);
    await expect.poll(() => page.evaluate(() => location.hash)).toBe('#/tasks?q=users');
  });

  it('lists the addresses a held mass deletion removes, and Release removes them from the destination', async () => {
    for (const ip of HELD_IPS) east.store.deregister('public', 'DEFAULT_GROUP', 'catalog', ip, 8080, 'DEFAULT');
    await waitUntil(async () => (await api('GET', '/api/v1/tasks/catalog-east-west/summary')).body.held === 1, {
      message: 'the deletion of every catalog copy held',
      timeoutMs: 30_000,
    });
    // Held: the copies stay in the destination.
    expect(copyIps('catalog')).toEqual(HELD_IPS);

    await page.goto(`${url}/#/tasks/catalog-east-west`);
    const row = page.locator('#services tr[data-service="public/DEFAULT_GROUP/catalog"]');
    const addresses = row.locator('.held-addresses');
    await addresses.waitFor();
    const text = (await addresses.textContent()) ?? '';
    expect(text).toMatch(/^Release removes /);
    const listed = text.replace(/^Release removes /, '').trim().split(/,\s*/).map((a) => a.replace(/:8080(#.*)?$/, '')).sort();
    expect(listed).toEqual(HELD_IPS);
    expect(await row.locator('td.held').textContent()).toContain('5 of 5 copies');

    await row.scrollIntoViewIfNeeded();
    const path = join(SCREENSHOTS, 'task-page-1280x800.png');
    await page.screenshot({ path });
    console.log(`task page screenshot: ${path}`);
    const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    expect(widths.scroll).toBeLessThanOrEqual(widths.client);
    const box = await row.getByRole('button', { name: 'Release' }).boundingBox();
    const inViewport = box !== null && box.x >= 0 && box.y >= 0 && box.x + box.width <= 1280 && box.y + box.height <= 800;
    expect({ box, inViewport }).toMatchObject({ inViewport: true });

    await row.getByRole('button', { name: 'Release' }).click();
    await page.locator('[role=status]', { hasText: 'released public/DEFAULT_GROUP/catalog' }).waitFor();
    await waitUntil(() => copyIps('catalog').length === 0, { message: 'the held copies removed after Release', timeoutMs: 30_000 });
    await row.locator('td.held', { hasText: /^-$/ }).waitFor();
    expect(pageErrors).toEqual([]);
  });
});
