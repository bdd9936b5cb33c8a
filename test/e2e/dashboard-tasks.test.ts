import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { apiWithToken } from '../support/http.js';
import { freePort } from '../support/ports.js';
import { addRegistry, persistent, startFixture, startSync, stopFixture, testLogger, type SyncFixture } from '../support/sync-fixture.js';
import { buildDashboard, chromiumMissing, openChromium, type OpenBrowser } from '../support/browser.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * The dashboard's task list in a real headless Chromium at 1280 x 800 (launched as dashboard.test.ts
 * does) against a real regsync with an admin and a read token: six tasks, two with long ids and one
 * failing into a cluster at a closed port (its last error is long). Every column fits without
 * horizontal scrolling; search and the state filter narrow the rows; ticked rows are paused and
 * deleted at once through the batch route; a read token disables the bulk actions.
 * The screenshot goes to dist/screenshots/tasks-1280x800.png (its path is printed).
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCREENSHOTS = join(ROOT, 'dist', 'screenshots');
const ADMIN_TOKEN = 'tasks-admin-0123456789abcdef';
const READ_TOKEN = 'tasks-read-0123456789abcdef';
const LONG_ID = 'payments-from-the-eastern-datacenter-to-the-western-primary';
const FAILING = 'shipping-from-east-into-the-decommissioned-datacenter-gone';
const TASKS: Array<[id: string, source: string, destination: string, service: string]> = [
  ['billing-west-east', 'west', 'east', 'billing'],
  ['inventory-east-west', 'east', 'west', 'inventory'],
  ['orders-east-west', 'east', 'west', 'orders'],
  [LONG_ID, 'east', 'west', 'payments-settlement-and-reconciliation-service'],
  [FAILING, 'east', 'gone', 'shipping'],
  ['users-west-east', 'west', 'east', 'users'],
];

const browserMissing = chromiumMissing('dashboard tasks test');

describe.skipIf(browserMissing)('the task list of the dashboard', () => {
  let fx: SyncFixture;
  let east: RunningRegistry;
  let url: string;
  let browser: OpenBrowser | undefined;
  let context: BrowserContext;
  let page: Page;
  const pageErrors: string[] = [];

  /** The REST API as the admin, for checks the page does not make. */
  const api = apiWithToken(() => url, ADMIN_TOKEN);
  const stateOf = async (id: string): Promise<string> => (await api('GET', `/api/v1/tasks/${id}`)).body.state as string;
  const row = (id: string) => page.locator(`#tasks tr[data-task="${id}"]`);
  const shownIds = () => page.locator('#tasks tbody tr[data-task]').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.task));
  const signIn = async (tab: Page, token: string) => {
    await tab.goto(`${url}/#/tasks`);
    await tab.locator('#token').fill(token);
    await tab.getByRole('button', { name: 'Sign in' }).click();
    await tab.locator('#tasks tbody tr[data-task]').first().waitFor();
  };

  beforeAll(async () => {
    buildDashboard();
    mkdirSync(SCREENSHOTS, { recursive: true });

    fx = await startFixture();
    east = await addRegistry(fx, 'east');
    const west = await addRegistry(fx, 'west');
    url = (
      await startSync(fx, testLogger(), {
        apiTokens: [
          { name: 'ops', scope: 'admin', token: ADMIN_TOKEN },
          { name: 'viewer', scope: 'read', token: READ_TOKEN },
        ],
      })
    ).url as string;
    const closed = await freePort();
    const clusters = [
      ['east', east.endpoint],
      ['west', west.endpoint],
      ['gone', `127.0.0.1:${closed}`],
    ];
    for (const [id, endpoint] of clusters) {
      const res = await api('POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options: { requestTimeoutMs: 1_000 } });
      expect(res.status).toBe(201);
    }
    east.store.register('public', 'DEFAULT_GROUP', 'shipping', persistent('10.71.0.1'));
    for (const [id, source, destination, service] of TASKS) expect((await api('POST', '/api/v1/tasks', { id, source, destination, service })).status).toBe(201);
    await waitUntil(async () => ((await api('GET', `/api/v1/tasks/${FAILING}/summary`)).body.lastError ?? null) !== null, {
      message: 'the task into the closed port to fail',
      timeoutMs: 30_000,
    });

    browser = await openChromium({ width: 1280, height: 800 }, pageErrors, { acceptDialogs: true });
    ({ context, page } = browser);
  });

  afterAll(async () => {
    await browser?.close();
    if (fx) await stopFixture(fx);
  });

  it('fits every column at 1280 x 800 without horizontal scrolling, long ids cut with the full id on the tooltip', async () => {
    await signIn(page, ADMIN_TOKEN);
    await row(FAILING).locator('td.last-error', { hasText: /\S{4}/ }).waitFor();
    console.log(`last error of ${FAILING}: ${await row(FAILING).locator('td.last-error').textContent()}`);
    // The topology fills the first screen: the table's section is scrolled to the top.
    await page.locator('#tasks').evaluate((el) => el.closest('section')?.scrollIntoView({ block: 'start' }));
    const path = join(SCREENSHOTS, 'tasks-1280x800.png');
    await page.screenshot({ path });
    console.log(`tasks screenshot: ${path}`);

    const widths = await page.evaluate(() => {
      const box = document.querySelector('#tasks')?.closest('.table-wrap') as HTMLElement;
      const doc = document.documentElement;
      return { page: { scroll: doc.scrollWidth, client: doc.clientWidth }, box: { scroll: box.scrollWidth, client: box.clientWidth } };
    });
    expect(widths.page.scroll).toBeLessThanOrEqual(widths.page.client);
    expect(widths.box.scroll).toBeLessThanOrEqual(widths.box.client);
    const del = await row('billing-west-east').getByRole('button', { name: 'Delete' }).boundingBox();
    const inViewport = del !== null && del.x >= 0 && del.y >= 0 && del.x + del.width <= 1280 && del.y + del.height <= 800;
    expect({ del, inViewport }).toMatchObject({ inViewport: true });

    const link = row(LONG_ID).locator('td.id a');
    expect(((await link.textContent()) ?? '').length).toBeLessThan(LONG_ID.length);
    expect(await link.getAttribute('title')).toBe(LONG_ID);
    // The last error wraps at words: its cell is wider than a few characters.
    const errorBox = await row(FAILING).locator('td.last-error').boundingBox();
    expect(errorBox?.width ?? 0).toBeGreaterThan(150);
  });

  it('narrows the rows by search (id, source, destination or service, any case) and by state', async () => {
    const all = TASKS.map(([id]) => id).sort();
    expect(await shownIds()).toEqual(all);
    await page.locator('#tasks-search').fill('EAST-WEST');
    await expect.poll(shownIds).toEqual(['inventory-east-west', 'orders-east-west']);
    await page.locator('#tasks-search').fill('settlement');
    await expect.poll(shownIds).toEqual([LONG_ID]);
    await page.locator('#tasks-search').fill('gone');
    await expect.poll(shownIds).toEqual([FAILING]);
    await page.locator('#tasks-search').fill('no such task');
    await page.locator('#tasks tr.empty', { hasText: 'No task matches' }).waitFor();
    await page.locator('#tasks-search').fill('');
    await page.locator('#tasks-state').selectOption('failing');
    await expect.poll(shownIds).toEqual([FAILING]);
    await page.locator('#tasks-state').selectOption('');
    await expect.poll(shownIds).toEqual(all);
  });

  it('pauses exactly the two ticked tasks in one batch, and deletes ticked ones after a confirm', async () => {
    await row('orders-east-west').locator('input.select').check();
    await row(LONG_ID).locator('input.select').check();
    await page.locator('#tasks-selected', { hasText: '2 selected' }).waitFor();
    await page.locator('[data-bulk="pause"]').click();
    await page.locator('[role=status]', { hasText: '2 tasks paused' }).waitFor();
    // Exactly those two: the others run (the failing one is running or in error, never paused).
    for (const [id] of TASKS) {
      const state = await stateOf(id);
      if (id === 'orders-east-west' || id === LONG_ID) expect([id, state]).toEqual([id, 'paused']);
      else expect([id, state]).toEqual([id, id === FAILING ? expect.stringMatching(/^(running|error)$/) : 'running']);
    }
    await row(LONG_ID).locator('.badge', { hasText: 'paused' }).waitFor();

    // The select-all box ticks the shown rows only; the paused filter shows the two.
    await page.locator('#tasks-state').selectOption('paused');
    await expect.poll(shownIds).toEqual([LONG_ID, 'orders-east-west'].sort());
    await page.locator('#tasks-select-all').uncheck();
    await page.locator('#tasks-selected', { hasText: 'none selected' }).waitFor();
    expect(await page.locator('[data-bulk="resume"]').isDisabled()).toBe(true);
    await page.locator('#tasks-select-all').check();
    await page.locator('[data-bulk="resume"]').click();
    await page.locator('[role=status]', { hasText: '2 tasks resumed' }).waitFor();
    expect(await stateOf('orders-east-west')).toBe('running');
    expect(await stateOf(LONG_ID)).toBe('running');
    await page.locator('#tasks-state').selectOption('');

    await page.locator('#tasks-search').fill('west-east');
    await page.locator('#tasks-select-all').check();
    await page.locator('#tasks-selected', { hasText: '2 selected' }).waitFor();
    await page.locator('[data-bulk="delete"]').click();
    await page.locator('[role=status]', { hasText: '2 tasks deleted' }).waitFor();
    expect((await api('GET', '/api/v1/tasks/billing-west-east')).status).toBe(404);
    expect((await api('GET', '/api/v1/tasks/users-west-east')).status).toBe(404);
    expect(await stateOf('orders-east-west')).toBe('running');
    await page.locator('#tasks tr.empty').waitFor();
    await page.locator('#tasks-search').fill('');
    expect(pageErrors).toEqual([]);
  });

  it('shows the batch route\'s refusal and changes nothing when one ticked task is gone', async () => {
    // Another operator deletes a task while this page still lists it: the page keeps the list it
    // read (its reads of the list are answered with that list), the batch goes to the server.
    const stale = JSON.stringify((await api('GET', '/api/v1/tasks:summary')).body);
    await page.route(/\/api\/v1\/tasks:summary$/, (route) => route.fulfill({ status: 200, contentType: 'application/json', body: stale }));
    try {
      // Ticks stay after a batch that succeeded: start from none.
      await page.locator('#tasks-select-all').check();
      await page.locator('#tasks-select-all').uncheck();
      await row('inventory-east-west').locator('input.select').check();
      await row('orders-east-west').locator('input.select').check();
      expect((await api('DELETE', '/api/v1/tasks/inventory-east-west')).status).toBe(204);
      await page.locator('#tasks-selected', { hasText: '2 selected' }).waitFor();
      await page.locator('[data-bulk="pause"]').click();
      const alert = page.locator('#tasks').locator('xpath=ancestor::section').locator('[role=alert]');
      await alert.waitFor();
      expect(await alert.textContent()).toContain('inventory-east-west');
      expect(await stateOf('orders-east-west')).toBe('running');
    } finally {
      await page.unroute(/\/api\/v1\/tasks:summary$/);
    }
  });

  it('disables the bulk actions with a read token', async () => {
    const tab = await context.newPage();
    try {
      await signIn(tab, READ_TOKEN);
      await tab.locator('#tasks tr[data-task="orders-east-west"] input.select').check();
      await tab.locator('#tasks-selected', { hasText: '1 selected' }).waitFor();
      for (const action of ['pause', 'resume', 'delete']) expect(await tab.locator(`[data-bulk="${action}"]`).isDisabled()).toBe(true);
    } finally {
      await tab.close();
    }
  });
});
