import { describe, expect, it } from 'vitest';
import { KubernetesConfigError } from './kubernetes-config-error.js';
import { NamespacePolicy } from './namespace-policy.js';

const policy = (over: Partial<ConstructorParameters<typeof NamespacePolicy>[1]> = {}) =>
  new NamespacePolicy('k', { allowNamespaces: ['*'], denyNamespaces: [], namespaceMap: {}, group: 'DEFAULT_GROUP', ...over });

describe('NamespacePolicy', () => {
  it('allows what allow lists and deny does not; deny wins; * on either side', () => {
    const p = policy({ allowNamespaces: ['a', 'b'], denyNamespaces: ['b'] });
    expect([p.allowed('a'), p.allowed('b'), p.allowed('c')]).toEqual([true, false, false]);
    expect(p.clusterWide).toBe(false);
    expect(p.namespaces).toEqual(['a']);
    const all = policy({ denyNamespaces: ['kube-system'] });
    expect([all.allowed('x'), all.allowed('kube-system'), all.clusterWide]).toEqual([true, false, true]);
    expect(policy({ denyNamespaces: ['*'] }).allowed('x')).toBe(false);
  });

  it('maps namespaces both ways: map entries first, the same name otherwise', () => {
    const p = policy({ namespaceMap: { default: { namespace: 'public', group: 'DEFAULT_GROUP' }, prod: { namespace: 'public', group: 'PROD' } } });
    expect(p.toTarget('default')).toEqual({ namespace: 'public', group: 'DEFAULT_GROUP' });
    expect(p.toTarget('prod')).toEqual({ namespace: 'public', group: 'PROD' });
    expect(p.toTarget('team-a')).toEqual({ namespace: 'team-a', group: 'DEFAULT_GROUP' });
    expect(p.toKube({ namespace: 'public', group: 'DEFAULT_GROUP' })).toBe('default');
    expect(p.toKube({ namespace: 'public', group: 'PROD' })).toBe('prod');
    expect(p.toKube({ namespace: 'team-a', group: 'DEFAULT_GROUP' })).toBe('team-a');
    // Another group, a name that cannot be a namespace, and a mapped namespace's own name reach nothing.
    expect(p.toKube({ namespace: 'team-a', group: 'OTHER' })).toBeUndefined();
    expect(p.toKube({ namespace: 'Team_A', group: 'DEFAULT_GROUP' })).toBeUndefined();
    expect(p.toKube({ namespace: 'default', group: 'DEFAULT_GROUP' })).toBeUndefined();
  });

  it('says which namespaces a scope with * covers, and as what', () => {
    const p = policy({ denyNamespaces: ['kube-system'], namespaceMap: { default: { namespace: 'public', group: 'DEFAULT_GROUP' }, prod: { namespace: 'public', group: 'PROD' } } });
    expect(p.covers('default', { namespace: '*', group: '*' })).toEqual({ namespace: 'public', group: 'DEFAULT_GROUP' });
    expect(p.covers('prod', { namespace: '*', group: '*' })).toEqual({ namespace: 'public', group: 'PROD' });
    expect(p.covers('team-a', { namespace: '*', group: '*' })).toEqual({ namespace: 'team-a', group: 'DEFAULT_GROUP' });
    expect(p.covers('prod', { namespace: 'public', group: '*' })).toEqual({ namespace: 'public', group: 'PROD' });
    expect(p.covers('team-a', { namespace: 'public', group: '*' })).toBeUndefined();
    expect(p.covers('prod', { namespace: '*', group: 'DEFAULT_GROUP' })).toBeUndefined();
    expect(p.covers('team-a', { namespace: '*', group: 'DEFAULT_GROUP' })).toEqual({ namespace: 'team-a', group: 'DEFAULT_GROUP' });
    // Denied namespaces, and one whose same-name target a map entry took, are covered by nothing.
    expect(p.covers('kube-system', { namespace: '*', group: '*' })).toBeUndefined();
    expect(policy({ namespaceMap: { default: { namespace: 'public', group: 'DEFAULT_GROUP' } } }).covers('public', { namespace: '*', group: '*' })).toBeUndefined();
  });

  it('does not map a namespace whose same-name target an entry took', () => {
    const p = policy({ namespaceMap: { default: { namespace: 'public', group: 'DEFAULT_GROUP' } } });
    expect(p.toTarget('public')).toBeUndefined();
    for (const ns of ['default', 'team-a', 'x']) {
      const target = p.toTarget(ns);
      if (target) expect(p.toKube(target)).toBe(ns);
    }
  });

  it('refuses a map that is not one-to-one', () => {
    expect(() => policy({ namespaceMap: { a: { namespace: 'p', group: 'G' }, b: { namespace: 'p', group: 'G' } } })).toThrow(KubernetesConfigError);
  });
});
