import { describe, expect, it } from 'vitest';
import { KubernetesConfigError } from './kubernetes-config-error.js';
import { DEFAULT_KUBERNETES_OPTIONS, parseKubernetesOptions } from './kubernetes-options.js';

const parse = (options: Record<string, unknown>) => parseKubernetesOptions({ id: 'k', options });

describe('parseKubernetesOptions', () => {
  it('fills every default', () => {
    expect(parse({})).toEqual(DEFAULT_KUBERNETES_OPTIONS);
    expect(DEFAULT_KUBERNETES_OPTIONS).toMatchObject({ allowNamespaces: ['*'], syncByDefault: true, maxEndpointsPerSlice: 100, group: 'DEFAULT_GROUP' });
  });

  it('reads every option, numbers also as strings, and ignores unknown keys', () => {
    const o = parse({
      kubeconfig: '/etc/regsync/kubeconfig',
      context: 'prod',
      allowNamespaces: ['a', 'b'],
      denyNamespaces: [],
      namespaceMap: { default: 'public', prod: { group: 'PROD' }, stage: { namespace: 'stage-ns', group: 'STAGE' } },
      group: 'K8S',
      syncByDefault: false,
      portName: 'http',
      ephemeral: false,
      maxEndpointsPerSlice: '50',
      headless: true,
      requestTimeoutMs: 1000,
      watchTimeoutSeconds: 60,
      initialListTimeoutMs: 5000,
      backoffInitialMs: 100,
      backoffMaxMs: 1000,
      conflictAttempts: 3,
      somethingNew: 1,
    });
    expect(o).toMatchObject({ kubeconfig: '/etc/regsync/kubeconfig', context: 'prod', allowNamespaces: ['a', 'b'], maxEndpointsPerSlice: 50, headless: true });
    expect(o.namespaceMap).toEqual({
      default: { namespace: 'public', group: 'K8S' },
      prod: { namespace: 'prod', group: 'PROD' },
      stage: { namespace: 'stage-ns', group: 'STAGE' },
    });
  });

  it.each([
    [{ maxEndpointsPerSlice: 0 }, 'options.maxEndpointsPerSlice'],
    [{ maxEndpointsPerSlice: 1001 }, 'options.maxEndpointsPerSlice'],
    [{ syncByDefault: 'yes' }, 'options.syncByDefault'],
    [{ allowNamespaces: 'default' }, 'options.allowNamespaces'],
    [{ denyNamespaces: ['Bad_Name'] }, 'options.denyNamespaces'],
    [{ namespaceMap: { Bad: 'x' } }, 'options.namespaceMap'],
    [{ namespaceMap: { ok: 3 } }, 'options.namespaceMap'],
    [{ namespaceMap: [] }, 'options.namespaceMap'],
    [{ kubeconfig: '' }, 'options.kubeconfig'],
    [{ backoffInitialMs: 500, backoffMaxMs: 100 }, 'options.backoffMaxMs'],
  ])('refuses %j', (options, setting) => {
    let error: unknown;
    try {
      parse(options);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(KubernetesConfigError);
    expect(error).toMatchObject({ setting, code: 'kubernetes-config-invalid' });
  });
});
