/** nacos-sync's `ResultCodeEnum.SYSTEM_ERROR`, the `resultCode` of every failure nacos-sync answers. */
export const RESULT_SYSTEM_ERROR = 'SYSTEM_ERROR';

/**
 * A failure answered the way nacos-sync answers its own: HTTP 200 with
 * `{"success": false, "resultCode": "SYSTEM_ERROR", "resultMessage": <message>}`. Thrown by the
 * nacos-sync compatible routes (`src/api/nacos-sync-routes.ts`) and their pure helpers; the error
 * handler of those routes turns it into the body.
 *
 * nacos-sync's processors throw `SkyWalkerException(message)`, whose result code is always
 * `SYSTEM_ERROR`; so is {@link code}. The message is shown to clients: it must never contain a secret.
 */
export class NacosSyncError extends Error {
  override readonly name = 'NacosSyncError';
  /** The result code the failure is answered with. */
  readonly code = RESULT_SYSTEM_ERROR;
}
