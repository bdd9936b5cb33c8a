/**
 * Why a {@link StoreError} was raised:
 * - `corrupt_record`: a key holds something that is not the JSON record it should be (edited by
 *   hand, written by another program, truncated). Reading it again gives the same answer, so
 *   callers report it rather than retry.
 * - `duplicate_task`: a write would give two tasks the same source, destination, namespace,
 *   group and service; they would overwrite each other's copies in the destination.
 * - `write_conflict`: a read-modify-write lost the race to other writers too many times in a row.
 * - `unexpected_reply`: Redis answered a script with something this code never returns.
 */
export type StoreErrorCode = 'corrupt_record' | 'duplicate_task' | 'write_conflict' | 'unexpected_reply';

/**
 * A failure of the store itself, as opposed to a connection error (those surface as ioredis
 * errors unchanged). Callers branch on `instanceof` and `code`, never on the message.
 */
export class StoreError extends Error {
  override readonly name = 'StoreError';

  /**
   * @param code stable reason, see {@link StoreErrorCode}
   * @param key the Redis key involved, so an operator can inspect it with `redis-cli`
   */
  constructor(
    readonly code: StoreErrorCode,
    readonly key: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
