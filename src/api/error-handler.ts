import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { maskSecretsInText } from '../log.js';
import { ApiError } from './api-error.js';
import { describeViolation, type SchemaViolation } from '../validation/violation.js';

/**
 * Makes every error answer `{"error": {"code", "message"}}`: errors thrown by routes
 * ({@link ApiError}), Fastify's own (body parsing, validation, limits) mapped to codes, unknown
 * routes, and anything unexpected (500 `internal`, logged, with a message that reveals nothing).
 * Errors the router raises before any route runs (over-long or malformed URLs) go through
 * {@link sendApiError} from Fastify's `frameworkErrors` option, and what Node's HTTP parser refuses
 * before a request exists through {@link answerClientError} (`clientErrorHandler`), both set where
 * the app is created.
 */
export function installErrorHandling(app: FastifyInstance, log: Logger, bodyLimitBytes: number): void {
  app.setErrorHandler((error: unknown, request, reply) => sendApiError(error, request, reply, log, bodyLimitBytes));
  app.setNotFoundHandler((request, reply) => {
    const apiError = new ApiError('not_found', `no route for ${request.method} ${request.url.split('?')[0]}`);
    return reply.code(apiError.status).send(apiError.toBody());
  });
}

/** Answers any error in the API's shape; 5xx are logged with the original error (secrets in it masked by the logger). */
export function sendApiError(
  error: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
  log: Logger,
  bodyLimitBytes: number,
): FastifyReply {
  const apiError = toApiError(error, bodyLimitBytes);
  if (apiError.status >= 500) {
    log.error({ err: error, method: request.method, url: request.url, code: apiError.code }, 'request failed');
  }
  const body = apiError.toBody();
  // Messages may quote what a registry or a client library said: secret-named values and bearer
  // credentials in them are masked, whatever masked (or forgot to mask) them before.
  body.error.message = maskSecretsInText(body.error.message);
  return reply.code(apiError.status).type('application/json; charset=utf-8').send(body);
}

/**
 * Fastify's `clientErrorHandler`: answers what Node's HTTP parser refuses before any request
 * exists, in the API's shape: a request head longer than Node's `maxHeaderSize` (431
 * `headers_too_large`), a head or request that came too slowly (408 `request_timeout`), anything
 * else that is not HTTP (400 `invalid_request`). The connection is closed after the answer, as the
 * parser cannot go on on it. Logged at debug only: a client's mistake, and one anybody can send.
 */
export function answerClientError(log: Logger): (error: Error & { code?: string }, socket: Duplex) => void {
  return (error, socket) => {
    // A reset connection has nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const apiError = clientErrorOf(error);
    log.debug({ err: error, code: apiError.code }, 'refused a request the HTTP parser could not read');
    if (socket.writable) {
      const body = JSON.stringify(apiError.toBody());
      socket.write(
        `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status] ?? ''}\r\n` +
          `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy(error);
  };
}

function clientErrorOf(error: Error & { code?: string }): ApiError {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError('headers_too_large', 'the request line and headers are longer than the server accepts', { cause: error });
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError('request_timeout', 'the request did not arrive in time', { cause: error });
    default:
      return new ApiError('invalid_request', 'the request is not valid HTTP', { cause: error });
  }
}

/** Maps any error a request can raise to the API's error. Exported for tests. */
export function toApiError(error: unknown, bodyLimitBytes: number): ApiError {
  if (error instanceof ApiError) return error;
  if (!isFastifyError(error)) return internal(error);
  if (Array.isArray(error.validation)) {
    const violation = error.validation[0] as SchemaViolation | undefined;
    const message =
      violation === undefined ? 'the request is invalid' : describeViolation(error.validationContext ?? 'body', violation);
    return new ApiError('invalid_request', message, { cause: error });
  }
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError('invalid_json', 'the body is not valid JSON', { cause: error });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_json', 'the body is empty but declared as application/json', { cause: error });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('body_too_large', `the body is larger than ${bodyLimitBytes} bytes`, { cause: error });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', 'send the body as application/json', { cause: error });
  }
  const status = error.statusCode ?? 500;
  if (status === 404) return new ApiError('not_found', error.message, { cause: error });
  if (status === 413) return new ApiError('body_too_large', error.message, { cause: error });
  if (status === 414) return new ApiError('uri_too_long', 'the path is longer than the server accepts', { cause: error });
  if (status === 415) return new ApiError('unsupported_media_type', error.message, { cause: error });
  // Fastify's other client errors (bad Content-Length, malformed URL, ...) have safe messages.
  if (status >= 400 && status < 500) return new ApiError('invalid_request', error.message, { cause: error });
  return internal(error);
}

function internal(error: unknown): ApiError {
  return new ApiError('internal', 'internal error; the server log has the details', { cause: error });
}

function isFastifyError(error: unknown): error is FastifyError & { validation?: unknown[]; validationContext?: string } {
  return error instanceof Error && typeof (error as { code?: unknown }).code === 'string';
}
