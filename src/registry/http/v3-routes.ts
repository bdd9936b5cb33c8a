import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NamingError, PUBLIC_NAMESPACE } from '../naming-store.js';
import { selectHosts } from '../service-view.js';
import { checkAuth, type RegistryContext, type RouteHandler } from './context.js';
import { ParamError, Params } from './params.js';

/** Error codes of the Nacos 3.x API that clients act on. */
export const V3_CODES = {
  success: 0,
  parameterMissing: 10000,
  parameterInvalid: 20002,
  instanceNotFound: 21003,
  namespaceMissing: 22001,
  accessDenied: 403,
  serverError: 30000,
} as const;

/**
 * The Nacos 3.x admin (`/nacos/v3/admin/...`) and client (`/nacos/v3/client/...`) naming API.
 * Every answer is wrapped `{code, message, data}`; failures carry an HTTP error status too.
 */
export function registerV3Routes(app: FastifyInstance, ctx: RegistryContext): void {
  const { store } = ctx;
  const ok = (reply: FastifyReply, data: unknown) => reply.send({ code: V3_CODES.success, message: 'success', data });
  const fail = (reply: FastifyReply, status: number, code: number, message: string) =>
    reply.code(status).send({ code, message, data: null });
  const route = (handler: RouteHandler, { secured = true } = {}) => {
    return async (request: FastifyRequest, reply: FastifyReply) => {
      try {
        const params = Params.of(request);
        if (secured) {
          const auth = checkAuth(ctx, params, request);
          if (!auth.ok) return fail(reply, 403, V3_CODES.accessDenied, auth.message);
        }
        return await handler(params, request, reply);
      } catch (err) {
        if (err instanceof ParamError) {
          return err.kind === 'missing'
            ? fail(reply, 400, V3_CODES.parameterMissing, `Required parameter '${err.param}' type String is not present`)
            : fail(reply, 400, V3_CODES.parameterInvalid, err.message);
        }
        if (err instanceof NamingError) {
          return err.code === 'instance-not-found'
            ? fail(reply, 404, V3_CODES.instanceNotFound, err.message)
            : fail(reply, 400, V3_CODES.parameterInvalid, err.message);
        }
        throw err;
      }
    };
  };

  const register = (p: Params, reply: FastifyReply) => {
    const { groupName, name } = p.service();
    const instance = p.instance();
    store.register(p.namespace(), groupName, name, instance);
    return ok(reply, 'ok');
  };
  const deregister = (p: Params, reply: FastifyReply) => {
    const { groupName, name } = p.service();
    const ip = p.required('ip').trim();
    const port = p.int('port', undefined, 0, 65535);
    store.deregister(p.namespace(), groupName, name, ip, port, p.clusterName());
    return ok(reply, 'ok');
  };
  const list = (p: Params, reply: FastifyReply, enabledOnly: boolean) => {
    const { groupName, name } = p.service();
    const service = store.getService(p.namespace(), groupName, name);
    const clusters = p.optional('clusterName') ?? p.optional('clusters') ?? '';
    return ok(reply, selectHosts(service, { clusters, healthyOnly: p.bool('healthyOnly', false), enabledOnly }, ctx.timings));
  };

  // Admin API.
  app.post('/nacos/v3/admin/ns/instance', route((p, _r, reply) => register(p, reply)));
  app.delete('/nacos/v3/admin/ns/instance', route((p, _r, reply) => deregister(p, reply)));
  app.put('/nacos/v3/admin/ns/instance', route((p, _r, reply) => {
    const { groupName, name } = p.service();
    store.update(p.namespace(), groupName, name, p.instance());
    return ok(reply, 'ok');
  }));
  app.get('/nacos/v3/admin/ns/instance/list', route((p, _r, reply) => list(p, reply, false)));

  app.get('/nacos/v3/admin/ns/service/list', route((p, _r, reply) => {
    const pageNo = p.int('pageNo', 1, 1, Number.MAX_SAFE_INTEGER);
    const pageSize = p.int('pageSize', 100, 1, 10_000);
    const group = p.optional('groupNameParam');
    const nameFilter = p.optional('serviceNameParam');
    const ignoreEmpty = p.bool('ignoreEmptyService', true);
    const withInstances = p.bool('withInstances', false);
    const services = store
      .listServices(p.namespace())
      .filter((s) => group === undefined || s.groupName.includes(group))
      .filter((s) => nameFilter === undefined || s.name.includes(nameFilter))
      .filter((s) => !ignoreEmpty || s.instances.size > 0);
    const page = services.slice((pageNo - 1) * pageSize, pageNo * pageSize);
    return ok(reply, {
      totalCount: services.length,
      pageNumber: pageNo,
      pagesAvailable: Math.ceil(services.length / pageSize),
      pageItems: page.map((s) => {
        const instances = [...s.instances.values()];
        return {
          name: s.name,
          groupName: s.groupName,
          clusterCount: new Set(instances.map((i) => i.clusterName)).size,
          ipCount: instances.length,
          healthyInstanceCount: instances.filter((i) => i.healthy).length,
          triggerFlag: false,
          ...(withInstances
            ? { instances: selectHosts(s, { clusters: '', healthyOnly: false, enabledOnly: false }, ctx.timings) }
            : {}),
        };
      }),
    });
  }));

  app.get('/nacos/v3/admin/core/namespace/list', route((_p, _r, reply) =>
    ok(
      reply,
      store.listNamespaces().map((ns) => ({
        namespace: ns.id,
        namespaceShowName: ns.name,
        namespaceDesc: ns.description,
        quota: 200,
        configCount: 0,
        type: ns.id === PUBLIC_NAMESPACE ? 0 : 2,
      })),
    ),
  ));

  app.post('/nacos/v3/admin/core/namespace', route((p, _r, reply) => {
    const id = p.optional('namespaceId') ?? p.required('namespaceName');
    const created = store.createNamespace({ id, name: p.required('namespaceName'), description: p.optional('namespaceDesc') ?? '' });
    return ok(reply, created);
  }));

  // Client API: register or renew (`heartBeat=true`), deregister, list.
  app.post('/nacos/v3/client/ns/instance', route((p, _r, reply) => {
    if (!p.bool('heartBeat', false)) return register(p, reply);
    const { groupName, name } = p.service();
    const ip = p.required('ip').trim();
    const port = p.int('port', undefined, 0, 65535);
    const clusterName = p.clusterName();
    if (!store.beat(p.namespace(), groupName, name, ip, port, clusterName)) {
      throw new NamingError('instance-not-found', `instance not found: ${ip}:${port} in ${groupName}@@${name}`);
    }
    return ok(reply, 'ok');
  }));
  app.delete('/nacos/v3/client/ns/instance', route((p, _r, reply) => deregister(p, reply)));
  app.get('/nacos/v3/client/ns/instance/list', route((p, _r, reply) => list(p, reply, true)));

  app.post('/nacos/v3/auth/user/login', route(
    (p, _r, reply) => {
      const username = p.required('username');
      const token = ctx.auth.login(username, p.required('password'));
      if (!token) return fail(reply, 403, V3_CODES.accessDenied, 'unknown user!');
      return reply.send({ ...token, globalAdmin: true, username });
    },
    { secured: false },
  ));
}
