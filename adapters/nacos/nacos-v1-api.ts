import type { Instance } from '../../src/model/index.js';
import type { NacosAnswer, NacosCall } from './nacos-call.js';
import type { BeatAnswer, NacosApi, PushSubscription } from './nacos-api.js';
import type { NacosHttp } from './nacos-http.js';
import {
  beatBody,
  deregisterParams,
  excerpt,
  GROUP_SEPARATOR,
  hostsToInstances,
  isRecord,
  parseJson,
  registerParams,
  serviceParams,
  type ServiceRef,
} from './wire.js';
import { WireFormatError } from './wire-format-error.js';

const BEAT_OK = 10200;
const BEAT_UNKNOWN = 20404;

interface JsonAnswer {
  value: unknown;
  answer: NacosAnswer;
}

/**
 * The Nacos 1.x/2.x open API (`/nacos/v1/ns`), also served by Nacos 3.0 and 3.1. The only HTTP
 * dialect with server push (UDP, to subscribers that list with `udpPort`). Its instance list leaves
 * disabled instances out: a reader of a v1 cluster cannot see them.
 */
export class NacosV1Api implements NacosApi {
  readonly version = 'v1';
  readonly supportsPush = true;

  constructor(private readonly http: NacosHttp) {}

  async listServiceNames(namespaceId: string, group: string, pageSize: number): Promise<string[]> {
    const names = new Set<string>();
    for (let pageNo = 1; ; pageNo += 1) {
      const call: NacosCall = {
        method: 'GET',
        path: '/v1/ns/service/list',
        params: { namespaceId, groupName: group, pageNo: String(pageNo), pageSize: String(pageSize) },
      };
      const { value, answer } = await this.json(call);
      const doms = isRecord(value) ? value.doms : undefined;
      const count = isRecord(value) ? Number(value.count) : NaN;
      if (!Array.isArray(doms) || !doms.every((d): d is string => typeof d === 'string') || !Number.isFinite(count)) {
        throw this.http.error(call, answer, 'nacos-bad-response', `expected {count, doms}, got: ${excerpt(answer.body)}`);
      }
      // Some servers answer `group@@name`; the group is already known.
      for (const d of doms) names.add(d.startsWith(`${group}${GROUP_SEPARATOR}`) ? d.slice(group.length + GROUP_SEPARATOR.length) : d);
      // A list that changes while it is paged may shift names across pages; the next full sync
      // catches what slipped through.
      if (doms.length === 0 || doms.length < pageSize || names.size >= count) return [...names];
    }
  }

  async listInstances(ref: ServiceRef, subscription?: PushSubscription): Promise<Instance[]> {
    const params: Record<string, string> = { ...serviceParams(ref, 'v1'), healthyOnly: 'false' };
    if (subscription) {
      params.udpPort = String(subscription.udpPort);
      params.clientIP = subscription.clientIP;
    }
    const call: NacosCall = { method: 'GET', path: '/v1/ns/instance/list', params };
    const { value, answer } = await this.json(call);
    try {
      if (!isRecord(value)) throw new WireFormatError(`expected a ServiceInfo object, got: ${excerpt(answer.body)}`);
      return hostsToInstances(value.hosts ?? []);
    } catch (err) {
      if (err instanceof WireFormatError) throw this.http.error(call, answer, 'nacos-bad-response', err.message);
      throw err;
    }
  }

  async register(ref: ServiceRef, instance: Instance): Promise<void> {
    await this.ok({ method: 'POST', path: '/v1/ns/instance', params: registerParams(ref, instance, 'v1') });
  }

  async deregister(ref: ServiceRef, instance: Instance): Promise<void> {
    await this.ok({ method: 'DELETE', path: '/v1/ns/instance', params: deregisterParams(ref, instance, 'v1') });
  }

  async beat(ref: ServiceRef, instance: Instance, light: boolean): Promise<BeatAnswer> {
    const params: Record<string, string> = {
      ...serviceParams(ref, 'v1'),
      ip: instance.ip,
      port: String(instance.port),
      clusterName: instance.cluster,
    };
    if (!light) params.beat = beatBody(ref, instance);
    const call: NacosCall = { method: 'PUT', path: '/v1/ns/instance/beat', params, priority: 'high' };
    const { value, answer } = await this.json(call);
    const code = isRecord(value) ? Number(value.code) : NaN;
    if (!isRecord(value) || !Number.isFinite(code)) {
      throw this.http.error(call, answer, 'nacos-bad-response', `expected {code, clientBeatInterval}, got: ${excerpt(answer.body)}`);
    }
    const interval = Number(value.clientBeatInterval);
    const hints = {
      intervalMs: Number.isFinite(interval) && interval > 0 ? interval : undefined,
      lightBeatEnabled: typeof value.lightBeatEnabled === 'boolean' ? value.lightBeatEnabled : undefined,
    };
    if (code === BEAT_OK) return { result: 'ok', ...hints };
    if (code === BEAT_UNKNOWN) return { result: 'unknown', ...hints };
    throw this.http.error(call, answer, 'nacos-api-error', `unexpected beat answer: ${excerpt(answer.body)}`, code);
  }

  /** Sends a call and insists on a 2xx answer; v1 errors are plain text (`caused: ...;`). */
  private async ok(call: NacosCall): Promise<NacosAnswer> {
    const answer = await this.http.request({ ...call, dialect: 'v1' });
    if (answer.status < 200 || answer.status >= 300) {
      throw this.http.error(call, answer, 'nacos-http-error', excerpt(answer.body));
    }
    return answer;
  }

  private async json(call: NacosCall): Promise<JsonAnswer> {
    const answer = await this.ok(call);
    try {
      return { value: parseJson(answer.body), answer };
    } catch (err) {
      throw this.http.error(call, answer, 'nacos-bad-response', err instanceof Error ? err.message : String(err));
    }
  }
}
