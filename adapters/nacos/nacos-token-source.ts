import type { Logger } from 'pino';
import { NacosAuthError } from './nacos-auth-error.js';
import { NacosRequestError } from './nacos-request-error.js';
import type { NacosAnswer } from './nacos-call.js';
import { excerpt, isRecord, parseJson } from './wire.js';

/** Sends a login form to the cluster (any endpoint), without authentication or a concurrency permit. */
export type LoginPost = (path: string, form: Record<string, string>) => Promise<NacosAnswer>;

/** Nacos' default token lifetime, assumed when a login answer does not say. */
const DEFAULT_TTL_SECONDS = 18_000;
/** Share of the lifetime after which a token is replaced before it is used again. */
const REFRESH_AT = 0.8;

interface Token {
  value: string;
  refreshAt: number;
}

/**
 * Holds the access token of one cluster: logs in on first use, logs in again once 80% of the
 * token's lifetime has passed (checked at each use, so an idle adapter sends nothing), and forgets
 * a token the server refused so that the next use logs in afresh. Concurrent callers share one login.
 *
 * The password stays in this object: it goes in the login form body only, never in a query string,
 * a log line or an error message; the token is never logged either.
 */
export class NacosTokenSource {
  private current: Token | undefined;
  private pending: Promise<string> | undefined;
  private logins = 0;
  /** A runtime-private field: not even `util.inspect` of the adapter shows it. */
  readonly #password: string;

  constructor(
    private readonly clusterId: string,
    readonly username: string,
    password: string,
    private readonly post: LoginPost,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.#password = password;
  }

  /** Successful logins so far (for metrics and tests). */
  get loginCount(): number {
    return this.logins;
  }

  /** A token fit for use now; `dialect` picks the login API (v3 falls back to v1 on 404). */
  async token(dialect: 'v1' | 'v3'): Promise<string> {
    const current = this.current;
    if (current && this.now() < current.refreshAt) return current.value;
    this.pending ??= this.login(dialect).finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  /** Drops `token` if it is still the current one (the server answered 403 to it). */
  invalidate(token: string): void {
    if (this.current?.value === token) this.current = undefined;
  }

  private async login(dialect: 'v1' | 'v3'): Promise<string> {
    const started = this.now();
    const form = { username: this.username, password: this.#password };
    let path = dialect === 'v3' ? '/v3/auth/user/login' : '/v1/auth/login';
    let answer = await this.post(path, form);
    if (answer.status === 404 && dialect === 'v3') {
      path = '/v1/auth/login';
      answer = await this.post(path, form);
    }
    if (answer.status === 401 || answer.status === 403) {
      throw new NacosAuthError(this.clusterId, this.username, answer.endpoint, answer.status, describeRefusal(answer.body));
    }
    const badAnswer = (detail: string, code: 'nacos-http-error' | 'nacos-bad-response') =>
      new NacosRequestError({
        code,
        clusterId: this.clusterId,
        method: 'POST',
        path,
        endpoint: answer.endpoint,
        status: answer.status,
        detail: `login as '${this.username}': ${detail}`,
      });
    if (answer.status < 200 || answer.status >= 300) throw badAnswer(describeRefusal(answer.body), 'nacos-http-error');
    let body: unknown;
    try {
      body = parseJson(answer.body);
    } catch {
      // Never quote a login answer: it may hold a token.
      throw badAnswer('the answer is not JSON', 'nacos-bad-response');
    }
    // Nacos 3 may wrap the answer as {code, message, data}.
    const payload = isRecord(body) && isRecord(body.data) && body.accessToken === undefined ? body.data : body;
    if (!isRecord(payload) || typeof payload.accessToken !== 'string' || payload.accessToken === '') {
      throw badAnswer('the answer carries no accessToken', 'nacos-bad-response');
    }
    const ttl = Number(payload.tokenTtl);
    const ttlMs = (Number.isFinite(ttl) && ttl > 0 ? ttl : DEFAULT_TTL_SECONDS) * 1000;
    this.current = { value: payload.accessToken, refreshAt: started + ttlMs * REFRESH_AT };
    this.logins += 1;
    this.log.info({ username: this.username, endpoint: answer.endpoint, tokenTtlMs: ttlMs }, 'logged in to nacos');
    return payload.accessToken;
  }
}

/** The server's reason for a refused login, from a text or a v3 JSON answer. */
function describeRefusal(body: string): string {
  try {
    const parsed = JSON.parse(body) as unknown;
    if (isRecord(parsed) && typeof parsed.message === 'string') return parsed.message;
  } catch {
    // plain text
  }
  return excerpt(body);
}
