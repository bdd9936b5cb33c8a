import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { selectorView } from '../label-selector.js';
import { NamingError, PUBLIC_NAMESPACE, groupedName, type StoredService } from '../naming-store.js';
import { serviceInfoView } from '../service-view.js';
import { checkAuth, peerAddress, type RegistryContext, type RouteHandler } from './context.js';
import { ParamError, Params, splitServiceName, toStringRecord } from './params.js';

const OK_BEAT = 10200;
const UNKNOWN_INSTANCE = 20404;

/**
 * The Nacos v1 open API (`/nacos/v1/ns/...`) as Nacos 2.x serves it: what the official Node SDK,
 * nacos-sync and most scripts speak. Errors are plain text with status 400 (`caused: ...;`), 403 for
 * authentication, as the Nacos server answers them.
 */
export function registerV1Routes(app: FastifyInstance, ctx: RegistryContext): void {
  const { store } = ctx;
  const route = (handler: RouteHandler, { secured = true } = {}) => {
    return async (request: FastifyRequest, reply: FastifyReply) => {
      let params: Params | undefined;
      try {
        params = Params.of(request);
        if (secured) {
          const auth = checkAuth(ctx, params, request);
          if (!auth.ok) return reply.code(403).type('text/plain; charset=utf-8').send(auth.message);
        }
        return await handler(params, request, reply);
      } catch (err) {
        if (err instanceof ParamError || err instanceof NamingError) {
          return reply.code(400).type('text/plain; charset=utf-8').send(`caused: ${err.message};`);
        }
        throw err;
      }
    };
  };
  const text = (reply: FastifyReply, body: string) => reply.type('text/plain; charset=utf-8').send(body);

  app.post('/nacos/v1/ns/instance', route((p, _req, reply) => {
    const { groupName, name } = p.service();
    const instance = p.instance();
    store.register(p.namespace(), groupName, name, instance);
    return text(reply, 'ok');
  }));

  app.put('/nacos/v1/ns/instance', route((p, _req, reply) => {
    const { groupName, name } = p.service();
    const instance = p.instance();
    store.update(p.namespace(), groupName, name, instance);
    return text(reply, 'ok');
  }));

  app.delete('/nacos/v1/ns/instance', route((p, _req, reply) => {
    const { groupName, name } = p.service();
    const ip = p.required('ip').trim();
    const port = p.int('port', undefined, 0, 65535);
    store.deregister(p.namespace(), groupName, name, ip, port, p.clusterName());
    return text(reply, 'ok');
  }));

  app.get('/nacos/v1/ns/instance', route((p, _req, reply) => {
    const { groupName, name } = p.service();
    const ip = p.required('ip').trim();
    const port = p.int('port', undefined, 0, 65535);
    const cluster = p.clusterName(p.optional('cluster') !== undefined ? 'cluster' : 'clusterName');
    const service = store.getService(p.namespace(), groupName, name);
    const instance = service?.instances.get(`${ip}#${port}#${cluster}`);
    if (!service || !instance) {
      throw new NamingError('instance-not-found', `no matched ip found!`);
    }
    return reply.send({
      service: groupedName(groupName, name),
      ip,
      port,
      clusterName: cluster,
      weight: instance.weight,
      healthy: instance.healthy,
      enabled: instance.enabled,
      ephemeral: instance.ephemeral,
      instanceId: `${ip}#${port}#${cluster}#${groupedName(groupName, name)}`,
      metadata: instance.metadata,
    });
  }));

  app.get('/nacos/v1/ns/instance/list', route((p, request, reply) => {
    const { groupName, name } = p.service();
    const namespaceId = p.namespace();
    const clusters = p.optional('clusters') ?? '';
    const udpPort = p.int('udpPort', 0, 0, 65535);
    // The selector's consumer is the self-reported clientIP: a label lookup key, never an address.
    const consumerIp = p.optional('clientIP')?.trim();
    if (udpPort > 0) {
      ctx.pusher.subscribe(namespaceId, groupedName(groupName, name), {
        address: peerAddress(request),
        port: udpPort,
        clusters,
        clientIP: consumerIp ?? peerAddress(request),
        consumerIp,
        agent: String(request.headers['user-agent'] ?? ''),
      });
    }
    const service = store.getService(namespaceId, groupName, name);
    return reply.send(
      serviceInfoView(
        service,
        { groupName, name },
        { clusters, healthyOnly: p.bool('healthyOnly', false), enabledOnly: true },
        ctx.timings,
        { ip: consumerIp, labels: ctx.cmdb },
      ),
    );
  }));

  app.put('/nacos/v1/ns/instance/beat', route((p, _req, reply) => {
    const beatText = p.optional('beat');
    const beat = beatText === undefined ? undefined : parseBeat(beatText);
    const serviceName = p.optional('serviceName') ?? beat?.serviceName;
    if (serviceName === undefined) throw new ParamError('missing', 'serviceName', `Param 'serviceName' is required.`);
    const { groupName, name } = splitServiceName(serviceName, p.optional('groupName') ?? 'DEFAULT_GROUP');
    const namespaceId = p.namespace();
    const ip = beat?.ip ?? p.required('ip').trim();
    const port = beat?.port ?? p.int('port', undefined, 0, 65535);
    const clusterName = beat?.cluster ?? p.clusterName();
    const answer = (code: number) =>
      reply.send({ clientBeatInterval: ctx.timings.beatIntervalMs, code, lightBeatEnabled: true });
    if (store.beat(namespaceId, groupName, name, ip, port, clusterName)) return answer(OK_BEAT);
    if (!beat) return answer(UNKNOWN_INSTANCE);
    // A full beat for an instance the registry lost (restart, expiry): re-create it, as Nacos does.
    store.register(namespaceId, groupName, name, {
      ip,
      port,
      clusterName,
      weight: beat.weight,
      healthy: true,
      enabled: true,
      ephemeral: true,
      metadata: beat.metadata,
    });
    ctx.log.info({ namespaceId, service: groupedName(groupName, name), ip, port }, 'instance re-created from beat');
    return answer(OK_BEAT);
  }));

  // Service create, update, detail and delete (Nacos 2.x `ServiceController`). `serviceName` may be
  // `group@@name`; otherwise `groupName` (default DEFAULT_GROUP) applies, as Nacos' ServiceNameFilter does.
  app.post('/nacos/v1/ns/service', route((p, _req, reply) => {
    const { groupName, name } = p.service();
    const settings = p.serviceSettings(false);
    store.createService(p.namespace(), groupName, name, settings);
    return text(reply, 'ok');
  }));

  app.put('/nacos/v1/ns/service', route((p, _req, reply) => {
    const { groupName, name } = p.service();
    const settings = p.serviceSettings(true);
    store.updateService(p.namespace(), groupName, name, settings);
    return text(reply, 'ok');
  }));

  app.get('/nacos/v1/ns/service', route((p, _req, reply) => {
    const { groupName, name } = p.service();
    const namespaceId = p.namespace();
    const service = store.getService(namespaceId, groupName, name);
    if (!service) {
      throw new NamingError('service-not-found', `service not found, namespace: ${namespaceId}, serviceName: ${groupedName(groupName, name)}`);
    }
    return reply.send(serviceDetail(service));
  }));

  app.delete('/nacos/v1/ns/service', route((p, _req, reply) => {
    const { groupName, name } = p.service();
    store.deleteService(p.namespace(), groupName, name);
    return text(reply, 'ok');
  }));

  app.get('/nacos/v1/ns/service/list', route((p, _req, reply) => {
    const pageNo = p.int('pageNo', undefined, 1, Number.MAX_SAFE_INTEGER);
    const pageSize = p.int('pageSize', undefined, 1, 10_000);
    const groupName = p.optional('groupName') ?? 'DEFAULT_GROUP';
    const names = store.listServices(p.namespace(), groupName).map((s) => s.name);
    return reply.send({ count: names.length, doms: names.slice((pageNo - 1) * pageSize, pageNo * pageSize) });
  }));

  // The catalog list (Nacos 2.x `CatalogController.listDetail` over `CatalogServiceV2Impl`): every
  // service of a namespace, optionally filtered by substrings of group and name, in pages.
  app.get('/nacos/v1/ns/catalog/services', route((p, _req, reply) => {
    const pageNo = p.int('pageNo', 1, 1, Number.MAX_SAFE_INTEGER);
    const pageSize = p.int('pageSize', 10, 1, 10_000);
    const services = catalogServices(store.listServices(p.namespace()), {
      group: p.optional('groupNameParam'),
      name: p.optional('serviceNameParam'),
      nonEmptyOnly: p.bool('hasIpCount', false),
    });
    const page = services.slice((pageNo - 1) * pageSize, pageNo * pageSize);
    if (p.bool('withInstances', false)) return reply.send(page.map(serviceDetailInfo));
    return reply.send({ count: services.length, serviceList: page.map(serviceView) });
  }));

  app.get('/nacos/v1/ns/operator/metrics', route((_p, _req, reply) => {
    let serviceCount = 0;
    let instanceCount = 0;
    for (const ns of store.listNamespaces()) {
      for (const s of store.listServices(ns.id)) {
        serviceCount += 1;
        instanceCount += s.instances.size;
      }
    }
    return reply.send({
      status: 'UP',
      serviceCount,
      instanceCount,
      subscribeCount: ctx.pusher.stats().sent,
      responsibleInstanceCount: instanceCount,
      clientCount: 0,
      cpu: 0,
      load: 0,
      mem: 0,
    });
  }));

  app.get('/nacos/v1/console/namespaces', route((_p, _req, reply) =>
    reply.send({
      code: 200,
      message: null,
      data: store.listNamespaces().map((ns) => ({
        namespace: ns.id === PUBLIC_NAMESPACE ? '' : ns.id,
        namespaceShowName: ns.name,
        namespaceDesc: ns.description,
        quota: 200,
        configCount: 0,
        type: ns.id === PUBLIC_NAMESPACE ? 0 : 2,
      })),
    }),
  ));

  app.post('/nacos/v1/console/namespaces', route((p, _req, reply) => {
    const id = p.optional('customNamespaceId') ?? p.required('namespaceName');
    const created = store.createNamespace({ id, name: p.required('namespaceName'), description: p.optional('namespaceDesc') ?? '' });
    return reply.send(created);
  }));

  const login = route(
    (p, _req, reply) => {
      const token = ctx.auth.login(p.required('username'), p.required('password'));
      if (!token) return reply.code(403).type('text/plain; charset=utf-8').send('unknown user!');
      return reply.send({ ...token, globalAdmin: true });
    },
    { secured: false },
  );
  app.post('/nacos/v1/auth/login', login);
  app.post('/nacos/v1/auth/users/login', login);
}

/**
 * The detail document of `GET /nacos/v1/ns/service`, field for field what Nacos 2.x answers
 * (`ServiceOperatorV2Impl.queryService`): clusters are the ones instances use; their health checker
 * and metadata are those of a cluster nobody configured (null and empty), since the registry keeps none.
 */
function serviceDetail(service: StoredService): Record<string, unknown> {
  const clusters = [...new Set([...service.instances.values()].map((i) => i.clusterName))].sort();
  return {
    namespaceId: service.namespaceId,
    groupName: service.groupName,
    name: service.name,
    protectThreshold: service.protectThreshold,
    metadata: { ...service.metadata },
    selector: selectorView(service.selector),
    clusters: clusters.map((c) => ({ name: c, healthChecker: null, metadata: {} })),
  };
}

/**
 * What the catalog list keeps: Nacos matches `group@@name` against `.*{group}.*@@.*{name}.*`
 * (blank parts match anything), which for plain names is a substring test; `hasIpCount` leaves
 * empty services out.
 */
function catalogServices(
  services: StoredService[],
  filter: { group: string | undefined; name: string | undefined; nonEmptyOnly: boolean },
): StoredService[] {
  return services.filter(
    (s) =>
      (filter.group === undefined || s.groupName.includes(filter.group)) &&
      (filter.name === undefined || s.name.includes(filter.name)) &&
      (!filter.nonEmptyOnly || s.instances.size > 0),
  );
}

/**
 * One `serviceList` entry of the catalog list, as Nacos 2.x's `ServiceView`. `triggerFlag` says
 * whether the healthy share is at or below the protect threshold (`"false"` for an empty service:
 * Java compares NaN as false).
 */
function serviceView(service: StoredService): Record<string, unknown> {
  const instances = [...service.instances.values()];
  const healthy = instances.filter((i) => i.healthy).length;
  return {
    name: service.name,
    groupName: service.groupName,
    clusterCount: new Set(instances.map((i) => i.clusterName)).size,
    ipCount: instances.length,
    healthyInstanceCount: healthy,
    triggerFlag: String(instances.length > 0 && healthy / instances.length <= service.protectThreshold),
  };
}

/** One entry of the catalog list with `withInstances=true` (Nacos 2.x `ServiceDetailInfo`): a plain array, no count. */
function serviceDetailInfo(service: StoredService): Record<string, unknown> {
  const clusterMap: Record<string, { hosts: Array<Record<string, unknown>> }> = {};
  for (const i of service.instances.values()) {
    const cluster = (clusterMap[i.clusterName] ??= { hosts: [] });
    cluster.hosts.push({ ip: i.ip, port: i.port, valid: i.healthy, marked: false, metadata: { ...i.metadata }, weight: i.weight, enabled: i.enabled });
  }
  return { serviceName: service.name, groupName: service.groupName, metadata: { ...service.metadata }, clusterMap };
}

interface Beat {
  serviceName: string | undefined;
  ip: string | undefined;
  port: number | undefined;
  cluster: string | undefined;
  weight: number;
  metadata: Record<string, string>;
}

/** The `beat` parameter: URL-encoded JSON `{cluster, ip, port, metadata, scheduled, serviceName, weight}`. */
function parseBeat(text: string): Beat {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ParamError('invalid', 'beat', 'beat format incorrect: not JSON');
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ParamError('invalid', 'beat', 'beat format incorrect: expected a JSON object');
  }
  const b = raw as Record<string, unknown>;
  const port = b.port === undefined ? undefined : Number(b.port);
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) {
    throw new ParamError('invalid', 'beat', `beat format incorrect: port ${String(b.port)}`);
  }
  const weight = b.weight === undefined ? 1 : Number(b.weight);
  const cluster = typeof b.cluster === 'string' && b.cluster !== '' ? b.cluster : undefined;
  if (cluster !== undefined && !/^[0-9a-zA-Z-]+$/.test(cluster)) {
    throw new ParamError('invalid', 'beat', `cluster name can only have these characters: 0-9a-zA-Z-, current: ${cluster}`);
  }
  return {
    serviceName: typeof b.serviceName === 'string' && b.serviceName !== '' ? b.serviceName : undefined,
    ip: typeof b.ip === 'string' && b.ip !== '' ? b.ip : undefined,
    port,
    cluster,
    weight: Number.isFinite(weight) && weight >= 0 && weight <= 10000 ? weight : 1,
    metadata: b.metadata === undefined || b.metadata === null ? {} : toStringRecord(b.metadata, 'beat.metadata'),
  };
}
