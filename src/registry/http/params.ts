import type { FastifyRequest } from 'fastify';
import { parseSelector, SelectorError, type ServiceSelector } from '../label-selector.js';
import {
  DEFAULT_CLUSTER,
  DEFAULT_GROUP,
  GROUP_SEPARATOR,
  normalizeNamespace,
  type InstanceInput,
  type ServiceSettings,
} from '../naming-store.js';

/** A request parameter that is missing or malformed; answered with 400 before anything changes. */
export class ParamError extends Error {
  override readonly name = 'ParamError';
  constructor(
    readonly kind: 'missing' | 'invalid',
    readonly param: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Request parameters as Nacos reads them: query string and form body merged (the body wins), blank
 * values treated as absent.
 */
export class Params {
  private constructor(private readonly values: ReadonlyMap<string, string>) {}

  static of(request: FastifyRequest): Params {
    const values = new Map<string, string>();
    for (const source of [request.query, request.body]) {
      if (!source || typeof source !== 'object') continue;
      for (const [k, v] of Object.entries(source as Record<string, unknown>)) {
        const value = Array.isArray(v) ? v[0] : v;
        if (value === undefined || value === null) continue;
        values.set(k, typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value));
      }
    }
    return new Params(values);
  }

  static fromRecord(record: Record<string, string>): Params {
    return new Params(new Map(Object.entries(record)));
  }

  optional(name: string): string | undefined {
    const v = this.values.get(name);
    return v === undefined || v.trim() === '' ? undefined : v;
  }

  required(name: string): string {
    const v = this.optional(name);
    if (v === undefined) throw new ParamError('missing', name, `Param '${name}' is required.`);
    return v;
  }

  bool(name: string, fallback: boolean): boolean {
    const v = this.optional(name);
    if (v === undefined) return fallback;
    const lower = v.trim().toLowerCase();
    if (lower === 'true') return true;
    if (lower === 'false') return false;
    throw new ParamError('invalid', name, `Param '${name}' must be true or false, got: ${v}`);
  }

  int(name: string, fallback: number | undefined, min: number, max: number): number {
    const v = fallback === undefined ? this.required(name) : this.optional(name);
    if (v === undefined) return fallback as number;
    const n = Number(v.trim());
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new ParamError('invalid', name, `Param '${name}' must be an integer from ${min} to ${max}, got: ${v}`);
    }
    return n;
  }

  namespace(): string {
    return normalizeNamespace(this.optional('namespaceId'));
  }

  /** `serviceName` (possibly `group@@name`) and `groupName`, resolved to a group and a plain name. */
  service(): { groupName: string; name: string } {
    const serviceName = this.required('serviceName').trim();
    return splitServiceName(serviceName, this.optional('groupName')?.trim() ?? DEFAULT_GROUP);
  }

  clusterName(param = 'clusterName'): string {
    const cluster = this.optional(param)?.trim() ?? DEFAULT_CLUSTER;
    if (!/^[0-9a-zA-Z-]+$/.test(cluster)) {
      throw new ParamError('invalid', param, `cluster name can only have these characters: 0-9a-zA-Z-, current: ${cluster}`);
    }
    return cluster;
  }

  /**
   * The fields of a service create or update (`protectThreshold`, `metadata`, `selector`), validated
   * as a whole before anything changes. Nacos requires `protectThreshold` on update and defaults it to
   * 0 on create; omitted metadata and selector mean none (an update replaces them, as in Nacos).
   */
  serviceSettings(thresholdRequired: boolean): ServiceSettings {
    const thresholdText = thresholdRequired ? this.required('protectThreshold') : this.optional('protectThreshold');
    const protectThreshold = thresholdText === undefined ? 0 : Number(thresholdText.trim());
    if (!Number.isFinite(protectThreshold) || protectThreshold < 0 || protectThreshold > 1) {
      throw new ParamError('invalid', 'protectThreshold', `Param 'protectThreshold' must be a number from 0 to 1, got: ${thresholdText}`);
    }
    return {
      protectThreshold,
      metadata: parseServiceMetadata(this.optional('metadata')),
      selector: this.selector(),
    };
  }

  /** The `selector` parameter (see {@link parseSelector}); a bad one is a 400 naming the bad clause. */
  selector(): ServiceSelector {
    try {
      return parseSelector(this.optional('selector'));
    } catch (err) {
      if (err instanceof SelectorError) throw new ParamError('invalid', 'selector', err.message);
      throw err;
    }
  }

  /** The instance fields of a register or update request, validated as a whole. */
  instance(): InstanceInput {
    const ip = this.required('ip').trim();
    if (/\s/.test(ip)) throw new ParamError('invalid', 'ip', `Param 'ip' is illegal: ${ip}`);
    const port = this.int('port', undefined, 0, 65535);
    const weightText = this.optional('weight');
    const weight = weightText === undefined ? 1 : Number(weightText);
    if (!Number.isFinite(weight) || weight < 0 || weight > 10000) {
      throw new ParamError('invalid', 'weight', 'instance format invalid: The weights range from 0.0 to 10000.0');
    }
    const enabledParam = this.optional('enabled') !== undefined ? 'enabled' : 'enable';
    return {
      ip,
      port,
      weight,
      healthy: this.bool('healthy', true),
      enabled: this.bool(enabledParam, true),
      ephemeral: this.bool('ephemeral', true),
      clusterName: this.clusterName(),
      metadata: parseMetadata(this.optional('metadata')),
    };
  }
}

/** Splits `group@@name`; a plain name takes the given group. */
export function splitServiceName(serviceName: string, groupName: string): { groupName: string; name: string } {
  if (!serviceName.includes(GROUP_SEPARATOR)) return { groupName, name: serviceName };
  const parts = serviceName.split(GROUP_SEPARATOR);
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
    throw new ParamError(
      'invalid',
      'serviceName',
      `Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName', current: ${serviceName}`,
    );
  }
  return { groupName: parts[0] as string, name: parts[1] as string };
}

/** Instance metadata: a JSON object whose values become strings, as Nacos stores them. */
export function parseMetadata(text: string | undefined): Record<string, string> {
  if (text === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ParamError('invalid', 'metadata', `metadata format incorrect: ${truncate(text)}`);
  }
  return toStringRecord(parsed, 'metadata');
}

/**
 * Service metadata as Nacos' `UtilsAndCommons.parseMetadata` reads it: a JSON object, or else the
 * `k=v,k2=v2` form (every pair needs exactly one `=` and a non-empty key and value).
 */
export function parseServiceMetadata(text: string | undefined): Record<string, string> {
  if (text === undefined) return {};
  try {
    return parseMetadata(text);
  } catch (err) {
    if (!(err instanceof ParamError)) throw err;
  }
  const out: Record<string, string> = {};
  for (const pair of text.split(',')) {
    const kv = pair.split('=');
    if (kv.length !== 2 || kv[0] === '' || kv[1] === '') {
      throw new ParamError('invalid', 'metadata', `metadata format incorrect:${truncate(text)}`);
    }
    out[kv[0] as string] = kv[1] as string;
  }
  return out;
}

export function toStringRecord(value: unknown, param: string): Record<string, string> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ParamError('invalid', param, `${param} format incorrect: expected a JSON object`);
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === null || v === undefined) continue;
    out[k] = typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
  return out;
}

function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}...` : s;
}
