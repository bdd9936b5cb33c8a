import { randomBytes, timingSafeEqual } from 'node:crypto';

/** The outcome of checking a request's credentials. */
export type AuthResult = { ok: true; username: string | undefined } | { ok: false; message: string };

export interface Credentials {
  accessToken?: string | undefined;
  username?: string | undefined;
  password?: string | undefined;
}

/**
 * Users and access tokens of the embedded registry. With no users configured every request is
 * allowed, as on a Nacos server with `nacos.core.auth.enabled=false`. Tokens are opaque random
 * strings held in memory: a restart logs everybody out, which clients handle by logging in again.
 */
export class RegistryAuth {
  private readonly tokens = new Map<string, { username: string; expiresAt: number }>();

  constructor(
    private readonly users: ReadonlyMap<string, string>,
    readonly tokenTtlSeconds = 18_000,
  ) {}

  get enabled(): boolean {
    return this.users.size > 0;
  }

  /** Issues a token for valid credentials, or undefined. */
  login(username: string, password: string): { accessToken: string; tokenTtl: number } | undefined {
    if (!this.passwordMatches(username, password)) return undefined;
    const accessToken = randomBytes(24).toString('base64url');
    this.tokens.set(accessToken, { username, expiresAt: Date.now() + this.tokenTtlSeconds * 1000 });
    this.forgetExpired();
    return { accessToken, tokenTtl: this.tokenTtlSeconds };
  }

  /** Accepts a valid token, or username + password sent with the request (what the Node SDK does). */
  check(credentials: Credentials): AuthResult {
    if (!this.enabled) return { ok: true, username: undefined };
    if (credentials.accessToken) {
      const token = this.tokens.get(credentials.accessToken);
      if (!token) return { ok: false, message: 'token invalid!' };
      if (token.expiresAt <= Date.now()) {
        this.tokens.delete(credentials.accessToken);
        return { ok: false, message: 'token expired!' };
      }
      return { ok: true, username: token.username };
    }
    if (credentials.username !== undefined && credentials.password !== undefined) {
      return this.passwordMatches(credentials.username, credentials.password)
        ? { ok: true, username: credentials.username }
        : { ok: false, message: 'unknown user!' };
    }
    return { ok: false, message: 'user not found!' };
  }

  private passwordMatches(username: string, password: string): boolean {
    const expected = this.users.get(username);
    if (expected === undefined) return false;
    const a = Buffer.from(expected);
    const b = Buffer.from(password);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  private forgetExpired(): void {
    const now = Date.now();
    for (const [token, t] of this.tokens) if (t.expiresAt <= now) this.tokens.delete(token);
  }
}

/** Parses `name:password` pairs as given on the command line. */
export function parseUsers(pairs: readonly string[]): Map<string, string> {
  const users = new Map<string, string>();
  for (const pair of pairs) {
    const at = pair.indexOf(':');
    if (at <= 0 || at === pair.length - 1) throw new Error(`invalid user "${pair.split(':')[0]}": expected name:password`);
    users.set(pair.slice(0, at), pair.slice(at + 1));
  }
  return users;
}
