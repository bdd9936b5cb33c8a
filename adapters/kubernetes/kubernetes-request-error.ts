/** Why a request to the Kubernetes API failed. */
export type KubernetesRequestErrorCode =
  /** No answer: connection refused or reset, DNS failure. */
  | 'kubernetes-unreachable'
  /** No answer within `requestTimeoutMs`. */
  | 'kubernetes-timeout'
  /** The server answered with an error status (`status`, `reason` say which). */
  | 'kubernetes-http-error'
  /** The Service and EndpointSlice caches are not filled yet, or their watch is failing: a read would not be the truth. */
  | 'kubernetes-not-ready'
  /** The adapter was closed. */
  | 'kubernetes-closed';

export interface KubernetesRequestErrorInit {
  code: KubernetesRequestErrorCode;
  clusterId: string;
  /** `list`, `watch`, `get`, `create`, `replace`, `delete`, `read`. */
  verb: string;
  /** What was asked for: `services`, `endpointslices default/orders-regsync-0`, ... */
  target: string;
  status?: number | undefined;
  /** The Kubernetes Status `reason` (`Conflict`, `AlreadyExists`, `NotFound`, `Expired`, ...). */
  reason?: string | undefined;
  detail: string;
  cause?: unknown;
}

/**
 * A request to the Kubernetes API of a cluster failed. `code` is stable (match on it, never on the
 * message); `status` and `reason` carry the server's answer when there was one.
 */
export class KubernetesRequestError extends Error {
  override readonly name = 'KubernetesRequestError';
  readonly code: KubernetesRequestErrorCode;
  readonly clusterId: string;
  readonly verb: string;
  readonly target: string;
  readonly status: number | undefined;
  readonly reason: string | undefined;

  constructor(init: KubernetesRequestErrorInit) {
    super(`kubernetes cluster ${init.clusterId}: ${init.verb} ${init.target}: ${init.detail}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.clusterId = init.clusterId;
    this.verb = init.verb;
    this.target = init.target;
    this.status = init.status;
    this.reason = init.reason;
  }

  /** A write lost a race with another writer (409 Conflict / AlreadyExists, or 404 on something just read): read again and retry. */
  get isConflict(): boolean {
    return this.status === 409 || (this.status === 404 && this.verb !== 'create' && this.verb !== 'get' && this.verb !== 'list');
  }
}
