/** A Dubbo URL split into its parts: `protocol://host:port/path?key=value&...`. */
export interface DubboUrl {
  protocol: string;
  host: string;
  port: number;
  /** The path without its leading `/` (usually the interface name); may be empty. */
  path: string;
  params: Record<string, string>;
}

/** Why a text is not a Dubbo provider URL; the message says what is wrong. */
export class DubboUrlError extends Error {
  override readonly name = 'DubboUrlError';
  readonly code = 'dubbo-url-invalid';
}

/**
 * Parses a (decoded) Dubbo URL the way Dubbo's `URL.valueOf` reads it: the query starts at the
 * first `?`, parameters split on `&` and at their first `=`, and a parameter without `=` is
 * `key=key`. User info is ignored. A provider needs a host and a port from 1 to 65535.
 */
export function parseDubboUrl(text: string): DubboUrl {
  const q = text.indexOf('?');
  const head = q === -1 ? text : text.slice(0, q);
  const query = q === -1 ? '' : text.slice(q + 1);
  const sep = head.indexOf('://');
  if (sep <= 0) throw new DubboUrlError('no protocol:// prefix');
  const protocol = head.slice(0, sep);
  if (!/^[A-Za-z][A-Za-z0-9+.-]*$/.test(protocol)) throw new DubboUrlError(`bad protocol ${JSON.stringify(protocol)}`);
  const rest = head.slice(sep + 3);
  const slash = rest.indexOf('/');
  let authority = slash === -1 ? rest : rest.slice(0, slash);
  const path = slash === -1 ? '' : rest.slice(slash + 1);
  const at = authority.lastIndexOf('@');
  if (at !== -1) authority = authority.slice(at + 1);
  let host: string;
  let portText: string | undefined;
  if (authority.startsWith('[')) {
    const close = authority.indexOf(']');
    if (close === -1) throw new DubboUrlError('unclosed [ in the host');
    host = authority.slice(1, close);
    const after = authority.slice(close + 1);
    portText = after.startsWith(':') ? after.slice(1) : after === '' ? undefined : after;
  } else {
    const colon = authority.lastIndexOf(':');
    host = colon === -1 ? authority : authority.slice(0, colon);
    portText = colon === -1 ? undefined : authority.slice(colon + 1);
  }
  if (host === '') throw new DubboUrlError('no host');
  if (portText === undefined || !/^\d{1,5}$/.test(portText)) throw new DubboUrlError('no port');
  const port = Number(portText);
  if (port < 1 || port > 65_535) throw new DubboUrlError(`port ${port} is outside 1-65535`);
  const params: Record<string, string> = {};
  for (const part of query.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const key = eq === -1 ? part : part.slice(0, eq);
    if (key === '') continue;
    params[key] = eq === -1 ? part : part.slice(eq + 1);
  }
  return { protocol, host, port, path, params };
}

/**
 * Formats a Dubbo URL with its parameters sorted by key (as Dubbo's `toFullString` does), so that
 * the same instance always gives the same node name. Throws {@link DubboUrlError} for a parameter a
 * URL query cannot hold (a key with `&` or `=`, a value with `&`): Dubbo does not escape them.
 */
export function formatDubboUrl(url: DubboUrl): string {
  if (!/^[A-Za-z][A-Za-z0-9+.-]*$/.test(url.protocol)) throw new DubboUrlError(`bad protocol ${JSON.stringify(url.protocol)}`);
  if (url.host === '' || /[/?@[\]\s]/.test(url.host)) throw new DubboUrlError(`bad host ${JSON.stringify(url.host)}`);
  const host = url.host.includes(':') ? `[${url.host}]` : url.host;
  const keys = Object.keys(url.params).sort();
  for (const key of keys) {
    if (key === '' || /[&=]/.test(key)) throw new DubboUrlError(`parameter name ${JSON.stringify(key)} cannot be written in a URL query`);
    if ((url.params[key] as string).includes('&')) throw new DubboUrlError(`the value of ${key} contains &, which a Dubbo URL query cannot hold`);
  }
  if (url.path.includes('?')) throw new DubboUrlError(`path ${JSON.stringify(url.path)} contains ?`);
  const query = keys.map((k) => `${k}=${url.params[k]}`).join('&');
  return `${url.protocol}://${host}:${url.port}/${url.path}${query === '' ? '' : `?${query}`}`;
}

/**
 * Encodes a text as one ZooKeeper node name the way Dubbo does (`java.net.URLEncoder`, UTF-8):
 * letters, digits and `.-*_` stay, a space becomes `+`, everything else `%XX`.
 */
export function encodeNodeName(text: string): string {
  return encodeURIComponent(text)
    .replace(/[!'()~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, '+');
}

/** Decodes a node name written by {@link encodeNodeName} (or Dubbo); throws {@link DubboUrlError} on a malformed escape. */
export function decodeNodeName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, '%20'));
  } catch {
    throw new DubboUrlError('malformed %-escape in the node name');
  }
}
