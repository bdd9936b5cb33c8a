/**
 * The parts of Services and EndpointSlices the adapter reads and writes. Structural on purpose: the
 * objects come both from typed list calls of `@kubernetes/client-node` and as plain JSON from watch
 * streams, and both fit these shapes (field names are the wire names).
 */
export interface KubeMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
}

/** A Service port: `port` is the Service's, `targetPort` the pods'. */
export interface KubeServicePort {
  name?: string;
  port: number;
  targetPort?: number | string;
  protocol?: string;
}

/** A core/v1 Service. */
export interface KubeService {
  apiVersion?: string;
  kind?: string;
  metadata?: KubeMeta;
  spec?: {
    type?: string;
    clusterIP?: string;
    selector?: Record<string, string>;
    ports?: KubeServicePort[];
  };
}

/** An endpoint's conditions; `null` or absent means unknown. */
export interface KubeEndpointConditions {
  ready?: boolean | null;
  serving?: boolean | null;
  terminating?: boolean | null;
}

/** One endpoint of a slice: usually one pod, with one address. */
export interface KubeEndpoint {
  addresses: string[];
  conditions?: KubeEndpointConditions;
  hostname?: string;
  nodeName?: string;
  zone?: string;
  targetRef?: { kind?: string; name?: string; namespace?: string };
}

/** A slice port: named as the Service port it serves, numbered as the pods listen. */
export interface KubeEndpointPort {
  name?: string | null;
  port?: number | null;
  protocol?: string | null;
  appProtocol?: string | null;
}

/** A discovery.k8s.io/v1 EndpointSlice. */
export interface KubeEndpointSlice {
  apiVersion?: string;
  kind?: string;
  metadata?: KubeMeta;
  addressType: string;
  endpoints?: KubeEndpoint[] | null;
  ports?: KubeEndpointPort[] | null;
}

/** `namespace/name` of an object. */
export function objectKey(o: { metadata?: KubeMeta }): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}

/**
 * Is the endpoint fit to receive traffic? Ready (an unknown `ready` counts as ready, as the API
 * documents), serving unless said otherwise, and not terminating: a terminating endpoint may still
 * serve its open connections but must not get new ones.
 */
export function endpointHealthy(c: KubeEndpointConditions | undefined): boolean {
  return c?.ready !== false && c?.serving !== false && c?.terminating !== true;
}
