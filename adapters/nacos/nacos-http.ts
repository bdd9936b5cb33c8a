import type { Logger } from 'pino';
import { Pool } from 'undici';
import type { NacosEndpoint } from './nacos-options.js';
import { NacosRequestError, type NacosRequestErrorCode } from './nacos-request-error.js';
import { NacosTokenSource } from './nacos-token-source.js';
import type { NacosAnswer, NacosCall } from './nacos-call.js';
import { Semaphore } from './semaphore.js';
import { encodeForm, exchange } from './http-exchange.js';

/** How an adapter's HTTP layer is set up (all from the cluster spec and its options). */
export interface NacosHttpOptions {
  clusterId: string;
  endpoints: readonly NacosEndpoint[];
  contextPath: string;
  maxConcurrency: number;
  requestTimeoutMs: number;
  credentials?: { username: string; password: string } | undefined;
  log: Logger;
  /**
   * Told of every request that failed (metrics): no endpoint answered or all timed out, or the
   * caller could not accept the answer (see {@link NacosHttp.error}); not of `nacos-closed`.
   * Must not throw.
   */
  onRequestError?: ((code: NacosRequestErrorCode) => void) | undefined;
}

/**
 * Nacos decides which clients get UDP pushes by their agent (`canEnablePush`): Java clients of any
 * version do. The official Node SDK presents itself the same way.
 */
const USER_AGENT = 'Nacos-Java-Client:v1.4.1';

/** Headers of every call without a v3 token (shared: undici only reads them). */
const PLAIN_HEADERS: Record<string, string> = { 'user-agent': USER_AGENT, 'client-version': USER_AGENT };
const FORM_HEADERS: Record<string, string> = { ...PLAIN_HEADERS, 'content-type': 'application/x-www-form-urlencoded' };

/**
 * After a re-login that did not cure a 403 (the user lacks the permission: no token would help),
 * further 403s do not log in again for this long, so that a missing permission cannot turn every
 * heartbeat into a login.
 */
const FUTILE_RELOGIN_BACKOFF_MS = 30_000;

/** Statuses of a node that is up but not serving (starting, overloaded, behind a broken proxy). */
const TRY_NEXT_STATUSES = new Set([502, 503, 504]);

/**
 * HTTP to one Nacos cluster: one keep-alive undici `Pool` per endpoint, at most `maxConcurrency`
 * requests in flight (heartbeats first), a timeout per attempt, and endpoints tried in turn when one
 * cannot be reached, times out or answers 502/503/504. Every Nacos naming call is idempotent
 * (register replaces, deregister of a missing instance succeeds), so trying the next endpoint after a
 * timeout is safe. The endpoint that answered last is tried first next time. A single-endpoint
 * cluster gets a second attempt, which covers a keep-alive connection the server closed meanwhile.
 *
 * With credentials it logs in (see {@link NacosTokenSource}), sends the token, and on a 403 logs in
 * again and retries once (unless a re-login just proved useless: then the 403 stands). Tokens go in the query string for v1 (the only place v1 reads them) and in
 * headers for v3; query strings are never logged.
 *
 * Answers are returned whatever their status: what an error status means is the caller's business.
 */
export class NacosHttp {
  readonly tokens: NacosTokenSource | undefined;
  private readonly semaphore: Semaphore;
  private readonly pools = new Map<string, Pool>();
  private preferred = 0;
  private closed = false;
  private reloginFutileUntil = 0;

  private readonly options: Omit<NacosHttpOptions, 'credentials'>;

  constructor(options: NacosHttpOptions) {
    // The password lives in the token source only.
    const { credentials, ...rest } = options;
    this.options = rest;
    this.semaphore = new Semaphore(options.maxConcurrency);
    this.tokens = credentials
      ? new NacosTokenSource(options.clusterId, credentials.username, credentials.password, (path, form) =>
          this.send({ method: 'POST', path, params: form }, undefined),
        options.log)
      : undefined;
  }

  /** Sends a call: token, concurrency permit, endpoint failover, one re-login on 403. */
  request(call: NacosCall): Promise<NacosAnswer> {
    const dialect = call.dialect;
    if (this.tokens === undefined || dialect === undefined) {
      // Without a token there is nothing to log in again for: one attempt (with endpoint failover).
      try {
        this.assertOpen(call);
      } catch (err) {
        return Promise.reject(err as Error);
      }
      return this.semaphore.run(() => this.send(call, undefined), call.priority);
    }
    return this.requestWithToken(call, dialect, this.tokens);
  }

  private async requestWithToken(call: NacosCall, dialect: 'v1' | 'v3', tokens: NacosTokenSource): Promise<NacosAnswer> {
    for (let attempt = 1; ; attempt += 1) {
      this.assertOpen(call);
      // The token is fetched before taking a permit: a login never waits behind the calls that need it.
      const token = await tokens.token(dialect);
      const answer = await this.semaphore.run(() => this.send(call, token), call.priority);
      if (answer.status === 403) {
        if (attempt === 1 && Date.now() >= this.reloginFutileUntil) {
          this.options.log.info({ path: call.path, endpoint: answer.endpoint }, 'nacos refused the token; logging in again');
          tokens.invalidate(token);
          continue;
        }
        if (attempt > 1) {
          this.reloginFutileUntil = Date.now() + FUTILE_RELOGIN_BACKOFF_MS;
          this.options.log.warn({ path: call.path, endpoint: answer.endpoint }, 'nacos refuses a fresh token too: the user lacks a permission');
        }
      }
      return answer;
    }
  }

  /** Builds the error for an answer the caller cannot accept. */
  error(
    call: Pick<NacosCall, 'method' | 'path'>,
    answer: NacosAnswer,
    code: 'nacos-http-error' | 'nacos-api-error' | 'nacos-bad-response',
    detail: string,
    nacosCode?: number,
  ): NacosRequestError {
    this.options.onRequestError?.(code);
    return new NacosRequestError({
      code,
      clusterId: this.options.clusterId,
      method: call.method,
      path: this.options.contextPath + call.path,
      endpoint: answer.endpoint,
      status: answer.status,
      nacosCode,
      detail,
    });
  }

  /** Permits in use and callers waiting (for metrics and tests). */
  concurrency(): { inUse: number; waiting: number } {
    return this.semaphore.stats();
  }

  /** Closes every pool after the requests in flight; idempotent. Later calls reject with `nacos-closed`. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((p) => p.close()));
  }

  private async send(call: NacosCall, token: string | undefined): Promise<NacosAnswer> {
    const { endpoints, requestTimeoutMs, log } = this.options;
    const path = this.options.contextPath + call.path;
    const form = call.form ?? (call.params ? encodeForm(call.params) : '');
    const hasBody = call.method === 'POST' || call.method === 'PUT';
    const base = hasBody ? FORM_HEADERS : PLAIN_HEADERS;
    const v3Token = token !== undefined && call.dialect === 'v3';
    const headers = v3Token ? { ...base, authorization: `Bearer ${token}`, accesstoken: token } : base;
    let query = token !== undefined && !v3Token ? encodeForm({ accessToken: token }) : '';
    const body = hasBody ? form : undefined;
    if (!hasBody && form !== '') query = query === '' ? form : `${query}&${form}`;
    const target = query !== '' ? `${path}?${query}` : path;

    const attempts = Math.max(endpoints.length, 2);
    const start = this.preferred;
    let lastAnswer: NacosAnswer | undefined;
    let lastError: unknown;
    let lastEndpoint = endpoints[start % endpoints.length] as NacosEndpoint;
    let timeouts = 0;
    for (let i = 0; i < attempts; i += 1) {
      const index = (start + i) % endpoints.length;
      const endpoint = endpoints[index] as NacosEndpoint;
      lastEndpoint = endpoint;
      this.assertOpen(call, endpoint.label);
      try {
        // No per-request AbortSignal (a timer and an abort controller per request): the pool's
        // connect, headers and body timeouts (each requestTimeoutMs) bound every attempt, and at most
        // maxConcurrency requests (= the pool's connections) are in flight, so none waits in the pool.
        const res = await exchange(this.pool(endpoint), { method: call.method, path: target, headers, body });
        const answer = { status: res.status, body: res.body, endpoint: endpoint.label };
        if (TRY_NEXT_STATUSES.has(res.status) && endpoints.length > 1) {
          lastAnswer = answer;
          log.debug({ endpoint: endpoint.label, path, status: res.status }, 'nacos endpoint not serving; trying the next');
          continue;
        }
        this.preferred = index;
        return answer;
      } catch (err) {
        this.assertOpen(call, endpoint.label);
        lastError = err;
        lastAnswer = undefined;
        if (isTimeout(err)) timeouts += 1;
        log.debug({ endpoint: endpoint.label, path, err: describeNetworkError(err) }, 'nacos endpoint failed; trying the next');
      }
    }
    if (lastAnswer) return lastAnswer;
    const timedOut = timeouts === attempts;
    this.options.onRequestError?.(timedOut ? 'nacos-timeout' : 'nacos-unreachable');
    throw new NacosRequestError(
      {
        code: timedOut ? 'nacos-timeout' : 'nacos-unreachable',
        clusterId: this.options.clusterId,
        method: call.method,
        path,
        endpoint: lastEndpoint.label,
        detail: timedOut
          ? `no answer within ${requestTimeoutMs} ms from ${endpoints.map((e) => e.label).join(', ')}`
          : `no endpoint answered (${endpoints.map((e) => e.label).join(', ')}); last error: ${describeNetworkError(lastError)}`,
      },
      { cause: lastError },
    );
  }

  private pool(endpoint: NacosEndpoint): Pool {
    let pool = this.pools.get(endpoint.origin);
    if (!pool) {
      const timeout = this.options.requestTimeoutMs;
      pool = new Pool(endpoint.origin, {
        connections: this.options.maxConcurrency,
        connect: { timeout },
        headersTimeout: timeout,
        bodyTimeout: timeout,
      });
      this.pools.set(endpoint.origin, pool);
    }
    return pool;
  }

  private assertOpen(call: Pick<NacosCall, 'method' | 'path'>, endpoint = this.options.endpoints[0]?.label ?? ''): void {
    if (!this.closed) return;
    throw new NacosRequestError({
      code: 'nacos-closed',
      clusterId: this.options.clusterId,
      method: call.method,
      path: this.options.contextPath + call.path,
      endpoint,
      detail: 'the adapter is closed',
    });
  }
}

/** undici's own timeouts (connect, headers, body), set on the pool from requestTimeoutMs. */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

function isTimeout(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && TIMEOUT_CODES.has(code);
}

/** A network error in one line: code and message, never a URL (it may hold a token). */
function describeNetworkError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${typeof code === 'string' ? `${code} ` : ''}${err.message}${cause}`;
}
