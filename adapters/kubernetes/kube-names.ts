import { createHash } from 'node:crypto';

/** Per-Service annotation: `"true"` exports the Service, `"false"` never does; absent: `options.syncByDefault`. */
export const ANNOTATION_SYNC = 'regsync.io/sync';
/**
 * Per-Service annotation: the name the Service is exported under (default: its own name). regsync
 * also writes it on the Services it creates, holding the registry's original service name.
 */
export const ANNOTATION_SERVICE_NAME = 'regsync.io/service-name';
/** Per-Service annotation: the port to export, by Service port name or number (default: `options.portName`, else the first port). */
export const ANNOTATION_PORT = 'regsync.io/port';
/** Per-Service annotation: instance weight (default 1). */
export const ANNOTATION_WEIGHT = 'regsync.io/weight';
/** Per-Service annotation: a JSON object of extra instance metadata. */
export const ANNOTATION_METADATA = 'regsync.io/metadata';
/** Per-Service annotation prefix: `regsync.io/meta-<key>: <value>` adds one metadata entry (wins over the JSON one). */
export const ANNOTATION_META_PREFIX = 'regsync.io/meta-';
/** On EndpointSlices regsync writes: every instance of the slice with all its fields and marks, as JSON keyed by instance id. */
export const ANNOTATION_INSTANCES = 'regsync.io/instances';

/** The well-known label linking an EndpointSlice to its Service. */
export const LABEL_SERVICE_NAME = 'kubernetes.io/service-name';
/** The well-known label naming the controller of an EndpointSlice. */
export const LABEL_SLICE_MANAGED_BY = 'endpointslice.kubernetes.io/managed-by';
/** The well-known label naming the tool that manages an object; on the Services regsync creates. */
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
/** The value of both managed-by labels on objects regsync writes: the marker it never writes or deletes without. */
export const MANAGER = 'regsync';

/** Instance metadata keys regsync fills from Kubernetes fields when it reads a Service it did not write. */
export const META = {
  namespace: 'k8s.namespace',
  service: 'k8s.service',
  portName: 'k8s.port-name',
  node: 'k8s.node',
  zone: 'k8s.zone',
  hostname: 'k8s.hostname',
  pod: 'k8s.pod',
} as const;

const DNS_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Is `name` usable as a Service name as is (a DNS-1035 label of at most 63 characters)? */
export function isDns1035Label(name: string): boolean {
  return name.length <= 63 && DNS_1035.test(name);
}

/** Is `name` a namespace name (a DNS-1123 label of at most 63 characters)? */
export function isNamespaceName(name: string): boolean {
  return name.length <= 63 && DNS_1123_LABEL.test(name);
}

/**
 * The Kubernetes Service name for a registry service name. A name that already is a DNS-1035 label
 * is kept as is; any other is lower-cased, every run of other characters becomes `-`, leading
 * non-letters are dropped, and a stable suffix (8 hex digits of the SHA-256 of the original name) is
 * appended, so that two names that clean up alike (`orders_v2`, `Orders.v2`) never meet, and never
 * take the name of a service that needed no cleaning (`orders-v2`). Pure: same name, same answer,
 * on every regsync process, with no state to keep.
 */
export function kubeServiceName(name: string): string {
  if (isDns1035Label(name)) return name;
  const hash = createHash('sha256').update(name, 'utf8').digest('hex').slice(0, 8);
  const cleaned = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^[^a-z]+/, '')
    .slice(0, 63 - hash.length - 1)
    .replace(/-+$/, '');
  return cleaned === '' ? `s-${hash}` : `${cleaned}-${hash}`;
}
