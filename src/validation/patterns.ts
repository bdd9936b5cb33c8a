/**
 * The formats of the names and addresses regsync takes in (cluster and task ids, endpoints,
 * namespaces, services), as JSON Schema patterns with what each means in words. The REST API's
 * schemas (src/api/schemas.ts), the NacosSync wire (src/nacos-sync) and the CLI's offline checks
 * use them, so that a name reads as valid or not, and why, the same way everywhere.
 */

/** Cluster and task ids: a DNS label, so they fit in metadata values, URLs and Kubernetes names. */
export const ID_PATTERN = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$';

const PORT = '(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])';
/** `host:port`: a host name or IPv4 address, or an IPv6 address in brackets; a port 1..65535. */
export const ENDPOINT_PATTERN = `^(?:\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}):${PORT}$`;
/** Namespaces, groups, user names: anything without whitespace. */
export const NAME_PATTERN = '^\\S+$';
/** A service name (no whitespace, no `*`) or `*` alone for every service of the namespace and group. */
export const SERVICE_PATTERN = '^(?:\\*|[^\\s*]+)$';

/** What a pattern means, for validation messages (a regular expression is no help to an operator). */
export const PATTERN_HINTS: Readonly<Record<string, string>> = {
  [ID_PATTERN]: 'must be 1 to 63 lowercase letters, digits or "-", starting and ending with a letter or digit',
  [ENDPOINT_PATTERN]: 'must be host:port with a port from 1 to 65535',
  [NAME_PATTERN]: 'must not contain whitespace',
  [SERVICE_PATTERN]: 'must be a service name without whitespace or "*", or "*" alone for every service',
};
