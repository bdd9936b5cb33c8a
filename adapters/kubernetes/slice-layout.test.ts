import { describe, expect, it } from 'vitest';
import { instanceId, type Instance } from '../../src/model/index.js';
import type { KubeEndpointSlice } from './kube-objects.js';
import { managedInstances } from './service-view.js';
import { addressTypeOf, planSlices, type SliceLayoutInput } from './slice-layout.js';

const instance = (ip: string, over: Partial<Instance> = {}): Instance => ({
  ip,
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: { 'regsync.task': 't1' },
  ...over,
});
const many = (n: number, prefix = '10.0') => Array.from({ length: n }, (_, i) => instance(`${prefix}.${i >> 8}.${i & 255}`));
const plan = (instances: Instance[], current: KubeEndpointSlice[] = [], over: Partial<SliceLayoutInput> = {}) =>
  planSlices({ namespace: 'default', serviceName: 'orders', ownerUid: 'uid-1', current, instances, maxPerSlice: 100, ...over });
/** The slices as the server would hold them after the plan was written. */
const stored = (slices: KubeEndpointSlice[], base = 1): KubeEndpointSlice[] =>
  slices.map((s, i) => ({ ...s, metadata: { ...s.metadata, resourceVersion: String(base + i) } }));
const sizes = (slices: KubeEndpointSlice[]) => slices.map((s) => s.endpoints?.length ?? 0);

describe('planSlices', () => {
  it('splits into slices of at most maxPerSlice, marked, owned by the Service, one port each', () => {
    const layout = plan(many(250));
    expect(layout.create.map((s) => s.metadata?.name)).toEqual(['orders-regsync-0', 'orders-regsync-1', 'orders-regsync-2']);
    expect(sizes(layout.create)).toEqual([100, 100, 50]);
    expect(layout.ports).toEqual([8080]);
    const first = layout.create[0] as KubeEndpointSlice;
    expect(first.metadata?.labels).toEqual({ 'kubernetes.io/service-name': 'orders', 'endpointslice.kubernetes.io/managed-by': 'regsync' });
    expect(first.metadata?.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'Service', name: 'orders', uid: 'uid-1', controller: true }]);
    expect(first).toMatchObject({ addressType: 'IPv4', ports: [{ name: 'port-8080', port: 8080, protocol: 'TCP' }] });
    expect(managedInstances(layout.create).instances).toHaveLength(250);
  });

  it('reads back exactly what it wrote, health included', () => {
    const written = [
      instance('10.1.0.1', { weight: 2.5, cluster: 'SH', metadata: { z: 'a', 'regsync.task': 't1' } }),
      instance('10.1.0.1', { cluster: 'BJ', healthy: false }),
      instance('10.1.0.2', { healthy: false, enabled: false, ephemeral: false }),
      instance('fd00::2', { port: 9000 }),
    ];
    const layout = plan(written);
    const read = managedInstances(layout.create);
    expect(read.issues).toEqual([]);
    // The address 10.1.0.1 is one endpoint (ready: one of its instances is healthy).
    expect(read.instances.map(instanceId).sort()).toEqual(written.map(instanceId).sort());
    expect(read.instances.find((i) => i.cluster === 'SH')).toEqual(written[0]);
    expect(read.instances.find((i) => i.ip === '10.1.0.2')).toEqual(written[2]);
  });

  it('writes nothing when nothing changed', () => {
    const current = stored(plan(many(150)).create);
    const again = plan(many(150).reverse(), current);
    expect([again.create, again.replace, again.remove]).toEqual([[], [], []]);
    expect(again.unchanged).toBe(2);
  });

  it('keeps instances in their slice: one change rewrites one slice, a new one fills the gap', () => {
    const all = many(150);
    const current = stored(plan(all).create);
    const without = plan(all.slice(1), current);
    expect(without.create).toEqual([]);
    expect(without.remove).toEqual([]);
    expect(without.replace).toHaveLength(1);
    expect(without.replace[0]?.metadata?.resourceVersion).toBe(current[0]?.metadata?.resourceVersion);
    const after = stored([without.replace[0] as KubeEndpointSlice, current[1] as KubeEndpointSlice], 10);
    const refill = plan([...all.slice(1), instance('10.9.9.9')], after);
    expect(refill.create).toEqual([]);
    expect(refill.replace.map((s) => s.metadata?.name)).toEqual(['orders-regsync-0']);
    expect(sizes(refill.replace)).toEqual([100]);
  });

  it('deletes slices left empty, and everything when nothing is wanted', () => {
    const current = stored(plan(many(150)).create);
    const few = plan(many(3), current);
    expect(few.remove.map((s) => s.metadata?.name)).toEqual(['orders-regsync-1']);
    expect(sizes(few.replace)).toEqual([3]);
    const none = plan([], current);
    expect(none.remove).toHaveLength(2);
    expect(none.ports).toEqual([]);
  });

  it('keeps one family of slices per address type and port', () => {
    const layout = plan([instance('10.0.0.1'), instance('10.0.0.2', { port: 9090 }), instance('fd00::1'), instance('db.example.com')]);
    expect(layout.create.map((s) => `${s.addressType}/${s.ports?.[0]?.port}`).sort()).toEqual(['FQDN/8080', 'IPv4/8080', 'IPv4/9090', 'IPv6/8080']);
    expect(layout.ports).toEqual([8080, 9090]);
    // An instance changing port moves to the other family.
    const current = stored(layout.create);
    const moved = plan([instance('10.0.0.1', { port: 9090 }), instance('10.0.0.2', { port: 9090 }), instance('fd00::1'), instance('db.example.com')], current);
    expect(moved.remove).toHaveLength(1);
    expect(moved.replace).toHaveLength(1);
  });

  it('reports addresses it cannot write and skips names others hold', () => {
    const layout = plan([instance('not an ip'), instance('10.0.0.1')], [], { takenNames: new Set(['orders-regsync-0']) });
    expect(layout.invalid.map((i) => i.ip)).toEqual(['not an ip']);
    expect(layout.create.map((s) => s.metadata?.name)).toEqual(['orders-regsync-1']);
  });

  it('moves the overflow of slices fuller than maxPerSlice', () => {
    const current = stored(plan(many(150)).create);
    const smaller = plan(many(150), current, { maxPerSlice: 60 });
    expect([...sizes(smaller.replace), ...sizes(smaller.create)].sort((a, b) => a - b)).toEqual([30, 60, 60]);
  });

  it('tells address types', () => {
    expect(['10.0.0.1', 'fd00::1', 'svc.example.com', 'Bad Host', ''].map(addressTypeOf)).toEqual(['IPv4', 'IPv6', 'FQDN', undefined, undefined]);
  });
});
