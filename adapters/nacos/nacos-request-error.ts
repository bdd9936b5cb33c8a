/**
 * Stable reasons a request to a Nacos cluster failed; callers branch on these, never on messages.
 * - `nacos-unreachable`: no endpoint could be connected to (or every connection broke before an answer).
 * - `nacos-timeout`: every endpoint tried took longer than `requestTimeoutMs`.
 * - `nacos-http-error`: the server answered with an error status (see `status`, `nacosCode`).
 * - `nacos-api-error`: the server answered 2xx but its body reports a failure (v3 `code` not 0, unknown beat code).
 * - `nacos-bad-response`: the answer could not be understood (not JSON, missing fields).
 * - `nacos-closed`: the adapter was closed.
 */
export type NacosRequestErrorCode =
  | 'nacos-unreachable'
  | 'nacos-timeout'
  | 'nacos-http-error'
  | 'nacos-api-error'
  | 'nacos-bad-response'
  | 'nacos-closed';

/** What went wrong, where: enough for an operator to find the failing call without a debugger. */
export interface NacosRequestErrorInit {
  code: NacosRequestErrorCode;
  clusterId: string;
  method: string;
  /** Request path without the query string (which may carry an access token). */
  path: string;
  /** `host:port` of the endpoint that answered last (or was tried last). */
  endpoint: string;
  /** HTTP status when the server answered. */
  status?: number | undefined;
  /** Nacos' own error code (v3 `code`, v1 beat `code`) when the answer carried one. */
  nacosCode?: number | undefined;
  /** What the server (or the network) said. */
  detail: string;
}

/**
 * One failed call to a Nacos cluster. The message names the cluster, method, path, endpoint, status
 * and the server's own words, and never the access token or the password.
 */
export class NacosRequestError extends Error {
  override readonly name = 'NacosRequestError';
  readonly code: NacosRequestErrorCode;
  readonly clusterId: string;
  readonly method: string;
  readonly path: string;
  readonly endpoint: string;
  readonly status: number | undefined;
  readonly nacosCode: number | undefined;
  /** What the server (or the network) said, as in the message. */
  readonly detail: string;

  constructor(init: NacosRequestErrorInit, options?: { cause?: unknown }) {
    const status = init.status === undefined ? '' : ` HTTP ${init.status}`;
    const nacosCode = init.nacosCode === undefined ? '' : ` (code ${init.nacosCode})`;
    super(`nacos cluster ${init.clusterId}: ${init.method} ${init.path} at ${init.endpoint} failed:${status}${nacosCode} ${init.detail}`, options);
    this.code = init.code;
    this.clusterId = init.clusterId;
    this.method = init.method;
    this.path = init.path;
    this.endpoint = init.endpoint;
    this.status = init.status;
    this.nacosCode = init.nacosCode;
    this.detail = init.detail;
  }

  /**
   * The same failure with what the call was needed for put before the server's words (say, which
   * task scope needs a list the server refuses), so that an operator reading a task's status knows
   * why regsync asked. Code, status and endpoint stay; this error becomes the cause.
   */
  explained(purpose: string): NacosRequestError {
    return new NacosRequestError(
      {
        code: this.code,
        clusterId: this.clusterId,
        method: this.method,
        path: this.path,
        endpoint: this.endpoint,
        status: this.status,
        nacosCode: this.nacosCode,
        detail: `${purpose}: ${this.detail}`,
      },
      { cause: this },
    );
  }
}
