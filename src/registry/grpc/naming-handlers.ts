import type { Logger } from 'pino';
import type { ReadPayload } from '../../../adapters/nacos/grpc/payload.js';
import { ERROR_RESPONSE, failBody, NACOS_CODE, okBody, REQUEST, RESPONSE_OF, WATCH_TYPE, type ResponseBody } from '../../../adapters/nacos/grpc/messages.js';
import type { RegistryAuth } from '../auth.js';
import { groupedName, NamingError, type NamingStore } from '../naming-store.js';
import type { GrpcConnection } from './connection.js';
import type { FuzzyWatchHub } from './fuzzy-watch.js';
import type { GrpcPusher } from './grpc-pusher.js';
import { GrpcRequestError } from './grpc-request-error.js';
import { readInstance, readInstances, readServiceRef } from './naming-input.js';

/** What the naming handlers work on. */
export interface NamingHandlerContext {
  store: NamingStore;
  pusher: GrpcPusher;
  auth: RegistryAuth;
  log: Logger;
  /** Fuzzy watch (Nacos 3.x); undefined when the registry does not serve it, as a Nacos 2.x server (302, no handler). */
  fuzzy: FuzzyWatchHub | undefined;
}

/** An answer: the response class and its body. */
export interface GrpcAnswer {
  type: string;
  body: ResponseBody;
}

interface NamingHandler {
  /** Needs the connection's naming client (set up with `module: naming`); Nacos answers -401 without one. */
  ownsState: boolean;
  /** Answers the fields of a successful response; throws (or rejects with) GrpcRequestError or NamingError to refuse. */
  handle(ctx: NamingHandlerContext, connection: GrpcConnection, body: Record<string, unknown>): Record<string, unknown> | Promise<Record<string, unknown>>;
}

const HANDLERS: Readonly<Record<string, NamingHandler>> = {
  [REQUEST.instance]: {
    ownsState: true,
    handle(ctx, connection, body) {
      const ref = readServiceRef(body);
      const op = body.type;
      if (op === 'registerInstance') {
        const instance = readInstance(body.instance, ref, { ephemeral: true, single: true });
        ctx.store.publish(connection.id, ref.namespaceId, ref.groupName, ref.name, [instance]);
      } else if (op === 'deregisterInstance') {
        // The instance is checked as Nacos' parameter filter does, then ignored: the whole entry goes.
        if (body.instance !== undefined && body.instance !== null) readInstance(body.instance, ref, { ephemeral: true, single: false });
        ctx.store.unpublish(connection.id, ref.namespaceId, ref.groupName, ref.name);
      } else {
        throw new GrpcRequestError(400, `Unsupported request type ${String(op)}`);
      }
      return { type: op };
    },
  },
  [REQUEST.batchInstance]: {
    ownsState: true,
    handle(ctx, connection, body) {
      const ref = readServiceRef(body);
      if (body.type !== 'batchRegisterInstance') throw new GrpcRequestError(400, `Unsupported request type ${String(body.type)}`);
      ctx.store.publish(connection.id, ref.namespaceId, ref.groupName, ref.name, readInstances(body.instances, ref));
      return { type: body.type };
    },
  },
  [REQUEST.persistentInstance]: {
    ownsState: false,
    handle(ctx, _connection, body) {
      const ref = readServiceRef(body);
      const op = body.type;
      if (op !== 'registerInstance' && op !== 'deregisterInstance') throw new GrpcRequestError(400, `Unsupported request type ${String(op)}`);
      // Keyed by ip:port:cluster and not tied to the connection: the same store entry an HTTP registration makes.
      const { instanceId: _id, ...instance } = readInstance(body.instance, ref, { ephemeral: false, single: true });
      if (op === 'registerInstance') ctx.store.register(ref.namespaceId, ref.groupName, ref.name, instance);
      else ctx.store.deregister(ref.namespaceId, ref.groupName, ref.name, instance.ip, instance.port, instance.clusterName);
      return { type: op };
    },
  },
  [REQUEST.subscribeService]: {
    ownsState: true,
    handle(ctx, connection, body) {
      const ref = readServiceRef(body);
      const clusters = typeof body.clusters === 'string' ? body.clusters : '';
      const serviceInfo = ctx.pusher.serviceInfo(ref, clusters, connection.setup.clientIp, false);
      if (body.subscribe === false) ctx.pusher.unsubscribe(connection, ref);
      else ctx.pusher.subscribe(connection, ref, clusters);
      return { message: 'success', serviceInfo };
    },
  },
  [REQUEST.serviceQuery]: {
    ownsState: false,
    handle(ctx, connection, body) {
      const ref = readServiceRef(body);
      const cluster = typeof body.cluster === 'string' ? body.cluster : '';
      return { serviceInfo: ctx.pusher.serviceInfo(ref, cluster, connection.setup.clientIp, body.healthyOnly === true) };
    },
  },
  [REQUEST.serviceList]: {
    ownsState: false,
    handle(ctx, _connection, body) {
      const ref = readServiceRef(body, false);
      const pageNo = Math.max(1, integer(body.pageNo, 1));
      const pageSize = Math.max(0, integer(body.pageSize, 10));
      // The group must match exactly: a blank one matches no service.
      const { count, names } = ctx.store.serviceNamesPage(ref.namespaceId, ref.groupName, pageNo, pageSize);
      return { count, serviceNames: names };
    },
  },
  [REQUEST.fuzzyWatch]: {
    // Nacos keys fuzzy watches by connection id, naming client or not.
    ownsState: false,
    handle(ctx, connection, body) {
      const fuzzy = ctx.fuzzy as FuzzyWatchHub;
      const pattern = body.groupKeyPattern;
      if (typeof pattern !== 'string' || pattern === '') throw new GrpcRequestError(400, 'groupKeyPattern is required');
      if (body.watchType === WATCH_TYPE.cancel) {
        fuzzy.cancel(connection, pattern);
        return {};
      }
      if (body.watchType !== WATCH_TYPE.watch) throw new GrpcRequestError(400, `Unsupported request type ${String(body.watchType)}`);
      const received = Array.isArray(body.receivedGroupKeys) ? body.receivedGroupKeys.filter((k): k is string => typeof k === 'string') : [];
      // Answered once the pattern's matched set is built: a new pattern scans its namespace in slices.
      return fuzzy.watch(connection, pattern, received, body.initializing === true).then(() => ({}));
    },
  },
};

/** Whether `type` is a naming request class the server handles. */
export function isNamingRequest(type: string): boolean {
  return Object.hasOwn(HANDLERS, type);
}

/**
 * Handles one naming request of a registered connection, in Nacos' order: auth (when the registry
 * has users), parameters, the connection's naming client (-401 without `module: naming`), then the
 * handler. Refusals come back in the handler's response type with `resultCode` 500 and the Nacos
 * `errorCode` (403, 400, 500); -401 comes back as `ErrorResponse` with that code as `resultCode` too.
 */
export function handleNaming(ctx: NamingHandlerContext, connection: GrpcConnection, request: ReadPayload): GrpcAnswer | Promise<GrpcAnswer> {
  const handler = HANDLERS[request.type];
  const type = RESPONSE_OF[request.type] ?? ERROR_RESPONSE;
  if (!handler || (request.type === REQUEST.fuzzyWatch && !ctx.fuzzy)) return { type: ERROR_RESPONSE, body: failBody(NACOS_CODE.noHandler, 'RequestHandler Not Found') };
  const refused = (err: unknown): GrpcAnswer => {
    if (err instanceof GrpcRequestError) return { type, body: failBody(err.errorCode, err.message) };
    if (err instanceof NamingError) return { type, body: failBody(NACOS_CODE.invalidParam, err.message) };
    ctx.log.warn({ err, connectionId: connection.id, type: request.type }, 'grpc naming request failed');
    return { type, body: failBody(NACOS_CODE.fail, err instanceof Error ? err.message : String(err)) };
  };
  const answered = (fields: Record<string, unknown>): GrpcAnswer => {
    ctx.log.debug({ connectionId: connection.id, type: request.type, service: serviceOf(request.body) }, 'grpc naming request');
    return { type, body: okBody(fields) };
  };
  try {
    authorize(ctx.auth, request.headers);
    if (handler.ownsState && !connection.isNaming) {
      readServiceRef(request.body, request.type !== REQUEST.serviceList);
      return {
        type: ERROR_RESPONSE,
        body: failBody(NACOS_CODE.clientDisconnect, `Connection ${connection.id} has no naming client (setup without module=naming)`, NACOS_CODE.clientDisconnect),
      };
    }
    const fields = handler.handle(ctx, connection, request.body);
    return fields instanceof Promise ? fields.then(answered, refused) : answered(fields);
  } catch (err) {
    return refused(err);
  }
}

/** Credentials in `metadata.headers`, with Nacos' exact names: `accessToken`, `Authorization: Bearer`, or `username` + `password`. */
function authorize(auth: RegistryAuth, headers: Record<string, string>): void {
  if (!auth.enabled) return;
  const bearer = /^Bearer\s+(.+)$/i.exec(headers.Authorization ?? '')?.[1];
  const result = auth.check({ accessToken: headers.accessToken || bearer, username: headers.username, password: headers.password });
  if (!result.ok) throw new GrpcRequestError(403, result.message);
}

function integer(v: unknown, fallback: number): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : NaN;
  return Number.isInteger(n) ? n : fallback;
}

function serviceOf(body: Record<string, unknown>): string | undefined {
  return typeof body.groupName === 'string' && typeof body.serviceName === 'string' ? groupedName(body.groupName, body.serviceName) : undefined;
}
