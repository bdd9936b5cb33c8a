/**
 * A request the server wrote on a connection's bi-stream (push, client detection) that got no answer:
 * `timeout` when none came in time, `closed` when the stream ended first or could not be written.
 */
export class ServerRequestError extends Error {
  override readonly name = 'ServerRequestError';
  constructor(
    readonly code: 'timeout' | 'closed',
    message: string,
  ) {
    super(message);
  }
}
