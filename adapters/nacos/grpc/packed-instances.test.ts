import { describe, expect, it } from 'vitest';
import type { Instance } from '../../../src/model/index.js';
import { packInstances, unpackInstances } from './packed-instances.js';

const inst = (ip: string, metadata: Record<string, string>, over: Partial<Instance> = {}): Instance => ({
  ip,
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata,
  ...over,
});

describe('packInstances', () => {
  it('gives every field back, metadata in its own key order', () => {
    const list = [
      inst('10.0.0.2', { version: '1.0.0', app: 'orders', 'regsync.task': 't' }),
      inst('10.0.0.1', {}, { port: 20880, weight: 0.5, healthy: false, enabled: false, ephemeral: false, cluster: 'east-1' }),
    ];
    const back = unpackInstances(packInstances(list));
    expect(back).toEqual(list);
    expect(Object.keys(back[0]?.metadata ?? {})).toEqual(['version', 'app', 'regsync.task']);
    expect(unpackInstances(packInstances([]))).toEqual([]);
  });

  it('keeps a `__proto__` metadata key as a key', () => {
    const metadata: Record<string, string> = {};
    Object.defineProperty(metadata, '__proto__', { value: 'x', enumerable: true, writable: true, configurable: true });
    const [back] = unpackInstances(packInstances([inst('10.0.0.1', metadata)]));
    expect(Object.getPrototypeOf(back?.metadata)).toBe(Object.prototype);
    expect(Object.entries(back?.metadata ?? {})).toEqual([['__proto__', 'x']]);
  });

  it('answers new objects each time: a caller changing them changes nothing kept', () => {
    const packed = packInstances([inst('10.0.0.1', { app: 'orders' })]);
    const first = unpackInstances(packed);
    (first[0] as Instance).metadata.app = 'changed';
    expect(unpackInstances(packed)[0]?.metadata.app).toBe('orders');
  });
});
