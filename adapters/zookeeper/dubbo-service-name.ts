/**
 * Which Dubbo providers a service name stands for. `version`/`group` undefined means any; an empty
 * string means "none" (the URL has no such parameter, or an empty one).
 */
export interface DubboSelector {
  interface: string;
  version: string | undefined;
  group: string | undefined;
}

/** Why a name is not a Dubbo service name. */
export class DubboServiceNameError extends Error {
  override readonly name = 'DubboServiceNameError';
  readonly code = 'dubbo-service-name-invalid';
}

const CATEGORY = 'providers';

/**
 * Reads a task's service name for the Dubbo layout:
 * - `providers:{interface}:{version}:{group}`: exactly that version and group, as Dubbo >= 2.7.3
 *   names services in Nacos (empty parts are empty, so `providers:{interface}::` has neither).
 *   Shorter forms (`providers:{interface}`, `providers:{interface}:{version}`, and the trailing-colon
 *   form nacos-sync writes) read missing parts as empty.
 * - `{interface}` alone: every version and group of the interface, in one service.
 * Anything else (another category such as `consumers:`, more than four parts, an empty interface)
 * is refused.
 */
export function parseDubboServiceName(name: string): DubboSelector {
  if (name.trim() === '' || name !== name.trim()) throw new DubboServiceNameError('empty, or with spaces around it');
  const parts = name.split(':');
  if (parts.length === 1) return { interface: name, version: undefined, group: undefined };
  if (parts[0] !== CATEGORY) {
    throw new DubboServiceNameError(`expected providers:{interface}:{version}:{group} or a bare interface name, got category ${JSON.stringify(parts[0])}`);
  }
  if (parts.length > 4) throw new DubboServiceNameError('more than four :-separated parts');
  const [, iface = '', version = '', group = ''] = parts;
  if (iface === '') throw new DubboServiceNameError('no interface');
  return { interface: iface, version, group };
}

/** The name `*` tasks get for one interface, version and group: `providers:{interface}:{version}:{group}`. */
export function formatDubboServiceName(iface: string, version: string, group: string): string {
  return [CATEGORY, iface, version, group].join(':');
}

/** Does a provider of `version` and `group` (empty when absent) belong to the selector? */
export function selectsProvider(selector: DubboSelector, version: string, group: string): boolean {
  return (selector.version === undefined || selector.version === version) && (selector.group === undefined || selector.group === group);
}
