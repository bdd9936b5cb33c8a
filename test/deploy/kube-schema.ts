import * as apps from 'kubernetes-models/apps/v1';
import * as batch from 'kubernetes-models/batch/v1';
import * as networking from 'kubernetes-models/networking.k8s.io/v1';
import * as policy from 'kubernetes-models/policy/v1';
import * as rbac from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import * as core from 'kubernetes-models/v1';
import type { KubeObject } from './kube-manifests.js';

/** A kubernetes-models class: its prototype's `validate` checks `this` against the API's JSON schema. */
interface ModelClass {
  prototype: { validate(this: unknown): void };
}

/** The API groups and versions the manifests use, each with its kubernetes-models module. */
const MODULES: Readonly<Record<string, Readonly<Record<string, unknown>>>> = {
  v1: core,
  'apps/v1': apps,
  'batch/v1': batch,
  'policy/v1': policy,
  'networking.k8s.io/v1': networking,
  'rbac.authorization.k8s.io/v1': rbac,
};

/** The kubernetes-models class of an object's apiVersion and kind, or undefined for a kind it does not know. */
export function modelOf(object: KubeObject): ModelClass | undefined {
  const model = MODULES[object.apiVersion]?.[object.kind];
  return typeof model === 'function' ? (model as unknown as ModelClass) : undefined;
}

/**
 * Validates an object against the Kubernetes schema of its kind, and also reports the fields the
 * schema does not know (a typo such as `readinesProbe`), which the API server's strict field
 * validation refuses but the JSON schema, like the API's OpenAPI document, lets through.
 *
 * Unknown fields are found by watching the schema's compiled validator: it reads every property
 * its schema defines (and every key of a map), so a key of the object it never read is one the
 * schema does not have. Returns the problems as `path: message`; empty when the object is valid.
 */
export function schemaProblems(model: ModelClass, object: unknown): string[] {
  const read = new WeakMap<object, Set<PropertyKey>>();
  const proxies = new WeakMap<object, object>();
  const watch = (value: unknown): unknown => {
    if (value === null || typeof value !== 'object') return value;
    let proxy = proxies.get(value);
    if (proxy === undefined) {
      const seen = new Set<PropertyKey>();
      read.set(value, seen);
      proxy = new Proxy(value, {
        get(target, key, receiver) {
          seen.add(key);
          return watch(Reflect.get(target, key, receiver));
        },
      });
      proxies.set(value, proxy);
    }
    return proxy;
  };
  const problems: string[] = [];
  try {
    model.prototype.validate.call(watch(object));
  } catch (err) {
    problems.push(err instanceof Error ? err.message : String(err));
  }
  const walk = (value: unknown, path: string): void => {
    if (Array.isArray(value)) {
      value.forEach((item, i) => walk(item, `${path}[${i}]`));
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const seen = read.get(value);
    for (const [key, child] of Object.entries(value)) {
      if (seen !== undefined && !seen.has(key)) problems.push(`${path}.${key}: not a field of the schema`);
      else walk(child, `${path}.${key}`);
    }
  };
  walk(object, '');
  return problems;
}
