import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CmdbCache, FileCmdbProvider } from '../../src/cmdb/index.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { NACOS_SCENARIO_YAML, replaceFile } from '../support/cmdb-fixtures.js';
import { formOf } from '../support/http.js';
import {
  addRegistry,
  copiesIn,
  defineClusters,
  defineTask,
  registerNative,
  startFixture,
  startSync,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const SITE_SELECTOR = JSON.stringify({ type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.site' });

/** Region B's CMDB knows its own consumers only, not region A's providers. */
const CONSUMERS_ONLY_YAML = `
labels:
  site: [x11, x12, x13]
entities:
  ip:
    33.33.33.33: {site: x11}
    44.44.44.44: {site: x12}
    55.55.55.55: {site: x13}
`;

/** What a consumer at `clientIP` gets from a v1 instance list (the address is only a CMDB key). */
async function seenFrom(registry: RunningRegistry, clientIP: string): Promise<string[]> {
  const res = await fetch(`${registry.url}/nacos/v1/ns/instance/list?${formOf({ serviceName: 'echo', clientIP })}`);
  const body = (await res.json()) as { hosts: Array<{ ip: string }> };
  return body.hosts.map((h) => h.ip).sort();
}

/**
 * The classic Nacos CMDB scenario across two regions: providers 11.11.11.11 (site x11) and
 * 22.22.22.22 (x12) register in A; regsync copies them to B stamped with their site; B's service
 * selector `CONSUMER.label.site = PROVIDER.label.site` then routes consumers of B to providers of
 * their own site, although B's CMDB knows nothing about A's hosts.
 */
describe('same-site routing in every region', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let dir: string;
  let cmdbFile: string;
  const closers: Array<() => Promise<void>> = [];
  const natives: NativeInstance[] = [];

  async function cmdb(path: string, text: string): Promise<CmdbCache> {
    await writeFile(path, text);
    const provider = new FileCmdbProvider({ path, pollMs: 50, debounceMs: 20 });
    await provider.start();
    const cache = new CmdbCache({ provider, refreshMs: 3_600_000, eventPollMs: 200 });
    await cache.start();
    closers.push(() => provider.close(), () => cache.stop());
    return cache;
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'regsync-same-site-'));
    cmdbFile = join(dir, 'cmdb.yaml');
    // Region A's CMDB (the full scenario) serves A's registry and regsync; B has its own.
    const regionA = await cmdb(cmdbFile, NACOS_SCENARIO_YAML);
    const regionB = await cmdb(join(dir, 'cmdb-b.yaml'), CONSUMERS_ONLY_YAML);
    fx = await startFixture();
    a = await addRegistry(fx, 'a', { cmdb: regionA });
    b = await addRegistry(fx, 'b', { cmdb: regionB });
    for (const registry of [a, b]) {
      const res = await fetch(`${registry.url}/nacos/v1/ns/service?${formOf({ serviceName: 'echo', selector: SITE_SELECTOR })}`, { method: 'POST' });
      expect(await res.text()).toBe('ok');
    }
    const url = (await startSync(fx, undefined, { cmdb: { cache: regionA, describe: `file ${cmdbFile}` } })).url as string;
    await defineClusters(url, fx);
    await defineTask(url, 'echo-a-b', 'a', 'b', 'echo', { options: { labels: ['site'] } });
    natives.push(await registerNative(() => a, 'echo', '11.11.11.11', 8080));
    natives.push(await registerNative(() => a, 'echo', '22.22.22.22', 8080));
    await waitUntil(() => copiesIn(b, 'echo').length === 2, { message: 'both providers copied to B' });
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await stopFixture(fx);
    for (const close of closers.reverse()) await close();
    await rm(dir, { recursive: true, force: true });
  });

  it('gives consumers of B the providers of their own site, and all of them to a site without one', async () => {
    expect(Object.fromEntries(copiesIn(b, 'echo').map((i) => [i.ip, i.metadata.site]))).toEqual({ '11.11.11.11': 'x11', '22.22.22.22': 'x12' });
    for (const registry of [a, b]) {
      expect(await seenFrom(registry, '33.33.33.33')).toEqual(['11.11.11.11']);
      expect(await seenFrom(registry, '44.44.44.44')).toEqual(['22.22.22.22']);
      expect(await seenFrom(registry, '55.55.55.55')).toEqual(['11.11.11.11', '22.22.22.22']);
    }
  });

  it('moves a provider to its new site in both regions when the CMDB file changes', async () => {
    await replaceFile(cmdbFile, NACOS_SCENARIO_YAML.replace('22.22.22.22: {site: x12}', '22.22.22.22: {site: x11}'));
    await waitUntil(async () => (await seenFrom(a, '33.33.33.33')).length === 2, { message: 'A routes x11 consumers to 22.22.22.22' });
    await waitUntil(async () => (await seenFrom(b, '33.33.33.33')).length === 2, { message: 'B routes x11 consumers to 22.22.22.22' });
    // No provider is left at x12: its consumers get every provider, as Nacos does.
    expect(await seenFrom(b, '44.44.44.44')).toEqual(['11.11.11.11', '22.22.22.22']);
    expect(copiesIn(b, 'echo').find((i) => i.ip === '22.22.22.22')?.metadata.site).toBe('x11');
  });
});
