import { createCipheriv, createDecipheriv, createHmac } from 'node:crypto';
import type { SecretKey } from './secret-key.js';
import { SecretKeyError } from './secret-key-error.js';

/** What every encrypted value starts with: `enc:v1:<key id>:<iv>:<ciphertext and tag>`. */
export const ENVELOPE_PREFIX = 'enc:v1:';

const ENVELOPE = /^enc:v1:([0-9a-f]{8}):([A-Za-z0-9_-]{16}):([A-Za-z0-9_-]{22,})$/;
const TAG_BYTES = 16;

/** Where a secret sits, for messages (`cluster shanghai's password`). */
export interface SecretPlace {
  cluster: string;
  /** `password`, or `options.<name>`. */
  field: string;
}

/**
 * Encrypts and decrypts the secrets a cluster carries, with AES-256-GCM under the current key;
 * previous keys only decrypt (while a rotation re-encrypts). Without a current key it stores
 * secrets as given: the store calls it either way, so only this class decides.
 *
 * Values are `enc:v1:<key id>:<iv>:<ciphertext+tag>` (base64url parts). The IV is derived from the
 * key, the place (cluster id and field) and the secret (an HMAC-SHA256, cut to GCM's 12 bytes), so
 * writing the same secret twice gives the same value: the store can still tell an unchanged record
 * by its bytes and `regsync apply` stays idempotent. What that reveals is only whether one place's
 * secret changed. The place is also the additional data of the GCM tag, so a value copied into
 * another cluster's record does not decrypt.
 */
export class SecretBox {
  /** No key at all: secrets are stored as given. */
  static readonly none = new SecretBox(undefined, []);

  private readonly keys: ReadonlyMap<string, SecretKey>;

  constructor(
    readonly current: SecretKey | undefined,
    readonly previous: readonly SecretKey[] = [],
  ) {
    this.keys = new Map([...previous, ...(current ? [current] : [])].map((k) => [k.id, k]));
  }

  /** The id of the key new values are encrypted with; undefined when secrets are stored in clear. */
  get keyId(): string | undefined {
    return this.current?.id;
  }

  /** Ids of every key this box can decrypt with. */
  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /** Whether a stored value is an envelope (else it is a secret stored in clear). */
  static isSealed(stored: string): boolean {
    return stored.startsWith(ENVELOPE_PREFIX);
  }

  /** The key id a stored value needs; undefined for a value in clear. */
  static keyIdOf(stored: string): string | undefined {
    return SecretBox.isSealed(stored) ? stored.slice(ENVELOPE_PREFIX.length, ENVELOPE_PREFIX.length + 8) : undefined;
  }

  /** Whether a stored value should be written again: in clear while there is a key, or under another key than the current one. */
  needsReseal(stored: string): boolean {
    return this.current !== undefined && SecretBox.keyIdOf(stored) !== this.current.id;
  }

  /** The value to store for `secret` at `place`: an envelope under the current key, or `secret` itself without one. */
  seal(secret: string, place: SecretPlace): string {
    const key = this.current;
    if (key === undefined) return secret;
    const aad = additionalData(place);
    const iv = createHmac('sha256', key.ivKey).update(aad).update('\0').update(secret, 'utf8').digest().subarray(0, 12);
    const cipher = createCipheriv('aes-256-gcm', key.cipherKey, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad);
    const body = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${ENVELOPE_PREFIX}${key.id}:${iv.toString('base64url')}:${body.toString('base64url')}`;
  }

  /**
   * The secret a stored value holds: decrypted, or as it is when stored in clear. Throws a
   * {@link SecretKeyError} naming the place and the key id when this box lacks the key
   * (`key_missing`) or the value does not decrypt with it (`undecryptable`).
   */
  open(stored: string, place: SecretPlace): string {
    if (!SecretBox.isSealed(stored)) return stored;
    const where = `cluster ${place.cluster}'s ${place.field}`;
    const match = ENVELOPE.exec(stored);
    if (match === null) throw new SecretKeyError('undecryptable', `${where} is not a valid encrypted value (enc:v1:<key id>:<iv>:<data>)`);
    const [, keyId, iv, body] = match as unknown as [string, string, string, string];
    const key = this.keys.get(keyId);
    if (key === undefined) throw missingKey(where, keyId, this);
    const data = Buffer.from(body, 'base64url');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.cipherKey, Buffer.from(iv, 'base64url'), { authTagLength: TAG_BYTES });
      decipher.setAAD(additionalData(place));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      return Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretKeyError('undecryptable', `${where} does not decrypt with secret key ${keyId}: the value was altered or belongs to another cluster`, keyId);
    }
  }
}

function additionalData(place: SecretPlace): Buffer {
  return Buffer.from(`regsync:${place.cluster}:${place.field}`, 'utf8');
}

/** The message of a value whose key this process lacks: which key, and how to give it. */
export function missingKey(where: string, keyId: string, box: SecretBox): SecretKeyError {
  const has = box.current === undefined ? 'this process has no secret key' : `this process has ${box.keyIds.map((id) => `key ${id}`).join(' and ')}`;
  return new SecretKeyError(
    'key_missing',
    `${where} is encrypted with secret key ${keyId}, and ${has}: give that key as REGSYNC_SECRET_KEY or --secret-key-file ` +
      '(REGSYNC_SECRET_KEY_FILE), or as REGSYNC_SECRET_KEY_PREVIOUS or --previous-secret-key-file (REGSYNC_SECRET_KEY_PREVIOUS_FILE) while rotating',
    keyId,
  );
}
