/** Parameters as tests write them. */
export type ParamValues = Record<string, string | number | boolean>;

/** Encodes parameters as a query string or form body, the way Nacos clients send them. */
export function formOf(params: ParamValues): URLSearchParams {
  return new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]));
}
