import type { Instance } from '../../src/model/index.js';
import { selectsProvider, type DubboSelector } from './dubbo-service-name.js';
import { DubboUrlError, decodeNodeName, encodeNodeName, formatDubboUrl, parseDubboUrl } from './dubbo-url.js';
import { clusterFromMetadata, metadataToWrite, weightFromMetadata } from './instance-fields.js';

/** A provider node read from `/{root}/{interface}/providers/`. */
export interface DubboProvider {
  instance: Instance;
  /** Effective `version` and `group` (Dubbo falls back to `default.version` / `default.group`); empty when absent. */
  version: string;
  group: string;
}

/** A URL parameter as Dubbo's `URL.getParameter` reads it: the key, else `default.{key}`, else empty. */
function dubboParam(params: Record<string, string>, key: string): string {
  const value = params[key];
  if (value !== undefined && value !== '') return value;
  return params[`default.${key}`] ?? '';
}

/**
 * Reads one provider node name (an encoded URL) found in the directory of `directoryInterface`.
 * As nacos-sync does: every URL parameter becomes metadata, plus `protocol`; the weight comes from
 * `weight` (default 1). Beyond it: `dynamic=false` means a persistent provider, `disabled=true` or
 * `enabled=false` a disabled one (as Dubbo consumers read them), and `regsync.cluster` carries a
 * Nacos cluster. Throws {@link DubboUrlError} for a node that is not a provider URL of that interface.
 */
export function readProvider(nodeName: string, directoryInterface: string): DubboProvider {
  const url = parseDubboUrl(decodeNodeName(nodeName));
  const iface = url.params.interface || url.path;
  if (iface !== directoryInterface) {
    throw new DubboUrlError(`the URL is for interface ${JSON.stringify(iface)}, not ${JSON.stringify(directoryInterface)} whose directory holds it`);
  }
  const { cluster, metadata } = clusterFromMetadata({ ...url.params, protocol: url.protocol });
  const enabled = url.params.disabled !== undefined ? url.params.disabled !== 'true' : url.params.enabled !== 'false';
  return {
    instance: {
      ip: url.host,
      port: url.port,
      weight: weightFromMetadata(url.params.weight),
      healthy: true,
      enabled,
      ephemeral: url.params.dynamic !== 'false',
      cluster,
      metadata,
    },
    version: dubboParam(url.params, 'version'),
    group: dubboParam(url.params, 'group'),
  };
}

/**
 * The provider node name (an encoded URL) a Dubbo consumer accepts for `instance` in the service of
 * `selector`: `{protocol}://{ip}:{port}/{path or interface}?{metadata without protocol}`, parameters
 * sorted. The metadata must hold `protocol` and `interface` (the interface of the service), and,
 * when the service names a version and group, the same ones. Throws {@link DubboUrlError} saying
 * what is missing.
 */
export function providerNodeName(selector: DubboSelector, instance: Instance): string {
  const params = metadataToWrite(instance, {
    ...(instance.enabled ? {} : { enabled: 'false' }),
    ...(instance.ephemeral ? {} : { dynamic: 'false' }),
  });
  const protocol = params.protocol;
  if (protocol === undefined || protocol === '') throw new DubboUrlError('its metadata has no protocol (needed for the URL scheme, e.g. dubbo)');
  const iface = params.interface;
  if (iface === undefined || iface === '') throw new DubboUrlError('its metadata has no interface');
  if (iface !== selector.interface) throw new DubboUrlError(`its metadata says interface ${iface}, the service is for ${selector.interface}`);
  const version = dubboParam(params, 'version');
  const group = dubboParam(params, 'group');
  if (!selectsProvider(selector, version, group)) {
    throw new DubboUrlError(
      `its metadata says version ${JSON.stringify(version)} and group ${JSON.stringify(group)}, the service is for version ${JSON.stringify(selector.version)} and group ${JSON.stringify(selector.group)}`,
    );
  }
  if (!instance.enabled) delete params.disabled;
  delete params.protocol;
  const path = params.path !== undefined && params.path !== '' ? params.path : iface;
  return encodeNodeName(formatDubboUrl({ protocol, host: instance.ip, port: instance.port, path, params }));
}
