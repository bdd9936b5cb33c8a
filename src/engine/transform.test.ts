import { describe, expect, it } from 'vitest';
import type { Instance } from '../model/types.js';
import { diff, transform } from './transform.js';

const inst = (ip: string, extra: Partial<Instance> = {}): Instance => ({
  ip,
  port: 80,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: {},
  ...extra,
});
const ctx = { taskId: 't1', sourceClusterId: 'a', destinationClusterId: 'b' };

describe('transform', () => {
  it('marks a native instance with origin, path and task, keeping its fields', () => {
    const { desired } = transform([inst('10.0.0.1', { weight: 3, metadata: { v: '1' } })], ctx);
    expect(desired).toEqual([
      inst('10.0.0.1', { weight: 3, metadata: { v: '1', 'regsync.origin': 'a', 'regsync.path': 'a', 'regsync.task': 't1' } }),
    ]);
  });

  it('extends the path of a copy and keeps its origin', () => {
    const copy = inst('10.0.0.1', { metadata: { 'regsync.origin': 'x', 'regsync.path': 'x', 'regsync.task': 'other' } });
    const { desired } = transform([copy], ctx);
    expect(desired[0]?.metadata).toEqual({ 'regsync.origin': 'x', 'regsync.path': 'x,a', 'regsync.task': 't1' });
  });

  it('never sends an instance to a cluster on its path or of its origin', () => {
    const back = inst('10.0.0.1', { metadata: { 'regsync.origin': 'b', 'regsync.path': 'b' } });
    const ring = inst('10.0.0.2', { metadata: { 'regsync.origin': 'c', 'regsync.path': 'c,b' } });
    const ok = inst('10.0.0.3', { metadata: { 'regsync.origin': 'c', 'regsync.path': 'c' } });
    const result = transform([back, ring, ok], ctx);
    expect(result.desired.map((i) => i.ip)).toEqual(['10.0.0.3']);
    expect(result.skipped.map((s) => [s.instance.ip, s.reason])).toEqual([
      ['10.0.0.1', 'cycle'],
      ['10.0.0.2', 'cycle'],
    ]);
  });

  it("respects other tools' marks through the destination's aliases", () => {
    const nacosSync = inst('10.0.0.1', { metadata: { sourceClusterId: 'md5-of-b' } });
    const tag = inst('10.0.0.2', { metadata: { 'sync.instance.tag': 'md5-of-b@@1' } });
    const polaris = inst('10.0.0.3', { metadata: { __sync__: 'b' } });
    const other = inst('10.0.0.4', { metadata: { sourceClusterId: 'elsewhere' } });
    const result = transform([nacosSync, tag, polaris, other], { ...ctx, destinationAliases: ['md5-of-b'] });
    expect(result.desired.map((i) => i.ip)).toEqual(['10.0.0.4']);
    expect(result.skipped.every((s) => s.reason === 'foreign-copy')).toBe(true);
  });

  it("keeps consul-k8s's copies (external-source) out of the registries its destination's adapter names", () => {
    const fromK8s = inst('10.0.0.1', { metadata: { 'external-source': 'kubernetes' } });
    const fromNomad = inst('10.0.0.2', { metadata: { 'external-source': 'nomad' } });
    const intoKubernetes = transform([fromK8s, fromNomad], { ...ctx, destinationAliases: ['kubernetes'] });
    expect(intoKubernetes.desired.map((i) => i.ip)).toEqual(['10.0.0.2']);
    expect(intoKubernetes.skipped.map((s) => [s.instance.ip, s.reason])).toEqual([['10.0.0.1', 'foreign-copy']]);
    expect(transform([fromK8s, fromNomad], ctx).desired.map((i) => i.ip)).toEqual(['10.0.0.1', '10.0.0.2']);
  });

  it('does not copy unhealthy or disabled instances', () => {
    const result = transform([inst('10.0.0.1', { healthy: false }), inst('10.0.0.2', { enabled: false }), inst('10.0.0.3')], ctx);
    expect(result.desired.map((i) => i.ip)).toEqual(['10.0.0.3']);
    expect(result.skipped.map((s) => s.reason)).toEqual(['unhealthy', 'disabled']);
  });
});

describe('diff', () => {
  const copy = (ip: string, extra: Partial<Instance> = {}) => transform([inst(ip, extra)], ctx).desired[0] as Instance;

  it('writes nothing when the destination already matches', () => {
    const desired = [copy('10.0.0.1'), copy('10.0.0.2')];
    const plan = diff(desired, [...desired].reverse(), 't1');
    expect(plan).toMatchObject({ upsert: [], remove: [], conflicts: [] });
    expect(plan.unchanged).toHaveLength(2);
  });

  it('creates missing copies, updates changed ones and removes stale owned ones', () => {
    const desired = [copy('10.0.0.1', { weight: 2 }), copy('10.0.0.2')];
    const plan = diff(desired, [copy('10.0.0.1'), copy('10.0.0.3')], 't1');
    expect(plan.upsert.map((i) => [i.ip, i.weight])).toEqual([
      ['10.0.0.1', 2],
      ['10.0.0.2', 1],
    ]);
    expect(plan.remove.map((i) => i.ip)).toEqual(['10.0.0.3']);
  });

  it('re-registers an owned copy that turned unhealthy', () => {
    const plan = diff([copy('10.0.0.1')], [{ ...copy('10.0.0.1'), healthy: false }], 't1');
    expect(plan.upsert).toHaveLength(1);
  });

  it('never touches instances it does not own, and reports address conflicts', () => {
    const native = inst('10.0.0.1');
    const otherTask = { ...copy('10.0.0.2'), metadata: { 'regsync.task': 't2' } };
    const plan = diff([copy('10.0.0.1')], [native, otherTask], 't1');
    expect(plan).toMatchObject({ upsert: [], remove: [] });
    expect(plan.conflicts.map((i) => i.ip)).toEqual(['10.0.0.1']);
  });

  it('tells instances apart by cluster as well as address', () => {
    const plan = diff([copy('10.0.0.1', { cluster: 'SH' })], [copy('10.0.0.1', { cluster: 'BJ' })], 't1');
    expect(plan.upsert.map((i) => i.cluster)).toEqual(['SH']);
    expect(plan.remove.map((i) => i.cluster)).toEqual(['BJ']);
  });
});

describe('label stamping', () => {
  const cmdb: Record<string, Record<string, string>> = {
    '11.11.11.11': { site: 'x11', zone: 'z1', 'regsync.task': 'evil' },
    '22.22.22.22': { site: 'x12' },
  };
  const labelsOf = (ip: string) => cmdb[ip] ?? {};
  const stamped = (instance: Instance, labels: Parameters<typeof transform>[1]['labels']) =>
    transform([instance], { ...ctx, labels }).desired[0]?.metadata;

  it('stamps every CMDB label of the IP by default, and none for an unknown IP', () => {
    expect(stamped(inst('11.11.11.11'), { cluster: {}, cmdb: labelsOf, override: false })).toEqual({
      site: 'x11',
      zone: 'z1',
      'regsync.origin': 'a',
      'regsync.path': 'a',
      'regsync.task': 't1',
    });
    expect(stamped(inst('10.0.0.9'), { cluster: {}, cmdb: labelsOf, override: false })).toEqual({
      'regsync.origin': 'a',
      'regsync.path': 'a',
      'regsync.task': 't1',
    });
  });

  it('stamps only the named labels', () => {
    const md = stamped(inst('11.11.11.11'), { cluster: {}, cmdb: labelsOf, names: ['site', 'region'], override: false });
    expect(md).toMatchObject({ site: 'x11' });
    expect(md).not.toHaveProperty('zone');
    expect(md).not.toHaveProperty('region');
    expect(stamped(inst('11.11.11.11'), { cluster: {}, cmdb: labelsOf, names: [], override: false })).not.toHaveProperty('site');
  });

  it("keeps the source's own value unless told to override it", () => {
    const own = inst('11.11.11.11', { metadata: { site: 'mine' } });
    expect(stamped(own, { cluster: {}, cmdb: labelsOf, override: false })?.site).toBe('mine');
    expect(stamped(own, { cluster: {}, cmdb: labelsOf, override: true })?.site).toBe('x11');
  });

  it('fills in cluster labels below both the source and the CMDB', () => {
    const cluster = { region: 'east', site: 'cluster-site' };
    expect(stamped(inst('22.22.22.22'), { cluster, cmdb: labelsOf, override: false })).toMatchObject({ region: 'east', site: 'x12' });
    expect(stamped(inst('10.0.0.9', { metadata: { region: 'west' } }), { cluster, override: false })).toMatchObject({
      region: 'west',
      site: 'cluster-site',
    });
  });

  it('never lets a label overwrite a mark, nor treats inherited object keys as labels', () => {
    const md = stamped(inst('11.11.11.11'), { cluster: { 'regsync.origin': 'x' }, cmdb: labelsOf, names: ['regsync.task', 'constructor'], override: true });
    expect(md).toEqual({ 'regsync.origin': 'a', 'regsync.path': 'a', 'regsync.task': 't1' });
  });

  it('turns a label change into an update of the copy', () => {
    const before = transform([inst('22.22.22.22')], { ...ctx, labels: { cluster: {}, cmdb: labelsOf, override: false } }).desired;
    const after = transform([inst('22.22.22.22')], { ...ctx, labels: { cluster: {}, cmdb: () => ({ site: 'x13' }), override: false } }).desired;
    const plan = diff(after, before, 't1');
    expect(plan.upsert.map((i) => i.metadata.site)).toEqual(['x13']);
  });
});

describe('metadata filter', () => {
  it('keeps only the keys the filter lets through, labels included, marks always', () => {
    const source = inst('11.11.11.11', { metadata: { app: 'orders', secret: 's', 'regsync.origin': 'x', 'regsync.path': 'x' } });
    const { desired } = transform([source], {
      ...ctx,
      labels: { cluster: { region: 'east', zone: 'z' }, override: false },
      metadataKeys: (key) => key !== 'secret' && key !== 'zone',
    });
    expect(desired[0]?.metadata).toEqual({ app: 'orders', region: 'east', 'regsync.origin': 'x', 'regsync.path': 'x,a', 'regsync.task': 't1' });
  });
});
