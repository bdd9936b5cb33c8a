import { pino, type DestinationStream, type Logger, type LevelWithSilent, type LoggerOptions } from 'pino';

/** What a redacted value is replaced with. */
export const REDACTED = '[redacted]';

/**
 * Fields that hold secrets wherever they appear in a log line's object (at the top, or one or two
 * levels down): passwords, tokens, and request headers that carry credentials. pino's paths name
 * exact positions (`*` is one level), hence the repetitions.
 */
export const REDACT_PATHS: readonly string[] = [
  ...['password', 'token', 'accessToken', 'apiToken', 'apiTokens', 'tokens', 'authorization', 'Authorization', 'cookie'].flatMap((field) => [
    field,
    `*.${field}`,
    `*.*.${field}`,
  ]),
  'headers.authorization',
  'headers.Authorization',
  'headers.cookie',
  '*.headers.authorization',
  '*.headers.Authorization',
  '*.headers.cookie',
  '*.headers["x-api-token"]',
];

/**
 * Replaces a secret. Numbers and booleans are kept: a shard lease's fencing `token` (a number) is
 * no secret and worth seeing; an API token is always a string.
 */
function censor(value: unknown): unknown {
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return value;
  if (typeof value === 'object' && !Array.isArray(value)) {
    // A field such as `tokens: {read: 1, admin: 2}` (counts): keep numbers, hide anything else.
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.every(([, v]) => typeof v === 'number')) return value;
  }
  return REDACTED;
}

/**
 * `key=value` / `key: value` pairs whose key names a secret, and bearer credentials, inside free text
 * (error messages quote URLs and request lines: `...?username=sync&password=...`).
 */
const SECRET_IN_TEXT = /((?:password|passwd|pwd|secret|token|access_?token|api_?key)["']?\s*[:=]\s*["']?)([^\s"'&,;)]+)/gi;
/** Credentials are long; "bearer token" in a sentence is not one. */
const BEARER_IN_TEXT = /(Bearer\s+)[A-Za-z0-9\-._~+/]{12,}=*/gi;

/**
 * Masks the values of secret-named `key=value` pairs and bearer tokens in `text`. A second line of
 * defence behind field redaction, for messages that quote what a client library or server said;
 * a secret quoted without its key cannot be recognised and must not be logged in the first place.
 */
export function maskSecretsInText(text: string): string {
  return text.replace(SECRET_IN_TEXT, `$1${REDACTED}`).replace(BEARER_IN_TEXT, `$1${REDACTED}`);
}

/** Masks secrets in the strings of a serialized value, a few levels down. */
function maskStrings(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return maskSecretsInText(value);
  if (depth <= 0 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => maskStrings(v, depth - 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = maskStrings(v, depth - 1);
  return out;
}

/** Masks secrets in the string fields of a log line's object (plain objects and arrays only: errors have their serializer). */
function maskFields(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return maskSecretsInText(value);
  if (depth <= 0 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => maskFields(v, depth - 1));
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = maskFields(v, depth - 1);
  return out;
}

/** pino's error serializer, with secrets masked in the message, the stack and the error's own fields. */
function errSerializer(err: unknown): unknown {
  return maskStrings(pino.stdSerializers.err(err as Error), 3);
}

/** pino options of every regsync logger: name, level, redaction. Exported for tests that log to a stream. */
export function loggerOptions(level: LevelWithSilent): LoggerOptions {
  return {
    name: 'regsync',
    level,
    redact: { paths: [...REDACT_PATHS], censor },
    serializers: { err: errSerializer },
    // Fields too: a URL with `?password=...` or a quoted header in any field is masked.
    formatters: { log: (object) => maskFields(object, 3) as Record<string, unknown> },
    hooks: {
      // Messages too: `log.warn(`... ${err.message}`)` must not carry a quoted secret into the log.
      logMethod(args, method) {
        method.apply(this, args.map((a) => (typeof a === 'string' ? maskSecretsInText(a) : a)) as Parameters<typeof method>);
      },
    },
  };
}

/**
 * The process logger: JSON lines on stderr (stdout stays free for command output), level from
 * `REGSYNC_LOG_LEVEL` (default `info`). Components take a child with their own fields. Secrets are
 * redacted by field name (see {@link REDACT_PATHS}); messages must not contain any either.
 * `destination` (default stderr) lets tests read every line.
 */
export function createLogger(level: LevelWithSilent | undefined = undefined, destination?: DestinationStream): Logger {
  const fromEnv = process.env.REGSYNC_LOG_LEVEL as LevelWithSilent | undefined;
  return pino(loggerOptions(level ?? fromEnv ?? 'info'), destination ?? pino.destination(2));
}

/** A logger that writes nothing, for embedding in tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
