import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { NACOS_SCENARIO_YAML } from '../../test/support/cmdb-fixtures.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { CmdbCache, CmdbConfigError, HttpCmdbProvider, type HttpCmdbProviderOptions } from './index.js';

const NEVER = 3_600_000;
const TOKEN = 'Bearer s3cr3t-t0ken';
const QUERY_SECRET = 'q-s3cr3t';

/** What the test server answers; changed by the tests while it runs. */
interface Reply {
  status: number;
  body: string;
  contentType?: string;
  etag?: string;
  /** Never answer (the connection stays open until the server closes). */
  hang?: boolean;
}

/** A real CMDB HTTP endpoint on 127.0.0.1 that records what it was asked. */
class CmdbServer {
  reply: Reply = { status: 200, body: NACOS_SCENARIO_YAML, contentType: 'application/yaml' };
  readonly requests: Array<{ url: string; headers: IncomingHttpHeaders; answered: number | 'hung' }> = [];
  private readonly server: Server;
  port = 0;

  constructor() {
    this.server = createServer((req, res) => {
      const reply = this.reply;
      const seen = { url: req.url ?? '', headers: req.headers, answered: 0 as number | 'hung' };
      this.requests.push(seen);
      if (reply.hang === true) {
        seen.answered = 'hung';
        return;
      }
      if (reply.etag !== undefined && req.headers['if-none-match'] === reply.etag) {
        seen.answered = 304;
        res.writeHead(304, { etag: reply.etag }).end();
        return;
      }
      seen.answered = reply.status;
      const headers: Record<string, string> = {};
      if (reply.contentType !== undefined) headers['content-type'] = reply.contentType;
      if (reply.etag !== undefined) headers.etag = reply.etag;
      res.writeHead(reply.status, headers).end(reply.body);
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** The document URL, with a query secret that must never show. */
  get url(): string {
    return `http://127.0.0.1:${this.port}/cmdb/labels?token=${QUERY_SECRET}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function server(): Promise<CmdbServer> {
  const s = await new CmdbServer().start();
  closers.push(() => s.close());
  return s;
}

async function provider(s: CmdbServer, extra: Partial<HttpCmdbProviderOptions> = {}): Promise<HttpCmdbProvider> {
  const p = new HttpCmdbProvider({ url: s.url, headers: { Authorization: TOKEN }, pollMs: NEVER, timeoutMs: 2000, ...extra });
  closers.push(() => p.close());
  await p.start();
  return p;
}

/** Fails the test if a secret leaked into a message. */
function expectNoSecrets(text: string | undefined): void {
  expect(text).toBeDefined();
  expect(text).not.toContain('s3cr3t');
}

describe('HttpCmdbProvider', () => {
  it('loads the document at start and answers the SPI, sending the configured headers', async () => {
    const s = await server();
    const p = await provider(s);
    expect(await p.labelNames()).toEqual(['site']);
    expect(await p.labelValue('33.33.33.33', 'ip', 'site')).toBe('x11');
    expect(await p.entity('22.22.22.22', 'ip')).toEqual({ type: 'ip', name: '22.22.22.22', labels: { site: 'x12' } });
    expect((await p.allEntities()).get('ip')?.size).toBe(5);
    expect(await p.events(0)).toEqual([]);
    expect(p.lastError()).toBeUndefined();
    expect(s.requests).toHaveLength(1);
    expect(s.requests[0]!.url).toBe(`/cmdb/labels?token=${QUERY_SECRET}`);
    expect(s.requests[0]!.headers.authorization).toBe(TOKEN);
    expect(s.requests[0]!.headers['if-none-match']).toBeUndefined();
    expect(p.url).toBe(`http://127.0.0.1:${s.port}/cmdb/labels?token=***`);
  });

  it('reads JSON by content type and by sniffing', async () => {
    const s = await server();
    const doc = { labels: { site: null }, entities: { ip: { '10.0.0.1': { site: 'a' } } } };
    s.reply = { status: 200, body: JSON.stringify(doc), contentType: 'application/vnd.cmdb+json; charset=utf-8' };
    const byType = await provider(s);
    expect(await byType.labelValues('10.0.0.1', 'ip')).toEqual({ site: 'a' });
    s.reply = { status: 200, body: `  ${JSON.stringify(doc, null, 2)}`, contentType: 'text/plain' };
    const sniffed = await provider(s);
    expect(await sniffed.labelValues('10.0.0.1', 'ip')).toEqual({ site: 'a' });
    // A JSON document sent as JSON is parsed as JSON: a JSON syntax error says so.
    s.reply = { status: 200, body: '{"labels": ', contentType: 'application/json' };
    expect(await sniffed.reload()).toBe(false);
    expect(sniffed.lastError()?.message).toContain('invalid JSON');
  });

  it('polls, and turns a changed document into entity events', async () => {
    const s = await server();
    const p = await provider(s, { pollMs: 50 });
    const before = Date.now();
    s.reply = {
      ...s.reply,
      body: NACOS_SCENARIO_YAML.replace('22.22.22.22: {site: x12}', '22.22.22.22: {site: x11}').replace('    55.55.55.55: {site: x13}\n', '    66.66.66.66: {site: x13}\n'),
    };
    await waitUntil(async () => (await p.labelValue('22.22.22.22', 'ip', 'site')) === 'x11', { message: 'poll picked up the change' });
    const events = await p.events(before);
    expect(events).toHaveLength(3);
    expect(events).toEqual(
      expect.arrayContaining([
        { entityName: '22.22.22.22', entityType: 'ip', type: 'ENTITY_ADD_OR_UPDATE' },
        { entityName: '66.66.66.66', entityType: 'ip', type: 'ENTITY_ADD_OR_UPDATE' },
        { entityName: '55.55.55.55', entityType: 'ip', type: 'ENTITY_REMOVE' },
      ]),
    );
    expect(await p.entity('55.55.55.55', 'ip')).toBeUndefined();
  });

  it('sends If-None-Match with the last ETag and keeps its content on 304', async () => {
    const s = await server();
    s.reply = { ...s.reply, etag: '"v1"' };
    const p = await provider(s, { pollMs: 50 });
    await waitUntil(() => s.requests.filter((r) => r.answered === 304).length >= 2, { message: 'two 304 answers' });
    expect(s.requests[0]!.headers['if-none-match']).toBeUndefined();
    expect(s.requests.slice(1).every((r) => r.headers['if-none-match'] === '"v1"')).toBe(true);
    expect(await p.labelValue('11.11.11.11', 'ip', 'site')).toBe('x11');
    expect((await p.allEntities()).get('ip')?.size).toBe(5);
    expect(await p.events(0)).toEqual([]);
    expect(p.lastError()).toBeUndefined();

    // A new version with a new ETag is fetched whole, and its ETag is sent from then on.
    s.reply = { ...s.reply, etag: '"v2"', body: NACOS_SCENARIO_YAML.replace('11.11.11.11: {site: x11}', '11.11.11.11: {site: x13}') };
    await waitUntil(async () => (await p.labelValue('11.11.11.11', 'ip', 'site')) === 'x13', { message: 'v2 fetched' });
    const seen = s.requests.length;
    await waitUntil(() => s.requests.length > seen + 1, { message: 'more polls' });
    expect(s.requests.at(-1)!.headers['if-none-match']).toBe('"v2"');
    expect(s.requests.at(-1)!.answered).toBe(304);
  });

  it('keeps the last good content on HTTP 500, a timeout and a bad document, and recovers', async () => {
    const s = await server();
    s.reply = { ...s.reply, etag: '"v1"' };
    const p = await provider(s, { timeoutMs: 300 });

    s.reply = { status: 500, body: 'internal error' };
    expect(await p.reload()).toBe(false);
    const http500 = p.lastError()!;
    expect(http500.message).toBe(`GET http://127.0.0.1:${s.port}/cmdb/labels?token=***: HTTP 500`);
    expect(http500.at).toBeGreaterThan(0);
    expect(await p.labelValue('22.22.22.22', 'ip', 'site')).toBe('x12');

    s.reply = { status: 200, body: '', hang: true };
    expect(await p.reload()).toBe(false);
    expect(p.lastError()!.message).toBe(`GET http://127.0.0.1:${s.port}/cmdb/labels?token=***: timed out after 300 ms`);
    expect(await p.labelValue('22.22.22.22', 'ip', 'site')).toBe('x12');

    s.reply = { status: 200, contentType: 'application/yaml', body: NACOS_SCENARIO_YAML.replace('55.55.55.55: {site: x13}', '55.55.55.55: {site: x99}') };
    expect(await p.reload()).toBe(false);
    expect(p.lastError()!.message).toBe(
      `GET http://127.0.0.1:${s.port}/cmdb/labels?token=***: entities.ip["55.55.55.55"].site: value "x99" is not allowed for label "site" (allowed: x11, x12, x13)`,
    );
    expect(await p.labelValue('55.55.55.55', 'ip', 'site')).toBe('x13');
    expect(await p.events(0)).toEqual([]);
    for (const r of s.requests.slice(1)) expect(r.headers['if-none-match']).toBe('"v1"');

    // The server still has v1: a 304 confirms the content in use and clears the problem.
    s.reply = { status: 200, contentType: 'application/yaml', body: NACOS_SCENARIO_YAML, etag: '"v1"' };
    expect(await p.reload()).toBe(true);
    expect(s.requests.at(-1)!.answered).toBe(304);
    expect(p.lastError()).toBeUndefined();

    s.reply = { status: 503, body: '' };
    expect(await p.reload()).toBe(false);
    s.reply = { status: 200, contentType: 'application/yaml', body: NACOS_SCENARIO_YAML.replace('44.44.44.44: {site: x12}', '44.44.44.44: {site: x11}') };
    expect(await p.reload()).toBe(true);
    expect(p.lastError()).toBeUndefined();
    expect(await p.labelValue('44.44.44.44', 'ip', 'site')).toBe('x11');
  });

  it('starts empty when the CMDB is down at start, keeps polling, and records the late content as events', async () => {
    const s = await server();
    s.reply = { status: 503, body: 'starting up' };
    const started = Date.now();
    const p = await provider(s, { pollMs: 50 });
    expect(p.lastError()!.message).toContain('HTTP 503');
    expect(await p.allEntities()).toEqual(new Map());
    s.reply = { status: 200, body: NACOS_SCENARIO_YAML };
    await waitUntil(() => p.lastError() === undefined, { message: 'recovery by polling' });
    expect(await p.labelValue('44.44.44.44', 'ip', 'site')).toBe('x12');
    const events = await p.events(started);
    expect(events).toHaveLength(5);
    expect(events.every((e) => e.type === 'ENTITY_ADD_OR_UPDATE')).toBe(true);
  });

  it('reports a refused connection with the URL but without its secrets', async () => {
    const s = await server();
    const url = s.url.replace('http://', 'http://admin:pw-s3cr3t@');
    await s.close();
    const p = new HttpCmdbProvider({ url, headers: { 'X-Api-Key': 'k-s3cr3t' }, pollMs: NEVER });
    closers.push(() => p.close());
    await p.start();
    const problem = p.lastError()?.message;
    expectNoSecrets(problem);
    expect(problem).toMatch(new RegExp(`^GET http://127\\.0\\.0\\.1:${s.port}/cmdb/labels\\?token=\\*\\*\\*: .*ECONNREFUSED`));
    expect(p.url).not.toContain('admin');
  });

  it('sends URL credentials as Basic authorization', async () => {
    const s = await server();
    const p = new HttpCmdbProvider({ url: s.url.replace('http://', 'http://ad%40min:pw-s3cr3t@'), pollMs: NEVER });
    closers.push(() => p.close());
    await p.start();
    expect(p.lastError()).toBeUndefined();
    expect(s.requests[0]!.headers.authorization).toBe(`Basic ${Buffer.from('ad@min:pw-s3cr3t').toString('base64')}`);
  });

  it('refuses a document above maxBytes', async () => {
    const s = await server();
    const p = await provider(s, { maxBytes: 64 });
    expect(p.lastError()!.message).toMatch(/more than the limit of 64|larger than the limit of 64 bytes/);
    expect(await p.labelNames()).toEqual([]);
  });

  it('rejects bad options at construction, naming the setting and not the secret', () => {
    const bad: Array<[Partial<HttpCmdbProviderOptions>, string]> = [
      [{ url: 'not a url s3cr3t' }, 'url: not a valid absolute URL'],
      [{ url: 'ftp://127.0.0.1/cmdb?token=s3cr3t' }, 'url: unsupported protocol "ftp:"'],
      [{ headers: { 'Bad Header': 's3cr3t' } }, 'headers.Bad Header: not a valid header name'],
      [{ headers: { Authorization: 'Bearer s3cr3t\r\nX-Evil: 1' } }, 'headers.Authorization: the value must not contain line breaks'],
      [{ headers: { 'If-None-Match': '"x"' } }, 'headers.If-None-Match: set by regsync itself'],
      [{ headers: { authorization: 'a-s3cr3t', Authorization: 'b-s3cr3t' } }, 'headers.Authorization: given twice'],
      [{ pollMs: 0 }, 'pollMs: must be a positive integer'],
      [{ timeoutMs: 1.5 }, 'timeoutMs: must be a positive integer'],
    ];
    for (const [opts, message] of bad) {
      let error: unknown;
      try {
        new HttpCmdbProvider({ url: 'http://127.0.0.1:1/cmdb', ...opts });
      } catch (e) {
        error = e;
      }
      expect(error, message).toBeInstanceOf(CmdbConfigError);
      expect((error as Error).message).toContain(message);
      expectNoSecrets((error as Error).message);
    }
  });
});

describe('CmdbCache over an HTTP CMDB', () => {
  it('keeps the labels while the server answers 500 and reports it in its status', async () => {
    const s = await server();
    const p = await provider(s, { pollMs: 50 });
    const cache = new CmdbCache({ provider: p, refreshMs: 50, eventPollMs: 50 });
    closers.push(() => cache.stop());
    await cache.start();
    expect(cache.labelsOf('33.33.33.33')).toEqual({ site: 'x11' });
    expect(cache.status().ok).toBe(true);

    s.reply = { status: 500, body: '' };
    await waitUntil(() => cache.status().ok === false, { message: 'the 500 in the cache status' });
    const status = cache.status();
    expect(status.lastError).toMatchObject({ source: 'provider' });
    expect(status.lastError!.message).toContain('HTTP 500');
    expectNoSecrets(status.lastError!.message);
    // Refreshes keep running against the provider's last good content.
    const refreshes = status.lastRefreshAt!;
    await waitUntil(() => cache.status().lastRefreshAt! > refreshes, { message: 'a refresh during the outage' });
    expect(cache.labelsOf('33.33.33.33')).toEqual({ site: 'x11' });
    expect(cache.labelsOf('55.55.55.55')).toEqual({ site: 'x13' });
    expect(cache.status().entities).toBe(5);

    s.reply = { status: 200, body: NACOS_SCENARIO_YAML.replace('33.33.33.33: {site: x11}', '33.33.33.33: {site: x12}') };
    await waitUntil(() => cache.status().ok && cache.labelsOf('33.33.33.33').site === 'x12', { message: 'recovery' });
  });
});
