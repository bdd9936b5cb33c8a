import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import { silentLogger } from '../log.js';
import { CmdbConfigError } from './config-error.js';
import { CmdbFileError, parseCmdbFile, type CmdbFileContent } from './document.js';
import { SnapshotCmdbProvider } from './snapshot-provider.js';

/** Options of {@link HttpCmdbProvider}. */
export interface HttpCmdbProviderOptions {
  /**
   * The `http:` or `https:` URL of the CMDB document. Credentials in it (`https://user:pw@host/...`)
   * are sent as a Basic `Authorization` header (unless `headers` has one) and never shown.
   */
  url: string;
  /**
   * Extra request headers, e.g. `{Authorization: 'Bearer ...'}`. Their values are secrets to regsync:
   * never logged, never part of an error message. `If-None-Match` is regsync's own.
   */
  headers?: Record<string, string>;
  /** Period between the end of one fetch and the start of the next, in ms; default 10 000. */
  pollMs?: number;
  /** A fetch (connect, headers and body) that takes longer fails, in ms; default 5000. */
  timeoutMs?: number;
  /** A larger document fails (protects the daemon's memory), in bytes; default 32 MiB. */
  maxBytes?: number;
  /** How long events are kept for {@link HttpCmdbProvider.events}, in ms; default one hour. */
  eventRetentionMs?: number;
  logger?: Logger;
}

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const OWN_HEADERS = new Set(['if-none-match']);

/**
 * The URL as it may be shown: without user info, fragment and query values (any of which may be a
 * token); query parameter names stay so two URLs can still be told apart.
 */
export function redactUrl(url: URL): string {
  let out = `${url.protocol}//${url.host}${url.pathname}`;
  if (url.search !== '') out += `?${[...url.searchParams.keys()].map((k) => `${encodeURIComponent(k)}=***`).join('&')}`;
  return out;
}

/**
 * Parses the URL of a CMDB document; throws {@link CmdbConfigError} (`source`, `key`) unless it is an
 * absolute http(s) URL. The message never repeats the URL: it may hold credentials.
 */
export function parseCmdbUrl(source: string, key: string, url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CmdbConfigError(source, key, 'not a valid absolute URL (expected http://host[:port]/path or https://...)');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new CmdbConfigError(source, key, `unsupported protocol "${parsed.protocol}" (expected http: or https:)`);
  }
  return parsed;
}

/**
 * Checks request headers for a CMDB URL; returns them with lower-case names. Throws
 * {@link CmdbConfigError} (`source`, `key.<name>`) naming the header, never its value.
 */
export function checkCmdbHeaders(source: string, key: string, headers: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const at = `${key}.${name}`;
    if (!HEADER_NAME.test(name)) throw new CmdbConfigError(source, at, 'not a valid header name');
    if (OWN_HEADERS.has(name.toLowerCase())) throw new CmdbConfigError(source, at, 'set by regsync itself; remove it');
    if (typeof value !== 'string') {
      throw new CmdbConfigError(source, at, `the value must be a string, got ${value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value}`);
    }
    if (/[\r\n\0]/.test(value)) throw new CmdbConfigError(source, at, 'the value must not contain line breaks or NUL');
    if (Object.hasOwn(out, name.toLowerCase())) throw new CmdbConfigError(source, at, 'given twice (header names ignore case)');
    out[name.toLowerCase()] = value;
  }
  return out;
}

function positiveInt(source: string, key: string, value: number | undefined, fallback: number): number {
  const n = value ?? fallback;
  if (!Number.isInteger(n) || n < 1) throw new CmdbConfigError(source, key, `must be a positive integer, got ${String(n)}`);
  return n;
}

function formatOf(contentType: string | string[] | undefined, text: string): 'yaml' | 'json' {
  const type = (Array.isArray(contentType) ? contentType[0] : contentType)?.split(';')[0]?.trim().toLowerCase() ?? '';
  if (type === 'application/json' || type.endsWith('+json')) return 'json';
  if (type.endsWith('yaml') || type.endsWith('+yaml')) return 'yaml';
  return text.trimStart().startsWith('{') ? 'json' : 'yaml';
}

/** Why a fetch failed: the message for {@link HttpCmdbProvider.lastError}. */
class FetchFailure extends Error {
  override name = 'FetchFailure';
}

/**
 * A {@link CmdbProvider} polling one URL that serves the CMDB document (the same YAML or JSON tree as
 * the file provider; see {@link parseCmdbFile}); JSON or YAML is told by the `Content-Type`
 * (`application/json`, `*+json`, `*yaml`), else sniffed (`{` first means JSON).
 *
 * Every `pollMs` it sends `GET` with `If-None-Match: <last ETag>`; `304 Not Modified` means unchanged.
 * Fetches never overlap and each runs under `timeoutMs`. A fetch that fails (connection error, timeout,
 * a status other than 2xx/304, a document that does not validate) keeps serving the last good content
 * and sets {@link lastError} to the cause and the URL (redacted: see {@link redactUrl}); the next good
 * fetch (or 304) clears it. Good fetches record entity events like the file provider.
 *
 * Start policy: the constructor throws {@link CmdbConfigError} on a bad URL or bad options (a mistake
 * the operator must fix), but {@link start} does not throw when the first fetch fails: the CMDB may
 * merely be down, so the provider starts empty with {@link lastError} set and keeps polling (a
 * {@link CmdbCache} in front shows the problem in its status). When that first content arrives later,
 * it is recorded as events (every entity added), so event-polling readers see it at once.
 *
 * Deliberately left out: `Last-Modified`; redirects (a 3xx is reported like any other unexpected
 * status: point the URL at the document itself); proxies and custom TLS settings (the provider uses
 * its own undici `Agent` with default TLS, closed by {@link close}); pushing (the source is polled).
 */
export class HttpCmdbProvider extends SnapshotCmdbProvider {
  /** The URL as it may be shown (see {@link redactUrl}). */
  readonly url: string;
  readonly pollMs: number;
  readonly timeoutMs: number;
  private readonly target: URL;
  private readonly headers: Record<string, string>;
  private readonly maxBytes: number;
  private readonly logger: Logger;
  private readonly agent: Agent;
  private etag: string | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private inFlight: AbortController | undefined;
  private state: 'new' | 'started' | 'closed' = 'new';

  /** Validates the options; throws {@link CmdbConfigError}. Fetches nothing yet. */
  constructor(opts: HttpCmdbProviderOptions) {
    super(opts.eventRetentionMs === undefined ? {} : { eventRetentionMs: opts.eventRetentionMs });
    const source = 'CMDB HTTP provider';
    const target = parseCmdbUrl(source, 'url', opts.url);
    this.url = redactUrl(target);
    const headers = checkCmdbHeaders(source, 'headers', opts.headers ?? {});
    if ((target.username !== '' || target.password !== '') && headers.authorization === undefined) {
      const basic = `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`;
      headers.authorization = `Basic ${Buffer.from(basic).toString('base64')}`;
    }
    target.username = '';
    target.password = '';
    target.hash = '';
    headers.accept ??= 'application/json, application/yaml;q=0.9, */*;q=0.5';
    this.target = target;
    this.headers = headers;
    this.pollMs = positiveInt(source, 'pollMs', opts.pollMs, 10_000);
    this.timeoutMs = positiveInt(source, 'timeoutMs', opts.timeoutMs, 5000);
    this.maxBytes = positiveInt(source, 'maxBytes', opts.maxBytes, 32 * 1024 * 1024);
    this.logger = (opts.logger ?? silentLogger()).child({ component: 'cmdb-http', url: this.url });
    this.agent = new Agent({ connect: { timeout: this.timeoutMs } });
  }

  /**
   * Fetches the document once and starts polling. Never throws for a failed fetch (see the class
   * comment): check {@link lastError} to learn whether content arrived.
   */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`HttpCmdbProvider already ${this.state}`);
    const ok = await this.reload();
    if (this.isClosed()) return; // closed while the first fetch ran
    this.state = 'started';
    if (!ok) {
      this.logger.warn(
        { problem: this.lastError()?.message, pollMs: this.pollMs },
        'CMDB URL not usable at start; running without CMDB labels and retrying',
      );
    }
    this.schedulePoll();
  }

  /** Stops polling and aborts a fetch in progress; the content fetched last stays readable. Idempotent. */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearTimeout(this.pollTimer);
    this.inFlight?.abort();
    await this.loadsSettled();
    await this.agent.close();
  }

  /**
   * Fetches now (after any fetch in progress); resolves true if the content in use is the server's
   * current one (new, or confirmed by 304), false if the fetch failed (see {@link lastError}).
   */
  async reload(): Promise<boolean> {
    return this.coalescedLoad(() => this.fetchOnce(), () => this.state === 'closed');
  }

  private isClosed(): boolean {
    return this.state === 'closed';
  }

  private schedulePoll(): void {
    if (this.state !== 'started') return;
    this.pollTimer = setTimeout(() => void this.reload().finally(() => this.schedulePoll()), this.pollMs);
    this.pollTimer.unref();
  }

  /** One fetch; installs good content or records the problem. */
  private async fetchOnce(): Promise<boolean> {
    if (this.state === 'closed') return false;
    let result: { notModified: true } | { notModified: false; content: CmdbFileContent; etag: string | undefined };
    try {
      result = await this.fetchDocument();
    } catch (error) {
      if (this.isClosed()) return false; // aborted by close()
      const message = error instanceof FetchFailure ? error.message : `GET ${this.url}: ${String(error)}`;
      this.setProblem(message);
      if (this.state === 'started') this.logger.warn({ problem: message }, 'CMDB fetch failed; keeping the last good content');
      return false;
    }
    if (result.notModified) {
      if (this.clearProblem()) this.logger.info('CMDB URL usable again (not modified)');
      return true;
    }
    const { events, recovered } = this.install(result.content, this.state !== 'new');
    this.etag = result.etag;
    if (recovered) this.logger.info('CMDB URL usable again');
    if (this.state !== 'new') this.logger.info({ events }, 'CMDB document fetched');
    return true;
  }

  private async fetchDocument(): Promise<
    { notModified: true } | { notModified: false; content: CmdbFileContent; etag: string | undefined }
  > {
    const fail = (problem: string, cause?: unknown): FetchFailure =>
      new FetchFailure(`GET ${this.url}: ${problem}`, cause === undefined ? undefined : { cause });
    const controller = new AbortController();
    this.inFlight = controller;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.timeoutMs);
    timer.unref();
    const headers = { ...this.headers };
    if (this.etag !== undefined) headers['if-none-match'] = this.etag;
    try {
      let text: string;
      let contentType: string | string[] | undefined;
      let etag: string | undefined;
      try {
        const res = await request(this.target, { method: 'GET', headers, signal: controller.signal, dispatcher: this.agent });
        if (res.statusCode === 304) {
          await res.body.dump();
          if (this.etag === undefined) throw fail('HTTP 304 Not Modified, but no document was fetched before');
          return { notModified: true };
        }
        if (res.statusCode < 200 || res.statusCode > 299) {
          await res.body.dump();
          throw fail(`HTTP ${res.statusCode}`);
        }
        contentType = res.headers['content-type'];
        const rawEtag = res.headers.etag;
        etag = Array.isArray(rawEtag) ? rawEtag[0] : rawEtag;
        const declared = Number(res.headers['content-length']);
        if (Number.isFinite(declared) && declared > this.maxBytes) {
          await res.body.dump();
          throw fail(`the document has ${declared} bytes, more than the limit of ${this.maxBytes}`);
        }
        const chunks: Buffer[] = [];
        let size = 0;
        for await (const chunk of res.body) {
          size += (chunk as Buffer).length;
          if (size > this.maxBytes) {
            controller.abort();
            throw fail(`the document is larger than the limit of ${this.maxBytes} bytes`);
          }
          chunks.push(chunk as Buffer);
        }
        text = Buffer.concat(chunks).toString('utf8');
      } catch (error) {
        if (error instanceof FetchFailure) throw error;
        if (timedOut) throw fail(`timed out after ${this.timeoutMs} ms`, error);
        const code = (error as { code?: unknown }).code;
        const message = (error as Error)?.message || (typeof code === 'string' ? code : String(error));
        throw fail(message, error);
      }
      let content: CmdbFileContent;
      try {
        content = parseCmdbFile(text, this.url, formatOf(contentType, text));
      } catch (error) {
        if (!(error instanceof CmdbFileError)) throw error;
        throw fail(error.path === '' ? error.problem : `${error.path}: ${error.problem}`, error);
      }
      return { notModified: false, content, etag };
    } finally {
      clearTimeout(timer);
      if (this.inFlight === controller) this.inFlight = undefined;
    }
  }
}
