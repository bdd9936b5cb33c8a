import { describe, expect, it } from 'vitest';
import { isDns1035Label, isNamespaceName, kubeServiceName } from './kube-names.js';

describe('kubeServiceName', () => {
  it('keeps names that already are DNS-1035 labels', () => {
    for (const name of ['orders', 'orders-v2', 'a', 'x1', 'a'.repeat(63)]) expect(kubeServiceName(name)).toBe(name);
  });

  it('cleans every other name and adds a stable hash of the original', () => {
    const cleaned = kubeServiceName('providers:com.acme.Echo:1.0.0:');
    expect(cleaned).toMatch(/^providers-com-acme-echo-1-0-0-[0-9a-f]{8}$/);
    expect(kubeServiceName('providers:com.acme.Echo:1.0.0:')).toBe(cleaned);
    expect(kubeServiceName('Orders')).toMatch(/^orders-[0-9a-f]{8}$/);
    expect(kubeServiceName('9lives')).toMatch(/^lives-[0-9a-f]{8}$/);
    expect(kubeServiceName('___')).toMatch(/^s-[0-9a-f]{8}$/);
    expect(kubeServiceName('')).toMatch(/^s-[0-9a-f]{8}$/);
  });

  it('never lets two names meet, nor take the name of one that needed no cleaning', () => {
    const names = ['orders-v2', 'orders_v2', 'Orders.v2', 'ORDERS-V2', 'orders v2'];
    const mapped = names.map(kubeServiceName);
    expect(new Set(mapped).size).toBe(names.length);
    expect(mapped[0]).toBe('orders-v2');
  });

  it('always answers a valid Service name, even for long and odd names', () => {
    for (const name of ['x'.repeat(300), `A${'b'.repeat(100)}`, 'ünïcödé-名前', 'trailing---', '-lead', 'a.b.c']) {
      const k = kubeServiceName(name);
      expect(isDns1035Label(k), `${name} -> ${k}`).toBe(true);
    }
  });

  it('tells namespace names', () => {
    expect(isNamespaceName('team-a')).toBe(true);
    expect(isNamespaceName('1team')).toBe(true);
    expect(isNamespaceName('Team')).toBe(false);
    expect(isNamespaceName('')).toBe(false);
    expect(isNamespaceName('a'.repeat(64))).toBe(false);
  });
});
