/**
 * Why a {@link SecretKeyError} was raised:
 * - `invalid_key`: a key given is not 32 bytes written as 64 hex digits or base64;
 * - `unreadable_key`: a key file cannot be read;
 * - `conflicting_keys`: a key was given two ways (the variable and a file), or a previous key without a current one;
 * - `key_missing`: a stored secret was encrypted with a key this process was not given;
 * - `undecryptable`: a stored secret names a key this process has, but does not decrypt with it
 *   (altered in Redis, or copied from another cluster's record).
 */
export type SecretKeyErrorCode = 'invalid_key' | 'unreadable_key' | 'conflicting_keys' | 'key_missing' | 'undecryptable';

/**
 * A secret key that cannot be used, or a stored secret that cannot be decrypted. The message names
 * where the key came from (a variable, a flag, a file) and the key id a stored value needs; never a
 * key nor a secret.
 */
export class SecretKeyError extends Error {
  override readonly name = 'SecretKeyError';

  /**
   * @param code stable reason, see {@link SecretKeyErrorCode}
   * @param keyId the id of the key a stored value needs (`key_missing`, `undecryptable`)
   */
  constructor(
    readonly code: SecretKeyErrorCode,
    message: string,
    readonly keyId?: string,
  ) {
    super(message);
  }
}
