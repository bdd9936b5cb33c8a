import { createHash, hkdfSync } from 'node:crypto';
import { SecretKeyError } from './secret-key-error.js';

/** Bytes of a secret key: AES-256. */
export const SECRET_KEY_BYTES = 32;

/**
 * A key secrets are encrypted with. `id` (8 hex digits of a hash of the key) is written in every
 * value encrypted with it, so that a reader knows which key a value needs and can say so; it tells
 * nothing about the key. The AES and IV keys are derived from the given key (HKDF-SHA256), never
 * the key itself.
 */
export interface SecretKey {
  readonly id: string;
  readonly cipherKey: Buffer;
  readonly ivKey: Buffer;
}

const HEX_KEY = /^[0-9a-fA-F]{64}$/;
const BASE64_KEY = /^[A-Za-z0-9+/_-]{43}=?$/;

/**
 * Reads a key written as 64 hex digits or as base64 (standard or URL alphabet, 44 characters with
 * its `=`, or 43 without), surrounding blanks ignored (a file's final newline). `source` names where
 * it came from (`REGSYNC_SECRET_KEY`, `--secret-key-file /run/...`) in the error; the key is never
 * part of a message.
 */
export function parseSecretKey(text: string, source: string): SecretKey {
  const trimmed = text.trim();
  let bytes: Buffer | undefined;
  if (HEX_KEY.test(trimmed)) bytes = Buffer.from(trimmed, 'hex');
  else if (BASE64_KEY.test(trimmed)) bytes = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (bytes === undefined || bytes.length !== SECRET_KEY_BYTES) {
    throw new SecretKeyError(
      'invalid_key',
      `${source}: expected a key of ${SECRET_KEY_BYTES} bytes, as 64 hex digits or 44 base64 characters (\`openssl rand -base64 32\`), got ${trimmed.length} characters`,
    );
  }
  return secretKeyOf(bytes);
}

/** The key of 32 raw bytes. */
export function secretKeyOf(bytes: Buffer): SecretKey {
  const derive = (info: string): Buffer => Buffer.from(hkdfSync('sha256', bytes, Buffer.alloc(0), `regsync secrets v1 ${info}`, 32));
  return {
    id: createHash('sha256').update('regsync secret key id\0').update(bytes).digest('hex').slice(0, 8),
    cipherKey: derive('aes-256-gcm'),
    ivKey: derive('iv'),
  };
}
