import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { RegistryAuth, AuthResult } from '../auth.js';
import type { LabelSource } from '../label-selector.js';
import type { NamingStore } from '../naming-store.js';
import type { HostTimings } from '../service-view.js';
import type { UdpPusher } from '../udp-push.js';
import type { Params } from './params.js';

/** Everything a route needs; built once per registry. */
export interface RegistryContext {
  store: NamingStore;
  pusher: UdpPusher;
  auth: RegistryAuth;
  timings: HostTimings & { cacheMillis: number };
  log: Logger;
  /** Labels of IPs for service selectors; undefined without a CMDB. */
  cmdb: LabelSource | undefined;
}

export type RouteHandler = (params: Params, request: FastifyRequest, reply: FastifyReply) => unknown;

/** Credentials as Nacos clients send them: `accessToken` parameter or header, Bearer token, or user + password. */
export function checkAuth(ctx: RegistryContext, params: Params, request: FastifyRequest): AuthResult {
  const header = request.headers['accesstoken'];
  const bearer = /^Bearer\s+(.+)$/i.exec(request.headers.authorization ?? '')?.[1];
  return ctx.auth.check({
    accessToken: params.optional('accessToken') ?? (typeof header === 'string' ? header : undefined) ?? bearer,
    username: params.optional('username'),
    password: params.optional('password'),
  });
}

/** The address a request came from, without the IPv4-mapped prefix. */
export function peerAddress(request: FastifyRequest): string {
  const address = request.socket.remoteAddress ?? '127.0.0.1';
  return address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
}
