import { readFileSync } from 'node:fs';
import { SecretBox } from './secret-box.js';
import { parseSecretKey, type SecretKey } from './secret-key.js';
import { SecretKeyError } from './secret-key-error.js';

/** The variable holding the current key itself (hex or base64). */
export const SECRET_KEY_ENV = 'REGSYNC_SECRET_KEY';
/** The variable naming a file holding the current key (what `--secret-key-file` defaults to). */
export const SECRET_KEY_FILE_ENV = 'REGSYNC_SECRET_KEY_FILE';
/** The variable holding previous keys, comma-separated: read, never written with. */
export const PREVIOUS_SECRET_KEY_ENV = 'REGSYNC_SECRET_KEY_PREVIOUS';
/** The variable naming a file holding a previous key (what `--previous-secret-key-file` defaults to). */
export const PREVIOUS_SECRET_KEY_FILE_ENV = 'REGSYNC_SECRET_KEY_PREVIOUS_FILE';

/** Where a process's keys come from; files win over nothing, and a key given two ways is refused. */
export interface SecretKeySources {
  /** `--secret-key-file` (or `REGSYNC_SECRET_KEY_FILE`). */
  keyFile?: string | undefined;
  /** `--previous-secret-key-file` (or `REGSYNC_SECRET_KEY_PREVIOUS_FILE`). */
  previousKeyFile?: string | undefined;
  /** The environment read for `REGSYNC_SECRET_KEY` and `REGSYNC_SECRET_KEY_PREVIOUS`. */
  env?: Readonly<Record<string, string | undefined>>;
}

/**
 * The box of a process: its current key from `REGSYNC_SECRET_KEY` or a key file, its previous keys
 * from `REGSYNC_SECRET_KEY_PREVIOUS` and a previous key file; {@link SecretBox.none} when no key is
 * given. Throws a {@link SecretKeyError} naming the source (never the key) for a malformed key, an
 * unreadable file, a key given both ways, or previous keys without a current one.
 */
export function secretBoxFrom(sources: SecretKeySources): SecretBox {
  const env = sources.env ?? {};
  const envKey = nonEmpty(env[SECRET_KEY_ENV]);
  if (envKey !== undefined && sources.keyFile !== undefined) {
    throw new SecretKeyError('conflicting_keys', `the secret key is given both in ${SECRET_KEY_ENV} and as --secret-key-file ${sources.keyFile} (or ${SECRET_KEY_FILE_ENV}); give one`);
  }
  const current =
    sources.keyFile !== undefined ? keyFromFile(sources.keyFile, '--secret-key-file') : envKey !== undefined ? parseSecretKey(envKey, SECRET_KEY_ENV) : undefined;
  const previous: SecretKey[] = [];
  const envPrevious = nonEmpty(env[PREVIOUS_SECRET_KEY_ENV]);
  if (envPrevious !== undefined) {
    envPrevious.split(',').forEach((text, i) => {
      if (text.trim() !== '') previous.push(parseSecretKey(text, `${PREVIOUS_SECRET_KEY_ENV} entry ${i + 1}`));
    });
  }
  if (sources.previousKeyFile !== undefined) previous.push(keyFromFile(sources.previousKeyFile, '--previous-secret-key-file'));
  if (current === undefined && previous.length > 0) {
    throw new SecretKeyError('conflicting_keys', `previous secret keys are given (${PREVIOUS_SECRET_KEY_ENV} or --previous-secret-key-file) without a current one (${SECRET_KEY_ENV} or --secret-key-file)`);
  }
  return current === undefined ? SecretBox.none : new SecretBox(current, previous.filter((k) => k.id !== current.id));
}

function keyFromFile(file: string, flag: string): SecretKey {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new SecretKeyError('unreadable_key', `cannot read the secret key file ${file} (${flag}): ${code === 'ENOENT' ? 'no such file' : (code ?? 'read error')}`);
  }
  return parseSecretKey(text, `the secret key file ${file} (${flag})`);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}
