/**
 * A write the destination refuses for good: retrying the same plan cannot succeed until someone
 * changes the destination or the cluster's options (an object regsync does not own is in the way,
 * a namespace is denied). Adapters throw a subclass; the reconcile reports it as `write_refused`
 * and leaves the retry to the next full sync instead of retrying at once. Nothing of the refused
 * service was written.
 */
export class WriteRefusedError extends Error {
  override readonly name: string = 'WriteRefusedError';

  constructor(
    /** A stable reason code of the adapter's. */
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
