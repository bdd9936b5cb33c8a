/**
 * An answer that does not have the shape Nacos documents. Internal: the dialect classes turn it into
 * a `NacosRequestError` with code `nacos-bad-response`, which knows the endpoint and path.
 */
export class WireFormatError extends Error {
  override readonly name = 'WireFormatError';
  readonly code = 'nacos-wire-format';
}
