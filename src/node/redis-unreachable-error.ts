/** What stopped a Redis connection from becoming ready, as far as it can be told. */
export type RedisFailure = 'refused' | 'tls' | 'auth' | 'no-sentinel' | 'no-master' | 'timeout' | 'other';

/**
 * The first connection of a process did not become ready within its bound (`--redis-connect-timeout-ms`),
 * or failed in a way retrying cannot mend (a wrong password, a TLS handshake that fails, a master
 * name no sentinel knows). The process stops with this rather than wait in silence; `failure` says
 * what went wrong for callers, the message says it for a human, with the URL's password masked.
 */
export class RedisUnreachableError extends Error {
  override readonly name = 'RedisUnreachableError';
  readonly code = 'redis-unreachable';

  constructor(
    /** The URL as given, password masked. */
    readonly url: string,
    readonly failure: RedisFailure,
    /** What failed, for a human. */
    readonly detail: string,
    options?: ErrorOptions,
  ) {
    super(`cannot reach Redis at ${url}: ${detail}`, options);
  }
}
