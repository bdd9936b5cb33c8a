import { describe, expect, it } from 'vitest';
import { GrpcRequestError } from './grpc-request-error.js';
import { readInstance, readInstances, readServiceRef } from './naming-input.js';

const ref = { namespaceId: 'public', groupName: 'G', name: 's' };

describe('gRPC naming input', () => {
  it('takes the namespace literally and refuses a blank group with 500, a missing namespace with 400', () => {
    expect(readServiceRef({ namespace: '', groupName: 'G', serviceName: 's' })).toEqual({ namespaceId: '', groupName: 'G', name: 's' });
    expect(() => readServiceRef({ namespace: 'public', groupName: '', serviceName: 's' })).toThrow(expect.objectContaining({ errorCode: 500 }));
    // Whitespace fails the group pattern of the parameter check first.
    expect(() => readServiceRef({ namespace: 'public', groupName: ' ', serviceName: 's' })).toThrow(expect.objectContaining({ errorCode: 400 }));
    expect(() => readServiceRef({ groupName: 'G', serviceName: 's' })).toThrow(expect.objectContaining({ errorCode: 400 }));
    for (const serviceName of ['', '@s', 'G@@s', 'a b', 'x'.repeat(513)]) {
      expect(() => readServiceRef({ namespace: 'public', groupName: 'G', serviceName }), serviceName.slice(0, 20)).toThrow(GrpcRequestError);
    }
    expect(readServiceRef({ namespace: 'public', groupName: '', serviceName: '' }, false).groupName).toBe('');
  });

  it('normalises an instance as Nacos stores it', () => {
    expect(readInstance({ ip: ' 10.0.0.1 ', port: '80', clusterName: '' }, ref, { ephemeral: true, single: true })).toEqual({
      instanceId: '10.0.0.1#80##G@@s',
      ip: '10.0.0.1',
      port: 80,
      weight: 1,
      healthy: true,
      enabled: true,
      ephemeral: true,
      clusterName: 'DEFAULT',
      metadata: {},
    });
    // Nacos generates the id before the cluster default applies, and prefers the instance's own serviceName.
    expect(readInstance({ ip: '10.0.0.1', port: 80, serviceName: 'own' }, ref, { ephemeral: true, single: true }).instanceId).toBe('10.0.0.1#80#null#own');
    const kept = readInstance(
      { instanceId: 'mine', ip: '10.0.0.1', port: 80, weight: 2, healthy: false, enabled: false, ephemeral: true, clusterName: 'C', metadata: { a: 1 } },
      ref,
      { ephemeral: false, single: true },
    );
    expect(kept).toMatchObject({ instanceId: 'mine', weight: 2, healthy: false, enabled: false, ephemeral: false, clusterName: 'C', metadata: { a: '1' } });
  });

  it('refuses bad fields with 400', () => {
    const bad: unknown[] = [
      undefined,
      { ip: '', port: 80 },
      { ip: '10.0.0.1', port: -1 },
      { ip: '10.0.0.1', port: 1.5 },
      { ip: '10.0.0.1', port: 80, weight: 10001 },
      { ip: '10.0.0.1', port: 80, clusterName: 'a_b' },
      { ip: '10.0.0.1', port: 80, metadata: { k: 'v'.repeat(1024) } },
      { ip: '10.0.0.1', port: 80, metadata: { 'preserved.heart.beat.interval': '20000' } },
      { ip: '10.0.0.1', port: 80, healthy: 'yes' },
    ];
    for (const raw of bad) {
      expect(() => readInstance(raw, ref, { ephemeral: true, single: true }), JSON.stringify(raw)?.slice(0, 60)).toThrow(
        expect.objectContaining({ errorCode: 400 }),
      );
    }
    expect(readInstances([{ ip: '10.0.0.1', port: 80, clusterName: 'a_b' }], ref)[0]?.clusterName).toBe('a_b');
    expect(readInstances([], ref)).toEqual([]);
    expect(() => readInstances({}, ref)).toThrow(GrpcRequestError);
  });
});
