/**
 * A naming request the gRPC server refuses before or while handling it. `errorCode` is the Nacos code
 * the answer carries (400 bad parameter or wrong service kind, 403 no right, 500 server error such as
 * a blank group; 50310/50311 over a fuzzy-watch limit); the answer is the handler's own response type with `resultCode` 500, as Nacos'
 * request filters and handlers answer.
 */
export class GrpcRequestError extends Error {
  override readonly name = 'GrpcRequestError';
  constructor(
    readonly errorCode: 400 | 403 | 500 | 50310 | 50311,
    message: string,
  ) {
    super(message);
  }
}
