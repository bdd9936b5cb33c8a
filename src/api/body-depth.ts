import type { FastifyInstance } from 'fastify';
import { BodyDepthError } from './body-depth-error.js';

/**
 * Deepest nesting of objects and arrays a body may have. The deepest valid body (a Kubernetes
 * cluster's `options.namespaceMap.<ns>.namespace`) has 4 levels.
 */
export const MAX_BODY_DEPTH = 32;

/**
 * Refuses every parsed body nested deeper than `maxDepth` before anything recursive (schema
 * validation, option parsers, `JSON.stringify` in the store, error messages that quote values)
 * sees it: a 30 KB body can nest 5,000 levels deep and overflow the stack of any of them. A root
 * `preValidation` hook, so it covers every route, whoever registers it later.
 */
export function installBodyDepthLimit(app: FastifyInstance, maxDepth = MAX_BODY_DEPTH): void {
  app.addHook('preValidation', async (request) => {
    if (depthExceeds(request.body, maxDepth)) throw new BodyDepthError(maxDepth);
  });
}

/** Whether `value` nests objects or arrays deeper than `maxDepth`; iterative, so any depth is safe to check. Exported for tests. */
export function depthExceeds(value: unknown, maxDepth: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  // Two parallel stacks: no tuple per node (a 64 KiB body holds some 20,000 objects).
  const nodes: object[] = [value];
  const depths: number[] = [1];
  while (nodes.length > 0) {
    const node = nodes.pop() as object;
    const depth = depths.pop() as number;
    if (depth > maxDepth) return true;
    const children: readonly unknown[] = Array.isArray(node) ? node : Object.values(node);
    for (let i = 0; i < children.length; i++) {
      const child = children[i];
      if (typeof child === 'object' && child !== null) {
        nodes.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}
