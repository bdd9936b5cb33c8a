/**
 * Redis settings regsync cannot use: a `--redis` URL of an unknown form or with a bad part, or a
 * TLS file (`--redis-ca`, `--redis-cert`, `--redis-key`) that cannot be read. Raised before any
 * connection is made, so a typo stops the command at once; the message names the bad part and
 * never shows a password.
 */
export class RedisConfigError extends Error {
  override readonly name = 'RedisConfigError';
  readonly code = 'redis-config-invalid';

  constructor(
    /** The setting at fault: `--redis` (or a part of it, `--redis host`), or a flag such as `--redis-ca`. */
    readonly setting: string,
    /** What is wrong, for a human (passwords masked). */
    readonly detail: string,
    options?: ErrorOptions,
  ) {
    super(`invalid ${setting}: ${detail}`, options);
  }
}
