/**
 * A DNS setting regsync cannot serve: a zone that is not a valid DNS name or is reserved
 * (`local` and anything under it, which multicast DNS owns, RFC 6762; `cluster.local`, which
 * Kubernetes owns), or an alias that is not one valid DNS label. Thrown when the catalogue is
 * configured, so a bad setting stops start-up instead of serving names nobody can resolve.
 */
export class DnsConfigError extends Error {
  override readonly name = 'DnsConfigError';
  /** A stable code for callers and logs. */
  readonly code = 'dns-config-invalid';

  constructor(
    /** The setting at fault, e.g. `zone` or `aliases.echo`. */
    readonly field: string,
    detail: string,
  ) {
    super(`dns ${field}: ${detail}`);
  }
}
