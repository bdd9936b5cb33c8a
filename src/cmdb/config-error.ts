/**
 * A CMDB configuration that cannot be used: a bad config file, contradicting command-line options or
 * invalid provider options. Thrown before anything starts, so the operator sees the mistake at once
 * instead of a daemon running without labels.
 *
 * `source` is where the configuration came from (the config file's path, `command line`, or the
 * provider's name), `key` the offending setting (empty for the whole configuration). The message
 * never contains header values or URL credentials.
 */
export class CmdbConfigError extends Error {
  /** Stable code for callers that switch on it. */
  readonly code = 'invalid_cmdb_config';

  constructor(
    readonly source: string,
    readonly key: string,
    readonly problem: string,
    options?: { cause?: unknown },
  ) {
    super(key === '' ? `${source}: ${problem}` : `${source}: ${key}: ${problem}`, options);
    this.name = 'CmdbConfigError';
  }
}
