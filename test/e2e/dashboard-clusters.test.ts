import { mkdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { apiWithToken } from '../support/http.js';
import { buildDashboard, chromiumMissing, openChromium, type OpenBrowser } from '../support/browser.js';
import { startK8sApiServer, type K8sApiServer } from '../support/k8s-api-server.js';
import { addRegistry, persistent, startFixture, startSync, stopFixture, testLogger, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * The dashboard's Clusters page in a real headless Chromium at 1280 x 800 against a real regsync
 * (admin token) and the test Kubernetes API server: a Kubernetes cluster added from the form with
 * its kubeconfig and namespaceMap options syncs a Nacos service into Services and EndpointSlices;
 * a bad option value is refused with the API's message naming it; a cluster edited through its Edit
 * action changes and keeps its password. The screenshot, with a long endpoints list and long labels
 * on screen, goes to dist/screenshots/clusters-1280x800.png (its path is printed).
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCREENSHOTS = join(ROOT, 'dist', 'screenshots');
const ADMIN_TOKEN = 'clusters-admin-0123456789abcdef';
const ZK_PASSWORD = 'zk-digest-secret-42';
/** A ZooKeeper ensemble never contacted (no task uses it): long endpoints and labels for the layout. */
const LONG = {
  id: 'zookeeper-ensemble-of-the-eastern-datacenter',
  kind: 'zookeeper',
  endpoints: Array.from({ length: 9 }, (_, i) => `zookeeper-${i + 1}.east.datacenter.example.internal:2181`),
  username: 'regsync',
  password: ZK_PASSWORD,
  labels: { region: 'east-china-primary-region', site: 'shanghai-pudong-datacenter-building-7', zone: 'availability-zone-b-north' },
  options: { layout: 'curator' },
};

const browserMissing = chromiumMissing('dashboard clusters test');

describe.skipIf(browserMissing)('the clusters page of the dashboard', () => {
  let fx: SyncFixture;
  let nacos: RunningRegistry;
  let k8s: K8sApiServer;
  let dir: string;
  let kubeconfig: string;
  let url: string;
  let browser: OpenBrowser | undefined;
  let page: Page;
  const pageErrors: string[] = [];

  /** The REST API as the admin, for checks the page does not make. */
  const api = apiWithToken(() => url, ADMIN_TOKEN);
  const form = () => page.locator('#add-cluster');
  const option = (name: string) => form().locator(`[data-option="${name}"]`);
  const formNotice = () => form().locator('[role=status]');
  const formError = () => form().locator('[role=alert]');
  const row = (id: string) => page.locator(`#clusters tr[data-cluster="${id}"]`);
  const sliceAddresses = (name: string): string[] =>
    k8s
      .list('endpointslices', 'default')
      .filter((s) => s.metadata.labels?.['kubernetes.io/service-name'] === name)
      .flatMap((s) => (s.endpoints as Array<{ addresses: string[] }>).flatMap((e) => e.addresses));

  beforeAll(async () => {
    buildDashboard();
    mkdirSync(SCREENSHOTS, { recursive: true });

    dir = await mkdtemp(join(tmpdir(), 'regsync-dashboard-clusters-'));
    k8s = await startK8sApiServer();
    kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, k8s.kubeconfigYaml());
    fx = await startFixture();
    nacos = await addRegistry(fx, 'nacos');
    url = (await startSync(fx, testLogger(), { apiTokens: [{ name: 'ops', scope: 'admin', token: ADMIN_TOKEN }] })).url as string;
    expect((await api('POST', '/api/v1/clusters', { id: 'nacos', kind: 'nacos', endpoints: [nacos.endpoint], labels: { region: 'east' } })).status).toBe(201);
    expect((await api('POST', '/api/v1/clusters', LONG)).status).toBe(201);

    browser = await openChromium({ width: 1280, height: 800 }, pageErrors);
    page = browser.page;
    await page.goto(`${url}/#/clusters`);
    await page.locator('#token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await row('nacos').waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    if (fx) await stopFixture(fx);
    await k8s?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('adds a Kubernetes cluster with its options from the form, which then syncs a Nacos service', async () => {
    await form().locator('select[name=kind]').selectOption('kubernetes');
    // Kubernetes reads neither endpoints nor credentials: its server and sign-in come from the kubeconfig.
    await expect.poll(() => form().locator('input[name=endpoints]').isVisible()).toBe(false);
    expect(await form().locator('[data-note=endpoints]').textContent()).toContain('from kubeconfig');
    expect(await form().locator('input[name=password]').isVisible()).toBe(false);
    expect(await form().locator('input[name=username]').isVisible()).toBe(false);
    // Each option's input fits its type, with its description as help.
    expect(await option('headless').evaluate((el) => el.tagName)).toBe('SELECT');
    expect(await option('maxEndpointsPerSlice').getAttribute('inputmode')).toBe('numeric');
    expect(await option('kubeconfig').locator('xpath=ancestor::label').textContent()).toContain('Path of a kubeconfig file');

    await form().locator('input[name=id]').fill('k8s');
    await form().locator('input[name=labels]').fill('region=west');
    await option('kubeconfig').fill(kubeconfig);
    await option('namespaceMap').fill('default=public');
    await option('backoffInitialMs').fill('50');
    await option('backoffMaxMs').fill('500');
    await option('syncByDefault').selectOption('true');
    await form().getByRole('button', { name: 'Add cluster' }).click();
    await formNotice().filter({ hasText: 'cluster k8s added' }).waitFor();
    await row('k8s').waitFor();
    expect(await row('k8s').locator('td').nth(2).textContent()).toBe('(from kubeconfig)');

    // Typed as the kind reads them, and nothing for the options left empty (their defaults).
    const stored = (await api('GET', '/api/v1/clusters/k8s')).body;
    expect(stored).toMatchObject({ kind: 'kubernetes', endpoints: [], labels: { region: 'west' }, hasPassword: false });
    expect(stored.options).toEqual({ kubeconfig, namespaceMap: { default: 'public' }, backoffInitialMs: 50, backoffMaxMs: 500, syncByDefault: true });

    nacos.store.register('public', 'DEFAULT_GROUP', 'payments', persistent('10.61.0.1'));
    expect((await api('POST', '/api/v1/tasks', { id: 'nacos-to-k8s', source: 'nacos', destination: 'k8s', service: 'payments' })).status).toBe(201);
    await waitUntil(() => sliceAddresses('payments').includes('10.61.0.1'), { message: 'the EndpointSlice of payments in Kubernetes', timeoutMs: 60_000 });
    expect(k8s.get('services', 'default', 'payments')?.metadata.labels).toEqual({ 'app.kubernetes.io/managed-by': 'regsync' });
  });

  it('shows the API\'s refusal of a bad option value, naming the option, and stores nothing', async () => {
    await form().locator('select[name=kind]').selectOption('kubernetes');
    await form().locator('input[name=id]').fill('k8s-too-wide');
    await option('kubeconfig').fill(kubeconfig);
    await option('maxEndpointsPerSlice').fill('5000');
    await form().getByRole('button', { name: 'Add cluster' }).click();
    const alert = formError().filter({ hasText: 'options.maxEndpointsPerSlice' });
    await alert.waitFor();
    expect(await alert.textContent()).toBe('body.options.maxEndpointsPerSlice: expected an integer from 1 to 1000, got 5000');
    expect(await alert.getAttribute('data-code')).toBe('invalid_request');
    // What was typed stays, to be corrected.
    expect(await option('maxEndpointsPerSlice').inputValue()).toBe('5000');
    expect((await api('GET', '/api/v1/clusters/k8s-too-wide')).status).toBe(404);
  });

  it('edits a cluster through its Edit action: the id read-only, the stored password kept', async () => {
    let putBody: Record<string, unknown> | undefined;
    page.on('request', (req) => {
      if (req.method() === 'PUT' && req.url().includes(`/api/v1/clusters/${LONG.id}`)) putBody = req.postDataJSON() as Record<string, unknown>;
    });
    await row(LONG.id).getByRole('button', { name: 'Edit' }).click();
    await form().locator('legend', { hasText: `Edit cluster ${LONG.id}` }).waitFor();
    const id = form().locator('input[name=id]');
    expect(await id.inputValue()).toBe(LONG.id);
    expect(await id.getAttribute('readonly')).not.toBeNull();
    expect(await form().locator('input[name=password]').inputValue()).toBe('');
    expect(await form().locator('input[name=username]').inputValue()).toBe('regsync');
    expect(await option('layout').inputValue()).toBe('curator');
    expect(await form().locator('input[name=endpoints]').inputValue()).toBe(LONG.endpoints.join(', '));

    await form().locator('input[name=labels]').fill('region=east-china-primary-region, tier=gold');
    await option('sessionTimeoutMs').fill('4000');
    await form().getByRole('button', { name: 'Save cluster' }).click();
    await formNotice().filter({ hasText: `cluster ${LONG.id} saved` }).waitFor();
    // Back to adding once saved.
    await form().locator('legend', { hasText: 'Add a cluster' }).waitFor();

    const stored = (await api('GET', `/api/v1/clusters/${LONG.id}`)).body;
    expect(stored).toMatchObject({ endpoints: LONG.endpoints, username: 'regsync', hasPassword: true, labels: { region: 'east-china-primary-region', tier: 'gold' } });
    expect(stored.options).toEqual({ layout: 'curator', sessionTimeoutMs: 4000 });
    expect(putBody).toBeDefined();
    expect(putBody).not.toHaveProperty('password');
    // The stored password is still the one it had: the same body with it changes nothing.
    const compare = await api('POST', `/api/v1/clusters/${LONG.id}/compare`, { ...stored, hasPassword: undefined, password: ZK_PASSWORD });
    expect(compare.body).toMatchObject({ exists: true, differs: false });
  });

  it('fits 1280 x 800 without horizontal scrolling, with long endpoints and labels on screen', async () => {
    await page.locator('#clusters').evaluate((el) => el.closest('section')?.scrollIntoView({ block: 'start' }));
    await expect.poll(() => row(LONG.id).locator('td', { hasText: 'zookeeper-1.east' }).isVisible()).toBe(true);
    expect(await row(LONG.id).locator('td', { hasText: 'tier=gold' }).isVisible()).toBe(true);
    const path = join(SCREENSHOTS, 'clusters-1280x800.png');
    await page.screenshot({ path });
    console.log(`clusters screenshot: ${path}`);
    const widths = await page.evaluate(() => {
      const box = document.querySelector('#clusters')?.closest('.table-wrap') as HTMLElement;
      const doc = document.documentElement;
      return { page: { scroll: doc.scrollWidth, client: doc.clientWidth }, box: { scroll: box.scrollWidth, client: box.clientWidth } };
    });
    expect(widths.page.scroll).toBeLessThanOrEqual(widths.page.client);
    expect(widths.box.scroll).toBeLessThanOrEqual(widths.box.client);
    const edit = await row(LONG.id).getByRole('button', { name: 'Edit' }).boundingBox();
    expect(edit !== null && edit.x + edit.width <= 1280, JSON.stringify(edit)).toBe(true);
    expect(pageErrors).toEqual([]);
  });

  it('removes the stored password only when its box is ticked', async () => {
    await row(LONG.id).getByRole('button', { name: 'Edit' }).click();
    await form().locator('legend', { hasText: `Edit cluster ${LONG.id}` }).waitFor();
    expect(await form().locator('input[name=password]').getAttribute('placeholder')).toBe('stored; blank keeps it');
    await form().locator('input[name=removePassword]').check();
    await form().getByRole('button', { name: 'Save cluster' }).click();
    await formNotice().filter({ hasText: `cluster ${LONG.id} saved` }).waitFor();
    expect((await api('GET', `/api/v1/clusters/${LONG.id}`)).body).toMatchObject({ hasPassword: false, username: 'regsync' });
    // Without a stored password there is nothing to remove.
    await row(LONG.id).getByRole('button', { name: 'Edit' }).click();
    await form().locator('legend', { hasText: `Edit cluster ${LONG.id}` }).waitFor();
    expect(await form().locator('input[name=removePassword]').isVisible()).toBe(false);
    await form().getByRole('button', { name: 'Cancel' }).click();
    await form().locator('legend', { hasText: 'Add a cluster' }).waitFor();
    expect(await form().locator('input[name=id]').getAttribute('readonly')).toBeNull();
    expect(await form().locator('input[name=id]').inputValue()).toBe('');
  });
});
