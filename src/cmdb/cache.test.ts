import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NACOS_SCENARIO_YAML, replaceFile } from '../../test/support/cmdb-fixtures.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { CmdbCache, FileCmdbProvider, type CmdbEntities, type CmdbEntity, type CmdbEvent, type CmdbProvider, type CmdbCacheOptions } from './index.js';


const NEVER = 3_600_000;

/**
 * An in-memory provider whose answers can be made to fail or hang, to check what the cache does when
 * its provider misbehaves (a real broken provider cannot be had on demand).
 */
class ScriptedProvider implements CmdbProvider {
  mode: 'ok' | 'throw' | 'hang' = 'ok';
  readonly entities = new Map<string, Record<string, string>>();
  readonly log: Array<{ at: number; event: CmdbEvent }> = [];

  set(ip: string, labels: Record<string, string> | undefined): void {
    if (labels === undefined) this.entities.delete(ip);
    else this.entities.set(ip, labels);
    this.log.push({ at: Date.now(), event: { entityName: ip, entityType: 'ip', type: labels === undefined ? 'ENTITY_REMOVE' : 'ENTITY_ADD_OR_UPDATE' } });
  }

  private async gate(): Promise<void> {
    if (this.mode === 'throw') throw new Error('CMDB backend unavailable');
    if (this.mode === 'hang') await new Promise(() => undefined);
  }

  private toEntity(name: string, labels: Record<string, string>): CmdbEntity {
    return { type: 'ip', name, labels: { ...labels } };
  }

  async labelNames(): Promise<string[]> {
    await this.gate();
    return ['site'];
  }
  async entityTypes(): Promise<string[]> {
    await this.gate();
    return ['ip'];
  }
  async label(name: string) {
    await this.gate();
    return name === 'site' ? { name, values: [] } : undefined;
  }
  async labelValue(entityName: string, entityType: string, label: string): Promise<string | undefined> {
    return (await this.labelValues(entityName, entityType))[label];
  }
  async labelValues(entityName: string, entityType: string): Promise<Record<string, string>> {
    return { ...(await this.entity(entityName, entityType))?.labels };
  }
  async allEntities(): Promise<CmdbEntities> {
    await this.gate();
    return new Map([['ip', new Map([...this.entities].map(([ip, labels]) => [ip, this.toEntity(ip, labels)]))]]);
  }
  async entity(entityName: string, entityType: string): Promise<CmdbEntity | undefined> {
    await this.gate();
    const labels = entityType === 'ip' ? this.entities.get(entityName) : undefined;
    return labels === undefined ? undefined : this.toEntity(entityName, labels);
  }
  async events(sinceMs: number): Promise<CmdbEvent[]> {
    await this.gate();
    return this.log.filter((l) => l.at >= sinceMs).map((l) => l.event);
  }
}

let dir: string;
const closers: Array<() => Promise<void>> = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'regsync-cmdb-cache-'));
});

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await rm(dir, { recursive: true, force: true });
});

async function fileProvider(text: string): Promise<FileCmdbProvider> {
  const path = join(dir, 'cmdb.yaml');
  await writeFile(path, text);
  const provider = new FileCmdbProvider({ path, pollMs: 50, debounceMs: 20 });
  await provider.start();
  closers.push(() => provider.close());
  return provider;
}

async function cache(provider: CmdbProvider, extra: Partial<CmdbCacheOptions> = {}): Promise<CmdbCache> {
  const c = new CmdbCache({ provider, refreshMs: NEVER, eventPollMs: 50, ...extra });
  closers.push(() => c.stop());
  await c.start();
  return c;
}

/** Every IP list the cache emits with `change`, in order. */
function changes(c: CmdbCache): string[][] {
  const seen: string[][] = [];
  c.on('change', (ips) => seen.push(ips));
  return seen;
}

describe('CmdbCache over a CMDB file', () => {
  it('answers the Nacos scenario synchronously', async () => {
    const c = await cache(await fileProvider(NACOS_SCENARIO_YAML));
    expect(c.labelsOf('11.11.11.11')).toEqual({ site: 'x11' });
    expect(c.labelsOf('22.22.22.22')).toEqual({ site: 'x12' });
    expect(c.labelsOf('33.33.33.33')).toEqual({ site: 'x11' });
    expect(c.labelsOf('44.44.44.44')).toEqual({ site: 'x12' });
    expect(c.labelsOf('55.55.55.55')).toEqual({ site: 'x13' });
    expect(c.labelsOf('66.66.66.66')).toEqual({});
    const status = c.status();
    expect(status).toMatchObject({ ok: true, lastError: undefined, entities: 5 });
    expect(status.lastRefreshAt).toBeTypeOf('number');
  });

  it('sees a changed site through events and names only that IP', async () => {
    const c = await cache(await fileProvider(NACOS_SCENARIO_YAML));
    const seen = changes(c);
    const refreshedAt = c.status().lastRefreshAt;
    await replaceFile(join(dir, 'cmdb.yaml'), NACOS_SCENARIO_YAML.replace('22.22.22.22: {site: x12}', '22.22.22.22: {site: x11}'));
    await waitUntil(() => c.labelsOf('22.22.22.22').site === 'x11', { message: '22.22.22.22 moved to x11' });
    expect(seen).toEqual([['22.22.22.22']]);
    // It came through an event poll: no full refresh ran.
    expect(c.status().lastRefreshAt).toBe(refreshedAt);
    expect(c.labelsOf('44.44.44.44')).toEqual({ site: 'x12' });
  });

  it('drops a removed entity through events', async () => {
    const c = await cache(await fileProvider(NACOS_SCENARIO_YAML));
    const seen = changes(c);
    await replaceFile(join(dir, 'cmdb.yaml'), NACOS_SCENARIO_YAML.replace('    55.55.55.55: {site: x13}\n', ''));
    await waitUntil(() => seen.length > 0, { message: 'change event' });
    expect(seen).toEqual([['55.55.55.55']]);
    expect(c.labelsOf('55.55.55.55')).toEqual({});
    expect(c.status().entities).toBe(4);
  });

  it('keeps the last good labels while the file is invalid, then missing, and reports it', async () => {
    const provider = await fileProvider(NACOS_SCENARIO_YAML);
    const c = await cache(provider);
    await writeFile(provider.path, 'entities: {ip: {11.11.11.11: {site: x11}\n');
    await waitUntil(() => c.status().lastError?.message.includes('invalid YAML'), { message: 'parse error in status' });
    expect(c.status()).toMatchObject({ ok: false, entities: 5, lastError: { source: 'provider' } });
    expect(c.labelsOf('22.22.22.22')).toEqual({ site: 'x12' });

    await unlink(provider.path);
    await waitUntil(() => c.status().lastError?.message.includes('file not found'), { message: 'missing file in status' });
    expect(await c.refresh()).toBe(true);
    expect(c.status()).toMatchObject({ ok: false, entities: 5 });
    expect(c.labelsOf('22.22.22.22')).toEqual({ site: 'x12' });

    await replaceFile(provider.path, NACOS_SCENARIO_YAML);
    await waitUntil(() => c.status().ok, { message: 'recovery' });
    expect(c.status().lastError).toBeUndefined();
  });
});

describe('CmdbCache over a failing provider', () => {
  it('keeps the last good labels when the provider throws, and catches up when it recovers', async () => {
    const provider = new ScriptedProvider();
    provider.set('11.11.11.11', { site: 'x11' });
    provider.set('22.22.22.22', { site: 'x12' });
    const c = await cache(provider, { eventPollMs: NEVER });
    const seen = changes(c);
    expect(c.labelsOf('22.22.22.22')).toEqual({ site: 'x12' });

    provider.mode = 'throw';
    provider.set('22.22.22.22', { site: 'x11' });
    expect(await c.refresh()).toBe(false);
    expect(await c.pollEvents()).toBe(false);
    expect(c.labelsOf('22.22.22.22')).toEqual({ site: 'x12' });
    expect(c.labelsOf('11.11.11.11')).toEqual({ site: 'x11' });
    const status = c.status();
    expect(status).toMatchObject({ ok: false, entities: 2, lastError: { source: 'cache' } });
    expect(status.lastError!.message).toBe('event poll failed: CMDB backend unavailable');

    // The failed poll did not move `since`, so the change made during the outage is still found.
    provider.mode = 'ok';
    expect(await c.pollEvents()).toBe(true);
    expect(c.labelsOf('22.22.22.22')).toEqual({ site: 'x11' });
    expect(seen).toEqual([['22.22.22.22']]);
    expect(c.status().ok).toBe(true);
  });

  it('keeps the last good labels when the provider hangs past the timeout', async () => {
    const provider = new ScriptedProvider();
    provider.set('33.33.33.33', { site: 'x11' });
    const c = await cache(provider, { eventPollMs: NEVER, timeoutMs: 50 });
    provider.mode = 'hang';
    expect(await c.refresh()).toBe(false);
    expect(c.status().lastError!.message).toBe('full refresh failed: CMDB full refresh timed out after 50 ms');
    expect(c.labelsOf('33.33.33.33')).toEqual({ site: 'x11' });
  });

  it('starts without labels when the first refresh fails, and fills in on the next refresh', async () => {
    const provider = new ScriptedProvider();
    provider.set('44.44.44.44', { site: 'x12' });
    provider.mode = 'throw';
    const c = await cache(provider, { refreshMs: 50, eventPollMs: NEVER });
    const seen = changes(c);
    expect(c.status()).toMatchObject({ ok: false, entities: 0, lastRefreshAt: undefined });
    provider.mode = 'ok';
    await waitUntil(() => c.status().ok, { message: 'periodic refresh to succeed' });
    expect(c.labelsOf('44.44.44.44')).toEqual({ site: 'x12' });
    expect(seen).toEqual([['44.44.44.44']]);
  });
});
