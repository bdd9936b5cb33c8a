import { API_ERRORS, type ApiErrorBody, type ApiErrorCode } from './errors.js';

/**
 * An error the API answers as `{"error": {"code", "message"}}` with the status the code has in
 * {@link API_ERRORS}. Route handlers throw it; the app's error handler turns it (and Fastify's own
 * errors, mapped to codes) into the response.
 *
 * The message is shown to clients: it must never contain a secret.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';

  constructor(
    readonly code: ApiErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }

  /** The HTTP status of the code. */
  get status(): number {
    return API_ERRORS[this.code].status;
  }

  /** The response body. */
  toBody(): ApiErrorBody {
    return { error: { code: this.code, message: this.message } };
  }
}
