import { createHash, timingSafeEqual } from 'node:crypto';

/** What a token may do: `read` every GET, `admin` everything. */
export type ApiScope = 'read' | 'admin';

/** Every scope, weakest first. */
export const API_SCOPES: readonly ApiScope[] = ['read', 'admin'];

/** One configured API token. `name` says whose it is in logs and `whoami`; the token itself is never shown. */
export interface ApiToken {
  name: string;
  scope: ApiScope;
  token: string;
}

/** Who a request is, once its token was checked. */
export interface ApiPrincipal {
  name: string;
  scope: ApiScope;
}

/** Token names: short, printable, safe in logs. */
export const TOKEN_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$';

/**
 * Tokens: RFC 6750's `b64token` (what an `Authorization: Bearer` header can carry), at least
 * {@link MIN_TOKEN_LENGTH} characters. `:` and `,` are not in it, so the `REGSYNC_API_TOKENS` list
 * needs no quoting.
 */
export const TOKEN_PATTERN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** The shortest token accepted: 16 characters keep guessing out of reach of any rate limit. */
export const MIN_TOKEN_LENGTH = 16;

/** The longest token accepted (a header line stays small). */
export const MAX_TOKEN_LENGTH = 512;

/** Why a token value is unusable, or undefined when it is fine. Never quotes the value. */
export function tokenProblem(token: string): string | undefined {
  if (token.length < MIN_TOKEN_LENGTH) return `the token is shorter than ${MIN_TOKEN_LENGTH} characters`;
  if (token.length > MAX_TOKEN_LENGTH) return `the token is longer than ${MAX_TOKEN_LENGTH} characters`;
  if (!TOKEN_PATTERN.test(token)) return 'the token may only contain letters, digits and - . _ ~ + / (and = at its end)';
  return undefined;
}

/**
 * The configured tokens, kept as SHA-256 digests only, so the values themselves do not linger in
 * objects that could end up in a log or a heap dump of the app's state.
 *
 * {@link verify} compares the digest of what a client sent with every configured digest using
 * `timingSafeEqual`, always all of them: the time taken says nothing about which token, or how
 * much of one, matched.
 */
export class ApiTokenSet {
  private readonly entries: readonly { digest: Buffer; principal: ApiPrincipal }[];

  constructor(tokens: readonly ApiToken[]) {
    this.entries = tokens.map((t) => ({ digest: digestOf(t.token), principal: { name: t.name, scope: t.scope } }));
  }

  /** Whether any token is configured; without one the API is open. */
  get enabled(): boolean {
    return this.entries.length > 0;
  }

  /** How many tokens of each scope, for the start-up log line. */
  counts(): Record<ApiScope, number> {
    const counts: Record<ApiScope, number> = { read: 0, admin: 0 };
    for (const e of this.entries) counts[e.principal.scope] += 1;
    return counts;
  }

  /** The principal whose token `presented` is, or undefined. */
  verify(presented: string): ApiPrincipal | undefined {
    const digest = digestOf(presented);
    let found: ApiPrincipal | undefined;
    for (const entry of this.entries) {
      // No early exit: every entry is compared whatever matched before.
      if (timingSafeEqual(entry.digest, digest) && found === undefined) found = entry.principal;
    }
    return found;
  }
}

function digestOf(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}
