import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NamingError } from '../naming-store.js';
import { serviceInfoView } from '../service-view.js';
import { checkAuth, type RegistryContext, type RouteHandler } from './context.js';
import { ParamError, Params } from './params.js';

/** Codes of the Nacos 2.x `Result` wrapper that the v2 routes answer with. */
export const V2_CODES = {
  success: 0,
  parameterMissing: 10000,
  parameterInvalid: 20002,
  accessDenied: 403,
} as const;

/**
 * The part of the Nacos 2.x v2 open API (`/nacos/v2/ns/...`) that the embedded registry serves: the
 * instance list, with the consumer named by `ip` for service selectors. Answers are wrapped
 * `{code, message, data}`; failures carry an HTTP error status too. Deliberately left out: v2
 * register/deregister (v1 and v3 cover them) and UDP subscription through `port` (v1 `udpPort` does it).
 */
export function registerV2Routes(app: FastifyInstance, ctx: RegistryContext): void {
  const { store } = ctx;
  const fail = (reply: FastifyReply, status: number, code: number, message: string, data: string | null) =>
    reply.code(status).send({ code, message, data });
  const route = (handler: RouteHandler) => {
    return async (request: FastifyRequest, reply: FastifyReply) => {
      try {
        const params = Params.of(request);
        const auth = checkAuth(ctx, params, request);
        if (!auth.ok) return fail(reply, 403, V2_CODES.accessDenied, auth.message, null);
        return await handler(params, request, reply);
      } catch (err) {
        if (err instanceof ParamError) {
          return err.kind === 'missing'
            ? fail(reply, 400, V2_CODES.parameterMissing, 'parameter missing', `Required parameter '${err.param}' type String is not present`)
            : fail(reply, 400, V2_CODES.parameterInvalid, 'parameter validate error', err.message);
        }
        if (err instanceof NamingError) return fail(reply, 400, V2_CODES.parameterInvalid, 'parameter validate error', err.message);
        throw err;
      }
    };
  };

  // `namespaceId`, `groupName`, `serviceName`*, `clusterName`, `ip` (the consumer), `healthyOnly`.
  app.get('/nacos/v2/ns/instance/list', route((p, _req, reply) => {
    const { groupName, name } = p.service();
    const service = store.getService(p.namespace(), groupName, name);
    const view = serviceInfoView(
      service,
      { groupName, name },
      { clusters: p.optional('clusterName') ?? '', healthyOnly: p.bool('healthyOnly', false), enabledOnly: true },
      ctx.timings,
      { ip: p.optional('ip')?.trim(), labels: ctx.cmdb },
    );
    return reply.send({ code: V2_CODES.success, message: 'success', data: view });
  }));
}
