import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { instancesDigest, type Instance } from './types.js';

const inst = (ip: string, extra: Partial<Instance> = {}): Instance => ({
  ip,
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: { a: '1', b: '2' },
  ...extra,
});

describe('instancesDigest', () => {
  it('ignores the order of instances and of metadata keys', () => {
    expect(instancesDigest([inst('10.0.0.1'), inst('10.0.0.2')])).toBe(
      instancesDigest([inst('10.0.0.2'), inst('10.0.0.1', { metadata: { b: '2', a: '1' } })]),
    );
    expect(instancesDigest([])).toBe(instancesDigest([]));
  });

  it('changes with any field of any instance', () => {
    const base = instancesDigest([inst('10.0.0.1')]);
    for (const changed of [
      inst('10.0.0.9'),
      inst('10.0.0.1', { port: 8081 }),
      inst('10.0.0.1', { weight: 2 }),
      inst('10.0.0.1', { healthy: false }),
      inst('10.0.0.1', { enabled: false }),
      inst('10.0.0.1', { ephemeral: false }),
      inst('10.0.0.1', { cluster: 'OTHER' }),
      inst('10.0.0.1', { metadata: { a: '1', b: '3' } }),
      inst('10.0.0.1', { metadata: { a: '1' } }),
    ]) {
      expect(instancesDigest([changed])).not.toBe(base);
    }
    expect(instancesDigest([inst('10.0.0.1'), inst('10.0.0.2')])).not.toBe(base);
    expect(instancesDigest([])).not.toBe(base);
  });

  it('stays the digest that statuses written by earlier versions hold', () => {
    // The definition: sha1 of the sorted JSON rows [ip, port, cluster, weight, healthy, enabled,
    // ephemeral, metadata entries sorted by key], joined by newlines, as base64url.
    const defined = (instances: Instance[]) =>
      createHash('sha1')
        .update(
          instances
            .map((i) => JSON.stringify([i.ip, i.port, i.cluster, i.weight, i.healthy, i.enabled, i.ephemeral, Object.entries(i.metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))]))
            .sort()
            .join('\n'),
        )
        .digest('base64url');
    const odd = [
      inst('fe80::1', { weight: 0.25, healthy: false, metadata: { 'q"uote': 'back\\slash', 'Z': 'ü\n', a: '' } }),
      inst('10.0.0.2', { port: 0, weight: Number.NaN, enabled: false, ephemeral: false, cluster: 'c,d', metadata: {} }),
      inst('10.0.0.1'),
    ];
    expect(instancesDigest(odd)).toBe(defined(odd));
    expect(instancesDigest([])).toBe(defined([]));
  });
});
