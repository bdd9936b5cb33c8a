import { describe, expect, it } from 'vitest';
import type { KubeEndpointSlice, KubeService } from './kube-objects.js';
import { exportOf, managedInstances, nativeInstances } from './service-view.js';

const rules = { syncByDefault: true, portName: undefined, ephemeral: true };
const svc = (annotations: Record<string, string> = {}, over: Partial<KubeService> = {}): KubeService => ({
  metadata: { name: 'orders', namespace: 'default', annotations },
  spec: { ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
  ...over,
});
const slice = (endpoints: KubeEndpointSlice['endpoints'], ports: KubeEndpointSlice['ports'] = [{ name: 'http', port: 8080 }]): KubeEndpointSlice => ({
  metadata: { name: 'orders-abc', namespace: 'default', labels: { 'kubernetes.io/service-name': 'orders' } },
  addressType: 'IPv4',
  ports,
  endpoints,
});

describe('exportOf', () => {
  it('follows the sync annotation, else the default', () => {
    expect(exportOf(svc(), rules)).toEqual({ name: 'orders', exported: true, issues: [] });
    expect(exportOf(svc(), { syncByDefault: false }).exported).toBe(false);
    expect(exportOf(svc({ 'regsync.io/sync': 'TRUE' }), { syncByDefault: false }).exported).toBe(true);
    expect(exportOf(svc({ 'regsync.io/sync': 'false' }), rules).exported).toBe(false);
    const odd = exportOf(svc({ 'regsync.io/sync': 'maybe' }), rules);
    expect(odd.exported).toBe(true);
    expect(odd.issues[0]).toMatch(/must be "true" or "false"/);
  });

  it('exports under the annotated name, never ExternalName services nor default/kubernetes', () => {
    expect(exportOf(svc({ 'regsync.io/service-name': ' orders-api ' }), rules).name).toBe('orders-api');
    expect(exportOf(svc({ 'regsync.io/sync': 'true' }, { spec: { type: 'ExternalName' } }), rules).exported).toBe(false);
    expect(exportOf({ metadata: { name: 'kubernetes', namespace: 'default' } }, rules).exported).toBe(false);
    expect(exportOf({ metadata: { name: 'kubernetes', namespace: 'team' } }, rules).exported).toBe(true);
  });
});

describe('nativeInstances', () => {
  it('treats unknown readiness as ready and terminating as unhealthy', () => {
    const read = nativeInstances(
      svc(),
      [slice([{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.2'], conditions: { ready: true, serving: true, terminating: true } }, { addresses: ['10.0.0.3'], conditions: { ready: null } }])],
      rules,
    );
    expect(read.instances.map((i) => [i.ip, i.healthy])).toEqual([
      ['10.0.0.1', true],
      ['10.0.0.2', false],
      ['10.0.0.3', true],
    ]);
  });

  it('uses the slice port of the chosen Service port, by name; an unnamed single port too', () => {
    const unnamed = nativeInstances(svc({}, { spec: { ports: [{ port: 80, targetPort: 8080 }] } }), [slice([{ addresses: ['10.0.0.1'] }], [{ port: 8080 }])], rules);
    expect(unnamed.instances.map((i) => i.port)).toEqual([8080]);
    expect(unnamed.instances[0]?.metadata['k8s.port-name']).toBeUndefined();
    expect(nativeInstances(svc({}, { spec: { ports: [] } }), [], rules).issues[0]).toMatch(/has no ports/);
    // A slice without the chosen port contributes nothing.
    expect(nativeInstances(svc(), [slice([{ addresses: ['10.0.0.1'] }], [{ name: 'other', port: 1 }])], rules).instances).toEqual([]);
  });

  it('reports annotations it cannot use', () => {
    const read = nativeInstances(svc({ 'regsync.io/weight': '-1', 'regsync.io/metadata': '[1]' }), [slice([{ addresses: ['10.0.0.1'] }])], { ...rules, ephemeral: false });
    expect(read.instances[0]).toMatchObject({ weight: 1, ephemeral: false });
    expect(read.issues).toHaveLength(2);
  });
});

describe('managedInstances', () => {
  it('reports slices and endpoints it cannot fully read, reading what it can', () => {
    const managed = (annotation: string | undefined, endpoints: KubeEndpointSlice['endpoints'], ports: KubeEndpointSlice['ports'] = [{ name: 'port-80', port: 80 }]): KubeEndpointSlice => ({
      metadata: { name: 's', namespace: 'default', annotations: annotation === undefined ? {} : { 'regsync.io/instances': annotation } },
      addressType: 'IPv4',
      ports,
      endpoints,
    });
    const entry = { ip: '10.0.0.1', port: 80, weight: 1, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: { 'regsync.task': 't' } };
    const read = managedInstances([
      managed(JSON.stringify({ a: entry, b: { ...entry, ip: '10.0.0.9' }, c: { nope: 1 } }), [{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.2'] }]),
      managed('not json', [{ addresses: ['10.0.0.3'] }]),
      managed(undefined, [{ addresses: ['10.0.0.4'] }], []),
    ]);
    expect(read.instances.map((i) => [i.ip, i.metadata['regsync.task']])).toEqual([
      ['10.0.0.1', 't'],
      ['10.0.0.2', undefined],
      ['10.0.0.3', undefined],
    ]);
    expect(read.issues).toHaveLength(6);
  });
});
