/**
 * A request body nested deeper than the API takes. Carries a 4xx `statusCode` and a stable `code`,
 * as Fastify's own body errors do, so that both error shapes of the API (native and nacos-sync)
 * answer it 400 rather than treating it as a failed command.
 */
export class BodyDepthError extends Error {
  override readonly name = 'BodyDepthError';
  readonly code = 'body-too-deep';
  readonly statusCode = 400;

  constructor(readonly maxDepth: number) {
    super(`the body is nested more than ${maxDepth} levels deep`);
  }
}
