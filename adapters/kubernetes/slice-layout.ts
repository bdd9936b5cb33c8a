import { isIPv4, isIPv6 } from 'node:net';
import { instanceId, type Instance } from '../../src/model/index.js';
import { compare, encodeEntries } from './instance-annotation.js';
import { ANNOTATION_INSTANCES, LABEL_SERVICE_NAME, LABEL_SLICE_MANAGED_BY, MANAGER } from './kube-names.js';
import type { KubeEndpoint, KubeEndpointSlice } from './kube-objects.js';
import { managedInstances } from './service-view.js';

/** What a destination Service must hold, and what its slices hold now. */
export interface SliceLayoutInput {
  namespace: string;
  serviceName: string;
  /** uid of the Service, for the slices' owner reference (garbage collection when it is deleted). */
  ownerUid: string;
  /** The slices regsync wrote for this Service, as read just before. */
  current: readonly KubeEndpointSlice[];
  /** The complete set of instances the Service must hold (every task's). */
  instances: readonly Instance[];
  maxPerSlice: number;
  /** Slice names taken by objects regsync does not manage (learnt from a refused create). */
  takenNames?: ReadonlySet<string>;
}

/** The writes that bring the slices to the wanted instances. */
export interface SliceLayout {
  create: KubeEndpointSlice[];
  /** Full replacements, carrying the resourceVersion they replace (a stale one is refused with 409). */
  replace: KubeEndpointSlice[];
  /** Current slices that end up empty. */
  remove: KubeEndpointSlice[];
  unchanged: number;
  /** Instances whose address is neither IPv4, IPv6 nor a DNS name: they cannot be written. */
  invalid: Instance[];
  /** Distinct instance ports, sorted: the Service gets one port per entry. */
  ports: number[];
}

type AddressType = 'IPv4' | 'IPv6' | 'FQDN';

const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** The EndpointSlice address type of an instance address; undefined when none fits. */
export function addressTypeOf(ip: string): AddressType | undefined {
  if (isIPv4(ip)) return 'IPv4';
  if (isIPv6(ip)) return 'IPv6';
  return DNS_SUBDOMAIN.test(ip) ? 'FQDN' : undefined;
}

/** Name of the Service port (and slice port) regsync writes for an instance port. */
export function portNameOf(port: number): string {
  return `port-${port}`;
}

/** Name of the n-th slice regsync writes for a Service. */
export function sliceNameOf(serviceName: string, n: number): string {
  return `${serviceName}-regsync-${n}`;
}

/**
 * Plans the EndpointSlices of one destination Service: one family of slices per address type and
 * port (a slice has one port list for all its endpoints), at most `maxPerSlice` endpoints each.
 *
 * Placement is stable, as the EndpointSlice controller does it: an instance that stays keeps its
 * slice, a gone one leaves a gap, new ones fill gaps before a new slice is opened. A change of one
 * instance therefore rewrites one slice, not all of them; a slice left empty is deleted; a slice
 * whose content did not change is not written. Pure: no I/O.
 */
export function planSlices(input: SliceLayoutInput): SliceLayout {
  const invalid: Instance[] = [];
  const wanted = new Map<string, { instance: Instance; group: string }>();
  for (const instance of input.instances) {
    const type = addressTypeOf(instance.ip);
    if (!type) {
      invalid.push(instance);
      continue;
    }
    wanted.set(instanceId(instance), { instance, group: `${type}/${instance.port}` });
  }

  interface Slot {
    existing: KubeEndpointSlice | undefined;
    name: string;
    group: string;
    ids: string[];
  }
  const slots: Slot[] = [];
  const placed = new Set<string>();
  const current = [...input.current].sort((a, b) => compare(a.metadata?.name ?? '', b.metadata?.name ?? ''));
  for (const slice of current) {
    const port = slice.ports?.length === 1 ? slice.ports[0]?.port : undefined;
    const group = `${slice.addressType}/${port ?? '?'}`;
    const ids: string[] = [];
    for (const instance of managedInstances([slice]).instances) {
      const id = instanceId(instance);
      if (ids.length >= input.maxPerSlice || placed.has(id) || wanted.get(id)?.group !== group) continue;
      ids.push(id);
      placed.add(id);
    }
    slots.push({ existing: slice, name: slice.metadata?.name ?? '', group, ids });
  }

  const taken = new Set([...current.map((s) => s.metadata?.name ?? ''), ...(input.takenNames ?? [])]);
  let next = 0;
  const freshName = () => {
    while (taken.has(sliceNameOf(input.serviceName, next))) next += 1;
    const name = sliceNameOf(input.serviceName, next);
    taken.add(name);
    return name;
  };
  const pending = [...wanted.entries()].filter(([id]) => !placed.has(id)).sort(([a], [b]) => compare(a, b));
  for (const [id, { group }] of pending) {
    let slot = slots.find((s) => s.group === group && s.ids.length < input.maxPerSlice);
    if (!slot) {
      slot = { existing: undefined, name: freshName(), group, ids: [] };
      slots.push(slot);
    }
    slot.ids.push(id);
  }

  const layout: SliceLayout = { create: [], replace: [], remove: [], unchanged: 0, invalid, ports: [] };
  const ports = new Set<number>();
  for (const slot of slots) {
    if (slot.ids.length === 0) {
      if (slot.existing) layout.remove.push(slot.existing);
      continue;
    }
    const instances = slot.ids.map((id) => wanted.get(id)?.instance as Instance);
    for (const i of instances) ports.add(i.port);
    const built = buildSlice(input, slot.name, slot.group.split('/')[0] as AddressType, instances);
    if (!slot.existing) layout.create.push(built);
    else if (projection(slot.existing) === projection(built)) layout.unchanged += 1;
    else {
      const meta = slot.existing.metadata ?? {};
      layout.replace.push({
        ...built,
        metadata: {
          ...built.metadata,
          resourceVersion: meta.resourceVersion,
          // Labels and annotations others added stay.
          labels: { ...meta.labels, ...built.metadata?.labels },
          annotations: { ...meta.annotations, ...built.metadata?.annotations },
        },
      });
    }
  }
  layout.ports = [...ports].sort((a, b) => a - b);
  return layout;
}

function buildSlice(input: SliceLayoutInput, name: string, addressType: AddressType, instances: Instance[]): KubeEndpointSlice {
  const sorted = [...instances].sort((a, b) => compare(instanceId(a), instanceId(b)));
  const port = sorted[0]?.port as number;
  const byAddress = new Map<string, boolean>();
  for (const i of sorted) byAddress.set(i.ip, (byAddress.get(i.ip) ?? false) || i.healthy);
  const endpoints: KubeEndpoint[] = [...byAddress].map(([ip, healthy]) => ({
    addresses: [ip],
    conditions: { ready: healthy, serving: healthy, terminating: false },
  }));
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name,
      namespace: input.namespace,
      labels: { [LABEL_SERVICE_NAME]: input.serviceName, [LABEL_SLICE_MANAGED_BY]: MANAGER },
      annotations: { [ANNOTATION_INSTANCES]: encodeEntries(sorted) },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Service', name: input.serviceName, uid: input.ownerUid, controller: true }],
    },
    addressType,
    ports: [{ name: portNameOf(port), port, protocol: 'TCP' }],
    endpoints,
  };
}

/** Everything of a slice that regsync decides, in a comparable form. */
function projection(slice: KubeEndpointSlice): string {
  const meta = slice.metadata ?? {};
  return JSON.stringify([
    slice.addressType,
    (slice.ports ?? []).map((p) => [p.name ?? '', p.port ?? null, p.protocol ?? 'TCP']),
    (slice.endpoints ?? []).map((e) => [e.addresses, e.conditions?.ready ?? null, e.conditions?.serving ?? null, e.conditions?.terminating ?? null]),
    meta.annotations?.[ANNOTATION_INSTANCES] ?? '',
    meta.labels?.[LABEL_SERVICE_NAME] ?? '',
    meta.labels?.[LABEL_SLICE_MANAGED_BY] ?? '',
    (meta.ownerReferences ?? []).map((o) => o.uid),
  ]);
}
