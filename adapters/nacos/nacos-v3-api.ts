import type { Instance } from '../../src/model/index.js';
import type { NacosAnswer, NacosCall } from './nacos-call.js';
import type { BeatAnswer, NacosApi } from './nacos-api.js';
import type { NacosHttp } from './nacos-http.js';
import {
  deregisterParams,
  excerpt,
  groupedName,
  groupedServiceOf,
  hostsToInstances,
  isRecord,
  namespaceIds,
  parseJson,
  registerForm,
  registerParams,
  serviceParams,
  type GroupedService,
  type ServiceRef,
} from './wire.js';
import { WireFormatError } from './wire-format-error.js';

const SERVICE_LIST = '/v3/admin/ns/service/list';
const NAMESPACE_LIST = '/v3/admin/core/namespace/list';

/** Nacos 3 error codes the adapter acts on. */
const CODE = {
  success: 0,
  instanceNotFound: 21003,
  serviceNotExist: 21008,
} as const;

/** A v3 answer's `{code, message, data}` once it is known to be a success. */
interface V3Success {
  data: unknown;
  answer: NacosAnswer;
}

/**
 * The Nacos 3.x API: admin endpoints (`/nacos/v3/admin/ns`) for lists and writes, the client
 * endpoint for renewals (`POST /nacos/v3/client/ns/instance` with `heartBeat=true`). No push over
 * HTTP: watches poll. The admin list shows disabled instances too.
 */
export class NacosV3Api implements NacosApi {
  readonly version = 'v3';
  readonly supportsPush = false;

  constructor(private readonly http: NacosHttp) {}

  async listServiceNames(namespaceId: string, group: string, pageSize: number): Promise<string[]> {
    // `groupNameParam` is a substring filter on the server: the exact group is kept here.
    const services = await this.pageServices(namespaceId, group, pageSize);
    return [...new Set(services.filter((s) => s.group === group).map((s) => s.name))];
  }

  async listAllServices(namespaceId: string, pageSize: number): Promise<GroupedService[]> {
    // Without `groupNameParam` the server filters nothing (Nacos 3 `CatalogServiceV2Impl.patternServices`).
    const services = await this.pageServices(namespaceId, undefined, pageSize);
    const unique = new Map(services.map((s) => [groupedName(s), s]));
    return [...unique.values()];
  }

  async listNamespaces(): Promise<string[]> {
    const call: NacosCall = { method: 'GET', path: NAMESPACE_LIST };
    const { data, answer } = await this.success(call);
    try {
      return namespaceIds(data);
    } catch (err) {
      if (err instanceof WireFormatError) throw this.http.error(call, answer, 'nacos-bad-response', err.message);
      throw err;
    }
  }

  async listInstances(ref: ServiceRef): Promise<Instance[]> {
    const call: NacosCall = {
      method: 'GET',
      path: '/v3/admin/ns/instance/list',
      params: { ...serviceParams(ref, 'v3'), healthyOnly: 'false' },
    };
    const answer = await this.http.request({ ...call, dialect: 'v3' });
    // "Service not exist" is the server's authoritative word that there is nothing: an empty service.
    const outcome = this.interpret(call, answer, [CODE.serviceNotExist]);
    if (outcome.code === CODE.serviceNotExist) return [];
    try {
      return hostsToInstances(outcome.data);
    } catch (err) {
      if (err instanceof WireFormatError) throw this.http.error(call, answer, 'nacos-bad-response', err.message);
      throw err;
    }
  }

  async register(ref: ServiceRef, instance: Instance): Promise<void> {
    await this.success({ method: 'POST', path: '/v3/admin/ns/instance', form: registerForm(ref, instance, 'v3') });
  }

  async deregister(ref: ServiceRef, instance: Instance): Promise<void> {
    const call: NacosCall = { method: 'DELETE', path: '/v3/admin/ns/instance', params: deregisterParams(ref, instance, 'v3') };
    const answer = await this.http.request({ ...call, dialect: 'v3' });
    // Already gone is removed.
    this.interpret(call, answer, [CODE.instanceNotFound, CODE.serviceNotExist]);
  }

  async beat(ref: ServiceRef, instance: Instance): Promise<BeatAnswer> {
    const call: NacosCall = {
      method: 'POST',
      path: '/v3/client/ns/instance',
      // Every field goes along: a server that took this as a plain register would still keep the
      // instance right.
      params: { ...registerParams(ref, instance, 'v3'), heartBeat: 'true' },
      priority: 'high',
    };
    const answer = await this.http.request({ ...call, dialect: 'v3' });
    const outcome = this.interpret(call, answer, [CODE.instanceNotFound, CODE.serviceNotExist]);
    return { result: outcome.code === CODE.success ? 'ok' : 'unknown' };
  }

  /**
   * Every page of `GET /nacos/v3/admin/ns/service/list` (empty services too), optionally filtered
   * by the server's group substring filter. A list that changes while it is paged may shift entries
   * across pages; the next full sync catches what slipped through.
   */
  private async pageServices(namespaceId: string, groupFilter: string | undefined, pageSize: number): Promise<GroupedService[]> {
    const found: GroupedService[] = [];
    for (let pageNo = 1; ; pageNo += 1) {
      const params: Record<string, string> = {
        namespaceId,
        ignoreEmptyService: 'false',
        withInstances: 'false',
        pageNo: String(pageNo),
        pageSize: String(pageSize),
      };
      if (groupFilter !== undefined) params.groupNameParam = groupFilter;
      const call: NacosCall = { method: 'GET', path: SERVICE_LIST, params };
      const { data, answer } = await this.success(call);
      const items = isRecord(data) ? data.pageItems : undefined;
      const pages = isRecord(data) ? Number(data.pagesAvailable) : NaN;
      if (!Array.isArray(items) || !Number.isFinite(pages)) {
        throw this.http.error(call, answer, 'nacos-bad-response', `expected {pagesAvailable, pageItems}, got: ${excerpt(answer.body)}`);
      }
      try {
        for (const item of items) found.push(groupedServiceOf(item));
      } catch (err) {
        if (err instanceof WireFormatError) throw this.http.error(call, answer, 'nacos-bad-response', err.message);
        throw err;
      }
      if (items.length === 0 || pageNo >= pages) return found;
    }
  }

  private async success(call: NacosCall): Promise<V3Success> {
    const answer = await this.http.request({ ...call, dialect: 'v3' });
    return { data: this.interpret(call, answer, []).data, answer };
  }

  /**
   * Reads `{code, message, data}`. Success, or one of the `accepted` codes (whatever the HTTP
   * status), is returned; anything else throws, quoting the server's message.
   */
  private interpret(call: NacosCall, answer: NacosAnswer, accepted: readonly number[]): { code: number; data: unknown } {
    const ok = answer.status >= 200 && answer.status < 300;
    let body: unknown;
    try {
      body = parseJson(answer.body);
    } catch {
      throw this.http.error(call, answer, ok ? 'nacos-bad-response' : 'nacos-http-error', excerpt(answer.body));
    }
    const code = isRecord(body) ? Number(body.code) : NaN;
    if (!isRecord(body) || !Number.isFinite(code)) {
      throw this.http.error(call, answer, ok ? 'nacos-bad-response' : 'nacos-http-error', excerpt(answer.body));
    }
    if (accepted.includes(code) || (ok && code === CODE.success)) return { code, data: body.data };
    const message = typeof body.message === 'string' ? body.message : excerpt(answer.body);
    throw this.http.error(call, answer, ok ? 'nacos-api-error' : 'nacos-http-error', message, code);
  }
}
