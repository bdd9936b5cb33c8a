export { ENVELOPE_PREFIX, SecretBox, missingKey, type SecretPlace } from './secret-box.js';
export { SECRET_KEY_BYTES, parseSecretKey, secretKeyOf, type SecretKey } from './secret-key.js';
export { SecretKeyError, type SecretKeyErrorCode } from './secret-key-error.js';
export {
  PREVIOUS_SECRET_KEY_ENV,
  PREVIOUS_SECRET_KEY_FILE_ENV,
  SECRET_KEY_ENV,
  SECRET_KEY_FILE_ENV,
  secretBoxFrom,
  type SecretKeySources,
} from './secret-key-sources.js';
