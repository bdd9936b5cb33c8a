import type { Instance } from '../../src/model/index.js';
import type { NacosAnswer, NacosCall } from './nacos-call.js';
import type { BeatAnswer, NacosApi, PushSubscription } from './nacos-api.js';
import type { NacosHttp } from './nacos-http.js';
import {
  beatBody,
  deregisterParams,
  excerpt,
  GROUP_SEPARATOR,
  groupedName,
  groupedServiceOf,
  hostsToInstances,
  isRecord,
  namespaceIds,
  parseJson,
  registerForm,
  serviceParams,
  type GroupedService,
  type ServiceRef,
} from './wire.js';
import { NacosRequestError } from './nacos-request-error.js';
import { NacosV3Api } from './nacos-v3-api.js';
import { WireFormatError } from './wire-format-error.js';

const CATALOG_SERVICES = '/v1/ns/catalog/services';
const CONSOLE_NAMESPACES = '/v1/console/namespaces';
/** Statuses of an API the server does not serve: absent (404), or switched off (Nacos 3 answers 410). */
const GONE = new Set([404, 410]);

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
  /** For the lists Nacos 3 serves only through its v3 admin API; made on first need. */
  private v3: NacosV3Api | undefined;

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

  /**
   * The catalog list (`GET /nacos/v1/ns/catalog/services`, Nacos 1.x/2.x; `{count, serviceList:
   * [{name, groupName, ...}]}`): without `groupNameParam`/`serviceNameParam` it filters nothing.
   * Nacos 3.0/3.1 answer it 410 (a console API, off by default) or 404: their v3 admin list is
   * asked instead.
   */
  async listAllServices(namespaceId: string, pageSize: number): Promise<GroupedService[]> {
    const found = new Map<string, GroupedService>();
    for (let pageNo = 1; ; pageNo += 1) {
      const call: NacosCall = {
        method: 'GET',
        path: CATALOG_SERVICES,
        params: { namespaceId, pageNo: String(pageNo), pageSize: String(pageSize), withInstances: 'false', hasIpCount: 'false' },
      };
      const answer = await this.http.request({ ...call, dialect: 'v1' });
      if (pageNo === 1 && GONE.has(answer.status)) return this.v3Fallback(call, answer, (v3) => v3.listAllServices(namespaceId, pageSize));
      const value = this.jsonOf(call, this.checked(call, answer));
      const list = isRecord(value) ? value.serviceList : undefined;
      const count = isRecord(value) ? Number(value.count) : NaN;
      if (!Array.isArray(list) || !Number.isFinite(count)) {
        throw this.http.error(call, answer, 'nacos-bad-response', `expected {count, serviceList}, got: ${excerpt(answer.body)}`);
      }
      try {
        for (const entry of list) {
          const service = groupedServiceOf(entry);
          found.set(groupedName(service), service);
        }
      } catch (err) {
        if (err instanceof WireFormatError) throw this.http.error(call, answer, 'nacos-bad-response', err.message);
        throw err;
      }
      // Nacos answers the whole list to any page when it fits in one (1.x `getPagedService`, 2.x
      // `doPage`), so a short page or the count ends the loop, never a page number.
      if (list.length === 0 || list.length < pageSize || found.size >= count) return [...found.values()];
    }
  }

  /**
   * `GET /nacos/v1/console/namespaces` (`{code: 200, data: [{namespace, namespaceShowName, ...}]}`,
   * the public namespace as `""`). Nacos 3 serves its console on another port, so a 404 or 410 here
   * asks the v3 admin list (`/nacos/v3/admin/core/namespace/list`) instead.
   */
  async listNamespaces(): Promise<string[]> {
    const call: NacosCall = { method: 'GET', path: CONSOLE_NAMESPACES };
    const answer = await this.http.request({ ...call, dialect: 'v1' });
    if (GONE.has(answer.status)) return this.v3Fallback(call, answer, (v3) => v3.listNamespaces());
    const value = this.jsonOf(call, this.checked(call, answer));
    try {
      if (!isRecord(value)) throw new WireFormatError(`expected {code, data}, got: ${excerpt(answer.body)}`);
      return namespaceIds(value.data);
    } catch (err) {
      if (err instanceof WireFormatError) throw this.http.error(call, answer, 'nacos-bad-response', err.message);
      throw err;
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

  register(ref: ServiceRef, instance: Instance): Promise<void> {
    return this.written({ method: 'POST', path: '/v1/ns/instance', form: registerForm(ref, instance, 'v1'), dialect: 'v1' });
  }

  deregister(ref: ServiceRef, instance: Instance): Promise<void> {
    return this.written({ method: 'DELETE', path: '/v1/ns/instance', params: deregisterParams(ref, instance, 'v1'), dialect: 'v1' });
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

  /** A write ({@link ok} without keeping the answer; a cold sync sends one per copy). */
  private written(call: NacosCall): Promise<void> {
    return this.http.request(call).then((answer) => {
      this.checked(call, answer);
    });
  }

  /** Sends a call and insists on a 2xx answer; v1 errors are plain text (`caused: ...;`). */
  private async ok(call: NacosCall): Promise<NacosAnswer> {
    return this.checked(call, await this.http.request({ ...call, dialect: 'v1' }));
  }

  private checked(call: NacosCall, answer: NacosAnswer): NacosAnswer {
    if (answer.status < 200 || answer.status >= 300) {
      throw this.http.error(call, answer, 'nacos-http-error', excerpt(answer.body));
    }
    return answer;
  }

  private async json(call: NacosCall): Promise<JsonAnswer> {
    const answer = await this.ok(call);
    return { value: this.jsonOf(call, answer), answer };
  }

  private jsonOf(call: NacosCall, answer: NacosAnswer): unknown {
    try {
      return parseJson(answer.body);
    } catch (err) {
      throw this.http.error(call, answer, 'nacos-bad-response', err instanceof Error ? err.message : String(err));
    }
  }

  /**
   * A v1 list the server does not serve (404/410: Nacos 3.x), asked through the v3 admin API. When
   * that is not served either, the error is the v1 one, saying both were tried.
   */
  private async v3Fallback<T>(call: NacosCall, answer: NacosAnswer, read: (v3: NacosV3Api) => Promise<T>): Promise<T> {
    this.v3 ??= new NacosV3Api(this.http);
    try {
      return await read(this.v3);
    } catch (err) {
      // A 404 carrying a Nacos code (22001: no such namespace) is an answer, not a missing API.
      if (err instanceof NacosRequestError && (err.status === 410 || (err.status === 404 && err.nacosCode === undefined))) {
        throw this.http.error(call, answer, 'nacos-http-error', `not served (nor ${err.path}, HTTP ${err.status}): ${excerpt(answer.body)}`);
      }
      throw err;
    }
  }
}
