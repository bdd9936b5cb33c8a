/// <reference lib="dom" />
import type { Identity } from './types.js';

/** sessionStorage key of the API token: kept for the tab's life, gone when it closes. */
const TOKEN_KEY = 'regsync.apiToken';

/**
 * An answer other than 2xx, or no answer. `message` is the API's own message
 * (`{"error": {"code", "message"}}`), shown to the operator as it is.
 */
export class ApiRequestError extends Error {
  override readonly name = 'ApiRequestError';

  constructor(
    /** HTTP status; 0 when the server could not be reached. */
    readonly status: number,
    /** The API's error code, `unreachable`, or `http_<status>` for an answer not in the API's shape. */
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Calls the REST API relative to the page (so that a reverse proxy may serve both under a path),
 * with the token as `Authorization: Bearer` when there is one. A 401 also calls `onUnauthorized`,
 * which asks for a token.
 */
export class ApiClient {
  /** Called on every 401, after the stored token (if any) was dropped. */
  onUnauthorized: (error: ApiRequestError) => void = () => undefined;

  constructor(private readonly base: URL) {}

  get token(): string | null {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  set token(value: string | null) {
    if (value === null || value === '') sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, value);
  }

  /** The URL of an API path such as `tasks/abc` (relative to `/api/v1/`). */
  url(path: string): URL {
    // `./` first: `tasks:summary` alone would parse as a URL of scheme `tasks:`.
    return new URL(`./${path}`, this.base);
  }

  /** Headers every request carries. */
  headers(): Record<string, string> {
    const token = this.token;
    return token ? { authorization: `Bearer ${token}` } : {};
  }

  async get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** POST with a JSON body (`{}` for actions that take none). */
  async post<T>(path: string, body: unknown = {}): Promise<T> {
    return this.request<T>('POST', path, body);
  }

  async delete(path: string): Promise<void> {
    await this.request<unknown>('DELETE', path);
  }

  /** `GET auth/whoami`; a server without authentication (404) is open. Throws on 401. */
  async whoami(): Promise<Identity> {
    try {
      return await this.get<Identity>('auth/whoami');
    } catch (err) {
      if (err instanceof ApiRequestError && err.status === 404) return { scope: 'open' };
      throw err;
    }
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json', ...this.headers() };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(this.url(path), {
        method,
        headers,
        cache: 'no-store',
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (err) {
      throw new ApiRequestError(0, 'unreachable', `cannot reach the API: ${err instanceof Error ? err.message : String(err)}`);
    }
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (res.ok) return parsed as T;
    const error = (parsed as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
    const failure = new ApiRequestError(
      res.status,
      typeof error?.code === 'string' ? error.code : `http_${res.status}`,
      typeof error?.message === 'string' ? error.message : `${method} ${path}: HTTP ${res.status} ${res.statusText}`.trim(),
    );
    if (res.status === 401) {
      this.token = null;
      this.onUnauthorized(failure);
    }
    throw failure;
  }
}

/** The message to show for any failure. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
