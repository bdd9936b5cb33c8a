import type { Logger } from 'pino';
import { missingKey, SECRET_KEY_ENV, type SecretBox } from '../secrets/index.js';
import type { RegsyncStore, StoredSecret } from './regsync-store.js';

/** What {@link prepareStoredSecrets} found and did. */
export interface StoredSecretsReport {
  /** Secrets stored, in clear or encrypted. */
  total: number;
  /** Secrets that were in clear and are now encrypted under the current key. */
  encrypted: number;
  /** Secrets still in clear (no key given). */
  clear: number;
  /** Secrets under a previous key (readable; `regsync secrets rotate` moves them to the current one). */
  underPreviousKeys: number;
}

/**
 * The start-up check of every process that reads clusters: refuses to start (a `key_missing`
 * {@link SecretKeyError}) when a stored secret needs a key this process was not given, naming
 * the key id and how to give it; with a key, encrypts the secrets still stored in clear (a
 * deployment that just got its key); without one, warns that secrets are stored in clear.
 */
export async function prepareStoredSecrets(store: RegsyncStore, box: SecretBox, logger: Logger): Promise<StoredSecretsReport> {
  const log = logger.child({ component: 'secrets' });
  const found = await store.inspectSecrets();
  const known = new Set(box.keyIds);
  const lacking = found.filter((s) => s.keyId !== undefined && !known.has(s.keyId));
  if (lacking.length > 0) {
    const first = lacking[0] as StoredSecret;
    const more = lacking.length > 1 ? ` (and ${lacking.length - 1} more secret${lacking.length > 2 ? 's' : ''})` : '';
    throw missingKey(`cluster ${first.cluster}'s ${first.field}${more}`, first.keyId as string, box);
  }
  const clear = found.filter((s) => s.keyId === undefined).length;
  const underPreviousKeys = found.filter((s) => s.keyId !== undefined && s.keyId !== box.keyId).length;
  if (box.keyId === undefined) {
    log.warn(
      { clearSecrets: clear },
      `no secret key (${SECRET_KEY_ENV} or --secret-key-file): cluster passwords are stored in clear in Redis and its append-only file`,
    );
    return { total: found.length, encrypted: 0, clear, underPreviousKeys: 0 };
  }
  let encrypted = 0;
  if (clear > 0) {
    encrypted = (await store.resealSecrets('clear')).resealed.length;
    log.info({ encrypted, keyId: box.keyId }, 'encrypted the cluster secrets stored in clear');
  }
  if (underPreviousKeys > 0) {
    log.info({ underPreviousKeys, keyId: box.keyId }, 'some cluster secrets are under a previous key: run `regsync secrets rotate` to re-encrypt them with the current one');
  }
  log.info({ keyId: box.keyId, secrets: found.length }, 'cluster secrets are encrypted at rest');
  return { total: found.length, encrypted, clear: clear - encrypted, underPreviousKeys };
}
