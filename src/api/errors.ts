/**
 * Every error code the REST API answers, with its HTTP status and what it means. Error bodies are
 * always `{"error": {"code": "<code>", "message": "<what went wrong, for a human>"}}`; clients
 * branch on `code`, never on `message`.
 *
 * This is the single place codes are defined: {@link ApiErrorCode} is derived from it, so code that
 * names a code missing here does not compile, and `errors.test.ts` fails if the app's source uses a
 * code that is not listed (or lists one nothing uses).
 */
export const API_ERRORS = {
  invalid_json: { status: 400, meaning: 'The body is not valid JSON (or is empty while declared as JSON).' },
  invalid_request: {
    status: 400,
    meaning: 'The body, path or query breaks the route schema: a missing, unknown or mistyped field; the message names it.',
  },
  id_mismatch: { status: 400, meaning: 'The id in the body differs from the id in the path.' },
  unknown_cluster: { status: 400, meaning: 'A task names a source or destination cluster that does not exist.' },
  same_cluster: { status: 400, meaning: 'A task has the same cluster as source and destination.' },
  invalid_batch: {
    status: 400,
    meaning: 'A batch request names tasks that cannot be created or do not exist; nothing was done. The message lists every problem by position.',
  },
  invalid_rules: {
    status: 400,
    meaning: "A task's scope or rules cannot work: a wildcard or filter where it means nothing, mapping rules that would make two services one, or a pattern that is malformed or over the limits; the message says which.",
  },
  unauthorized: {
    status: 401,
    meaning: 'The API has tokens and the request carries none, or one that is not valid: send `Authorization: Bearer <token>`.',
  },
  forbidden: { status: 403, meaning: "The token's scope does not allow this: a read token can only read (GET); changes need an admin token." },
  not_found: { status: 404, meaning: 'No route matches the method and path.' },
  cluster_not_found: { status: 404, meaning: 'No cluster has this id.' },
  dns_not_running: { status: 404, meaning: 'This process runs no DNS server (`regsync up --dns-listen`, or `regsync dns`).' },
  task_not_found: { status: 404, meaning: 'No task has this id.' },
  cluster_exists: { status: 409, meaning: 'A cluster with this id already exists (use PUT to replace it).' },
  cluster_in_use: { status: 409, meaning: 'The cluster cannot be deleted while tasks use it; the message names them.' },
  task_exists: {
    status: 409,
    meaning: 'A task with this id exists, or another task already syncs the same service between the same clusters.',
  },
  task_paused: { status: 409, meaning: 'The task is paused; resume it before asking for a resync.' },
  request_timeout: { status: 408, meaning: 'The request head or body did not arrive in time; the connection is closed.' },
  body_too_large: { status: 413, meaning: 'The body is larger than the configured limit.' },
  uri_too_long: { status: 414, meaning: 'A path segment (such as an id) is far longer than any valid one.' },
  unsupported_media_type: { status: 415, meaning: 'Bodies must be sent as application/json.' },
  rate_limited: {
    status: 429,
    meaning: 'This client address sent more requests than the rate limit allows; `Retry-After` says when to try again.',
  },
  headers_too_large: {
    status: 431,
    meaning: 'The request line and headers together are longer than the server accepts (16 KiB, Node\'s default); the connection is closed.',
  },
  internal: { status: 500, meaning: 'An unexpected failure; the server log has the details.' },
  cleanup_failed: {
    status: 502,
    meaning: 'Removing the instances a task wrote failed (for a delete, or a replace that changes what it copies); the task is kept, running as before, so that the command can be retried.',
  },
  resync_failed: { status: 502, meaning: 'The sync engine did not accept the resync request.' },
  not_ready: { status: 503, meaning: 'The server cannot reach Redis, so it cannot serve requests.' },
} as const satisfies Record<string, { status: number; meaning: string }>;

/** A code of {@link API_ERRORS}. */
export type ApiErrorCode = keyof typeof API_ERRORS;

/** The body of every error response. */
export interface ApiErrorBody {
  error: { code: ApiErrorCode; message: string };
}
