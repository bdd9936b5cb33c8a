import type { RegistryAdapter } from '../model/adapter.js';

/** The adapter calls that talk to the registry (the watches report through their callbacks). */
const CALLS = ['listServices', 'listInstances', 'apply', 'retain', 'heartbeat'] as const;

/**
 * `adapter`, telling `onError` the kind of every failed registry call: the error's stable `code`
 * (ZooKeeper's and Kubernetes' request errors have one), else its name. For adapters without an
 * error hook of their own (the Nacos adapter counts each failed HTTP request itself). The error
 * still reaches the caller unchanged.
 */
export function countingRequestErrors(adapter: RegistryAdapter, onError: (kind: string) => void): RegistryAdapter {
  for (const name of CALLS) {
    const original = adapter[name] as ((...args: unknown[]) => Promise<unknown>) | undefined;
    if (typeof original !== 'function') continue;
    Object.defineProperty(adapter, name, {
      configurable: true,
      writable: true,
      value: async (...args: unknown[]) => {
        try {
          return await original.apply(adapter, args);
        } catch (err) {
          onError(kindOf(err));
          throw err;
        }
      },
    });
  }
  return adapter;
}

function kindOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[a-z0-9-]{1,64}$/i.test(code)) return code;
  return err instanceof Error ? err.name : 'unknown';
}
