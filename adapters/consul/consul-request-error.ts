/** Why a request to Consul failed. */
export type ConsulRequestErrorCode =
  /** No answer from any endpoint: connection refused or reset, DNS failure. */
  | 'consul-unreachable'
  /** No answer within the request's time. */
  | 'consul-timeout'
  /** 403: the ACL token is unknown ("ACL not found") or lacks a permission. */
  | 'consul-auth-failed'
  /** Another 4xx: Consul refuses the request as sent (an Enterprise parameter on CE, a bad body). */
  | 'consul-refused'
  /** A 5xx: the servers failed it (no leader, no path to the datacenter, a catalog rule such as invalid meta). */
  | 'consul-server-error'
  /** The answer is not what Consul answers (no JSON, no `X-Consul-Index` on a blocking read). */
  | 'consul-bad-answer'
  /** The adapter was closed. */
  | 'consul-closed';

/**
 * A request to a Consul cluster failed. `code` is stable (match on it, never on the message);
 * `status` and `detail` carry Consul's answer when there was one (its errors are plain text).
 */
export class ConsulRequestError extends Error {
  override readonly name = 'ConsulRequestError';

  constructor(
    readonly code: ConsulRequestErrorCode,
    readonly clusterId: string,
    /** `GET /v1/health/service/orders`, ... */
    readonly request: string,
    readonly detail: string,
    readonly status?: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(`consul cluster ${clusterId}: ${request}: ${detail}`, options);
  }
}
