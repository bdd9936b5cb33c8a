/** Why a request to Eureka failed. */
export type EurekaRequestErrorCode =
  /** No answer from any endpoint: connection refused or reset. */
  | 'eureka-unreachable'
  /** No answer within the request's time. */
  | 'eureka-timeout'
  /** 401 or 403: the basic credentials are missing or wrong. */
  | 'eureka-auth-failed'
  /** Another 4xx: the server refuses the request (a body it cannot read). */
  | 'eureka-refused'
  /** A 5xx. */
  | 'eureka-server-error'
  /** The answer is not the JSON Eureka writes. */
  | 'eureka-bad-answer'
  /** The adapter was closed. */
  | 'eureka-closed';

/** A request to a Eureka cluster failed; `code` is stable, `status` is the server's when it answered. */
export class EurekaRequestError extends Error {
  override readonly name = 'EurekaRequestError';

  constructor(
    readonly code: EurekaRequestErrorCode,
    readonly clusterId: string,
    /** `GET /apps/ORDERS`, ... */
    readonly request: string,
    readonly detail: string,
    readonly status?: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(`eureka cluster ${clusterId}: ${request}: ${detail}`, options);
  }
}
