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
/** HTTP basic credentials (`Basic base64(user:password)`), as a quoted request header shows them. */
const BASIC_IN_TEXT = /(Basic\s+)[A-Za-z0-9+/]{8,}={0,2}/g;
/** The password of a URL's user info (`redis://user:password@host`, `http://u:p@host`). */
const URL_PASSWORD_IN_TEXT = /(\b[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s/?#@:]*:)[^\s/?#@]+@/g;

/**
 * Secret values this process holds (the Redis URL's passwords, the clusters' passwords and tokens),
 * masked wherever they appear in text: a registry or client library may quote one without a key
 * that would name it (`AUTH default s3cret`, a token in a path). Longest first, so that a secret
 * containing another is masked whole. Values shorter than {@link MIN_KNOWN_SECRET} are left to the
 * rules above: masking every "abc" of every line would hide more than it protects.
 */
const knownSecrets = new Set<string>();
let knownSorted: string[] = [];
/** The shortest secret masked by value. */
export const MIN_KNOWN_SECRET = 6;
/** Most secrets remembered (the oldest are forgotten first): clusters come and go in a long-lived process. */
const MAX_KNOWN_SECRETS = 4096;

/**
 * Remembers secret values that {@link maskSecretsInText}, every log line and the API's messages
 * mask wherever they appear, percent-encoded too (as a query string quotes them). Called where a
 * secret enters the process: the Redis URL when it is taken apart, a cluster record when
 * the store decrypts it. Nothing is ever forgotten but the oldest beyond a few thousand.
 */
export function rememberSecrets(...values: readonly (string | undefined)[]): void {
  let changed = false;
  for (const value of values) {
    if (value === undefined || value.length < MIN_KNOWN_SECRET) continue;
    for (const form of new Set([value, encodeURIComponent(value)])) {
      if (knownSecrets.has(form)) continue;
      knownSecrets.add(form);
      changed = true;
    }
  }
  if (!changed) return;
  while (knownSecrets.size > MAX_KNOWN_SECRETS) knownSecrets.delete(knownSecrets.values().next().value as string);
  knownSorted = [...knownSecrets].sort((a, b) => b.length - a.length);
}

/**
 * Masks credentials in `text`: the values of secret-named `key=value` pairs, bearer and basic
 * credentials, the password of a URL's user info, and every secret value the process remembered
 * ({@link rememberSecrets}). A second line of defence behind field redaction, for messages that
 * quote what a client library or server said. Used by every log line and by the API's error
 * messages and events.
 */
export function maskSecretsInText(text: string): string {
  let masked = text;
  for (const secret of knownSorted) if (masked.includes(secret)) masked = masked.split(secret).join(REDACTED);
  return masked
    .replace(SECRET_IN_TEXT, `$1${REDACTED}`)
    .replace(BEARER_IN_TEXT, `$1${REDACTED}`)
    .replace(BASIC_IN_TEXT, `$1${REDACTED}`)
    .replace(URL_PASSWORD_IN_TEXT, '$1***@');
}

/** Redis commands that carry credentials, and where: what {@link redactRedisArgs} hides. */
const CONFIG_SECRETS = new Set(['requirepass', 'masterauth', 'sentinel-pass', 'auth-pass']);

/**
 * The arguments of a Redis command with every credential replaced: `AUTH [user] <password>`,
 * `HELLO 3 AUTH <user> <password>`, `MIGRATE ... AUTH <password>` / `AUTH2 <user> <password>`,
 * `CONFIG SET requirepass|masterauth <value>`, `ACL SETUSER <user> ><password> #<hash>`,
 * `SENTINEL SET <master> auth-pass <value>`, `SENTINEL CONFIG SET sentinel-pass <value>`. ioredis
 * puts the failed command on its errors (`err.command = {name, args}`): a wrong password would
 * otherwise be logged with the reply that refused it. Other arguments (keys, values) are kept.
 */
export function redactRedisArgs(name: string, args: readonly unknown[]): unknown[] {
  const out = [...args];
  const word = (i: number): string => (typeof out[i] === 'string' ? (out[i] as string).toLowerCase() : '');
  const hide = (i: number): void => {
    if (i >= 0 && i < out.length) out[i] = REDACTED;
  };
  switch (name.toLowerCase()) {
    case 'auth':
      hide(out.length - 1);
      break;
    case 'hello':
    case 'migrate':
      for (let i = 0; i < out.length; i += 1) {
        if (word(i) === 'auth') hide(name.toLowerCase() === 'hello' ? i + 2 : i + 1);
        if (word(i) === 'auth2') hide(i + 2);
      }
      break;
    case 'config':
    case 'sentinel':
      for (let i = 0; i < out.length; i += 1) if (CONFIG_SECRETS.has(word(i))) hide(i + 1);
      break;
    case 'acl':
      for (let i = 1; i < out.length; i += 1) if (typeof out[i] === 'string' && /^[<>#!]/.test(out[i] as string)) hide(i);
      break;
    default:
  }
  return out;
}

/** How deep the masking walks into a log line's values (an error's cause chain, a command's arguments). */
const MASK_DEPTH = 8;

/** Whether the line being written keeps the stacks of its errors (see {@link loggerOptions}). */
let keepStacks = true;

/**
 * Masks secrets in a value bound for a log line: strings by {@link maskSecretsInText}, a Redis
 * command's arguments by {@link redactRedisArgs}, errors through their serializer; plain objects
 * and arrays a few levels down. Other objects (a Buffer, a class instance) are left to JSON.
 */
function maskValue(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return maskSecretsInText(value);
  if (value instanceof Error) return errSerializer(value);
  if (depth <= 0 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => maskValue(v, depth - 1));
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null && !isSerializedError(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'stack' && !keepStacks && isSerializedError(value)) continue;
    out[k] = k === 'command' && isRedisCommand(v) ? { ...v, args: maskValue(redactRedisArgs(v.name, v.args), depth - 1) } : maskValue(v, depth - 1);
  }
  return out;
}

function isRedisCommand(value: unknown): value is { name: string; args: unknown[] } {
  return typeof value === 'object' && value !== null && typeof (value as { name?: unknown }).name === 'string' && Array.isArray((value as { args?: unknown }).args);
}

/** An error as pino's serializer makes it (its own prototype, `type`, `message`, `stack`). */
function isSerializedError(value: object): boolean {
  return typeof (value as { type?: unknown }).type === 'string' && typeof (value as { message?: unknown }).message === 'string' && 'stack' in value;
}

/**
 * pino's error serializer, with secrets masked in the message, the stack, the error's own fields
 * and a Redis command it carries; the stack left out of lines below error level.
 */
function errSerializer(err: unknown): unknown {
  if (!(err instanceof Error)) return maskValue(err, MASK_DEPTH);
  return maskValue(pino.stdSerializers.err(err), MASK_DEPTH);
}

/**
 * pino options of every regsync logger: name, level, redaction. Exported for tests that log to a
 * stream. Stacks are written at error and fatal only (and at any level when the logger runs at
 * debug or trace): a warning says what failed, in one line; an error is where to look for the code.
 */
export function loggerOptions(level: LevelWithSilent): LoggerOptions {
  return {
    name: 'regsync',
    level,
    redact: { paths: [...REDACT_PATHS], censor },
    serializers: { err: errSerializer },
    // Fields too: a URL with `?password=...`, a quoted header, an error under any name is masked.
    formatters: { log: (object) => maskValue(object, MASK_DEPTH) as Record<string, unknown> },
    hooks: {
      // Messages too: `log.warn(`... ${err.message}`)` must not carry a quoted secret into the log.
      logMethod(args, method, levelValue) {
        const before = keepStacks;
        keepStacks = levelValue >= ERROR_LEVEL || this.levelVal <= DEBUG_LEVEL;
        try {
          method.apply(this, args.map((a) => (typeof a === 'string' ? maskSecretsInText(a) : a)) as Parameters<typeof method>);
        } finally {
          keepStacks = before;
        }
      },
    },
  };
}

/** pino's numbers of the levels that decide whether a line keeps its stacks. */
const ERROR_LEVEL = 50;
const DEBUG_LEVEL = 20;

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
