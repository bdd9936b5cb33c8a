import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { NACOS_SCENARIO_YAML } from '../support/cmdb-fixtures.js';
import { formOf } from '../support/http.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import { api, copiesIn, registerNative, type NativeInstance } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const SITE_SELECTOR = JSON.stringify({ type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.site' });

/** `regsync registry --cmdb`: label selectors with labels from a CMDB file, as a process. */
describe('regsync registry --cmdb', () => {
  let dir: string;
  let registry: RegsyncProcess;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'regsync-cmdb-cli-'));
    writeFileSync(join(dir, 'cmdb.yaml'), NACOS_SCENARIO_YAML);
    registry = await startRegsync(['registry', '--port', '0', '--cmdb', join(dir, 'cmdb.yaml')]);
  });
  afterAll(async () => {
    await registry?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('routes consumers to providers of their site', async () => {
    expect(registry.output()).toContain(`(CMDB: file ${join(dir, 'cmdb.yaml')})`);
    const create = await fetch(`${registry.url}/nacos/v1/ns/service?${formOf({ serviceName: 'echo', selector: SITE_SELECTOR })}`, { method: 'POST' });
    expect(await create.text()).toBe('ok');
    for (const ip of ['11.11.11.11', '22.22.22.22']) {
      const res = await fetch(`${registry.url}/nacos/v1/ns/instance?${formOf({ serviceName: 'echo', ip, port: 8080, ephemeral: false })}`, { method: 'POST' });
      expect(await res.text()).toBe('ok');
    }
    const seen = async (clientIP: string) => {
      const res = await fetch(`${registry.url}/nacos/v1/ns/instance/list?${formOf({ serviceName: 'echo', clientIP })}`);
      return ((await res.json()) as { hosts: Array<{ ip: string }> }).hosts.map((h) => h.ip).sort();
    };
    expect(await seen('33.33.33.33')).toEqual(['11.11.11.11']);
    expect(await seen('44.44.44.44')).toEqual(['22.22.22.22']);
    expect(await seen('55.55.55.55')).toEqual(['11.11.11.11', '22.22.22.22']);
  });

  it('refuses a CMDB it cannot use at start, and two CMDB sources, with a clear message', async () => {
    const missing = await runRegsync(['registry', '--port', '0', '--cmdb', join(dir, 'nope.yaml')]);
    expect(missing.code).toBe(1);
    expect(missing.output).toContain(join(dir, 'nope.yaml'));
    writeFileSync(join(dir, 'bad.yaml'), 'entities:\n  ip:\n    11.11.11.11: {site: x99}\n');
    const bad = await runRegsync(['registry', '--port', '0', '--cmdb', join(dir, 'bad.yaml')]);
    expect(bad.code).toBe(1);
    expect(bad.output).toContain(`${join(dir, 'bad.yaml')}: entities.ip["11.11.11.11"].site: label "site" is not declared`);
    const both = await runRegsync(['registry', '--port', '0', '--cmdb', join(dir, 'cmdb.yaml'), '--cmdb-url', 'http://127.0.0.1:1/cmdb']);
    expect(both.code).not.toBe(0);
    expect(both.output).toContain("option '--cmdb <file>' cannot be used with option '--cmdb-url <url>'");
  });
});

/**
 * `regsync up` with an HTTP CMDB and with a plug-in: copies carry the labels; a CMDB answering 500
 * or a plug-in throwing keeps the last good labels, blocks no sync and shows in `/api/v1/cmdb`.
 */
describe('regsync up with a CMDB that fails', () => {
  let dir: string;
  const redises: RedisServer[] = [];
  let a: RunningRegistry;
  let b: RunningRegistry;
  let cmdbServer: Server;
  let cmdbUrl: string;
  let document = NACOS_SCENARIO_YAML;
  let failing = false;
  const natives: NativeInstance[] = [];
  const ups: RegsyncProcess[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'regsync-cmdb-up-'));
    a = await startRegistry({ port: 0 });
    b = await startRegistry({ port: 0 });
    cmdbServer = createServer((req, res) => {
      if (failing) {
        res.writeHead(500).end('inventory database down');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/yaml' }).end(document);
    });
    await new Promise<void>((resolve) => cmdbServer.listen(0, '127.0.0.1', resolve));
    cmdbUrl = `http://127.0.0.1:${(cmdbServer.address() as AddressInfo).port}/cmdb`;
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    for (const up of ups) await up.stop();
    await a.close();
    await b.close();
    await new Promise<void>((resolve) => cmdbServer.close(() => resolve()));
    for (const redis of redises) await redis.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Starts `regsync up` (a deployment of its own) with `cmdbArgs` and one task A->B for `service`. */
  async function upWith(cmdbArgs: string[], service: string): Promise<string> {
    const redis = await startRedis();
    redises.push(redis);
    const up = await startRegsync(['up', '--redis', redis.url, '--listen', '127.0.0.1:0', '--cmdb-event-poll', '200ms', ...cmdbArgs]);
    ups.push(up);
    for (const [id, registry] of [
      ['a', a],
      ['b', b],
    ] as const) {
      expect((await api(up.url, 'PUT', `/api/v1/clusters/${id}`, { id, kind: 'nacos', endpoints: [registry.endpoint] })).status).toBeLessThan(300);
    }
    expect((await api(up.url, 'POST', '/api/v1/tasks', { id: service, source: 'a', destination: 'b', service })).status).toBe(201);
    return up.url;
  }

  const siteOf = (service: string, ip: string) => copiesIn(b, service).find((i) => i.ip === ip)?.metadata.site;

  it('over HTTP: labels copies, keeps them through a 500, and follows the CMDB once it answers again', async () => {
    const config = join(dir, 'cmdb-http.yaml');
    writeFileSync(config, `provider: http\nurl: ${cmdbUrl}\npollMs: 200\n`);
    const url = await upWith(['--cmdb-config', config], 'http-echo');
    natives.push(await registerNative(() => a, 'http-echo', '11.11.11.11', 8080));
    await waitUntil(() => siteOf('http-echo', '11.11.11.11') === 'x11', { message: 'copy labelled from the HTTP CMDB' });

    failing = true;
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/cmdb')).body.items[0]?.ok === false, { message: 'CMDB failure reported' });
    const view = (await api(url, 'GET', '/api/v1/cmdb')).body.items[0];
    expect(view.provider).toContain('127.0.0.1');
    expect(view.lastError.message).toContain('500');
    natives.push(await registerNative(() => a, 'http-echo', '33.33.33.33', 8080));
    await waitUntil(() => siteOf('http-echo', '33.33.33.33') === 'x11', { message: 'new copy synced with the last good labels' });
    expect(siteOf('http-echo', '11.11.11.11')).toBe('x11');

    document = NACOS_SCENARIO_YAML.replace('11.11.11.11: {site: x11}', '11.11.11.11: {site: x13}');
    failing = false;
    await waitUntil(() => siteOf('http-echo', '11.11.11.11') === 'x13', { message: 'copy re-labelled once the CMDB answers' });
    // Workers report their CMDB at every membership heartbeat.
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/cmdb')).body.items[0]?.ok === true, { message: 'recovery reported' });
  });

  it('from a plug-in: a plug-in that throws keeps the labels and blocks nothing', async () => {
    const failFlag = join(dir, 'fail');
    const config = join(dir, 'cmdb-plugin.yaml');
    const plugin = fileURLToPath(new URL('../fixtures/cmdb-plugins/flaky.mjs', import.meta.url));
    writeFileSync(
      config,
      JSON.stringify({ provider: 'plugin', module: plugin, options: { failFlag, ips: { '11.11.11.11': { site: 'p11' }, '33.33.33.33': { site: 'p33' } } } }),
    );
    const url = await upWith(['--cmdb-config', config, '--cmdb-refresh', '300ms'], 'plugin-echo');
    natives.push(await registerNative(() => a, 'plugin-echo', '11.11.11.11', 8080));
    await waitUntil(() => siteOf('plugin-echo', '11.11.11.11') === 'p11', { message: 'copy labelled by the plug-in' });

    writeFileSync(failFlag, '');
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/cmdb')).body.items[0]?.ok === false, { message: 'plug-in failure reported' });
    expect((await api(url, 'GET', '/api/v1/cmdb')).body.items[0].lastError.message).toContain('inventory backend unavailable');
    natives.push(await registerNative(() => a, 'plugin-echo', '33.33.33.33', 8080));
    await waitUntil(() => siteOf('plugin-echo', '33.33.33.33') === 'p33', { message: 'new copy synced with the last good labels' });
    unlinkSync(failFlag);
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/cmdb')).body.items[0]?.ok === true, { message: 'plug-in recovered' });
  });
});
