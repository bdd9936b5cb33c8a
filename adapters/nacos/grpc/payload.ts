import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/**
 * The one message of Nacos gRPC, as @grpc/proto-loader decodes it (`keepCase`): `metadata.type` is
 * the Java simple class name of the body, `body.value` its JSON in UTF-8. Nacos neither sets nor
 * reads `body.type_url`.
 */
export interface Payload {
  metadata?: { type?: string; clientIp?: string; headers?: Record<string, string> } | null;
  body?: { type_url?: string; value?: Buffer | Uint8Array } | null;
}

/** A payload read: its type, its headers (requests only) and its JSON body. */
export interface ReadPayload {
  type: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

/** A payload that is not a Nacos message: no type, or a body that is not a JSON object. */
export class PayloadError extends Error {
  override readonly name = 'PayloadError';
}

/** The proto's two services, loaded once per process. */
export interface NacosGrpcServices {
  Request: grpc.ServiceClientConstructor;
  BiRequestStream: grpc.ServiceClientConstructor;
}

/** Where the interface definition lives: beside this module, in the sources and in dist/. */
export const PROTO_PATH = fileURLToPath(new URL('./nacos_grpc_service.proto', import.meta.url));

/** Largest message either side accepts, as Nacos' client and server configure it (10 MiB). */
export const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

let loaded: NacosGrpcServices | undefined;

/** The `Request` (unary) and `BiRequestStream` (bidi) services; their paths are `/Request/request` and `/BiRequestStream/requestBiStream`. */
export function nacosGrpcServices(): NacosGrpcServices {
  if (loaded) return loaded;
  const definition = protoLoader.loadSync(PROTO_PATH, { keepCase: true, longs: String, enums: String, defaults: false, oneofs: true });
  const root = grpc.loadPackageDefinition(definition) as unknown as Record<string, grpc.ServiceClientConstructor>;
  const { Request, BiRequestStream } = root;
  if (!Request || !BiRequestStream) throw new Error(`${PROTO_PATH} does not define the Request and BiRequestStream services`);
  loaded = { Request, BiRequestStream };
  return loaded;
}

/**
 * A body already written as JSON text (a JSON object), sent as it is: a sender that serialized
 * part of a body for its own use (a digest of it) does not have it serialized a second time.
 */
export class EncodedBody {
  constructor(readonly json: string) {}
}

/**
 * A payload carrying `body` as the message class `type`. Request headers travel in
 * `metadata.headers`, so the body carries an empty `headers` object, as Nacos' own senders write it.
 */
export function toPayload(type: string, body: object, headers?: Record<string, string>, clientIp?: string): Payload {
  const metadata: NonNullable<Payload['metadata']> = { type };
  if (headers && Object.keys(headers).length > 0) metadata.headers = headers;
  if (clientIp !== undefined) metadata.clientIp = clientIp;
  const json = body instanceof EncodedBody ? body.json : JSON.stringify(body);
  return { metadata, body: { value: Buffer.from(json, 'utf8') } };
}

/** Reads a payload; throws {@link PayloadError} when it has no type or its body is not a JSON object. */
export function readPayload(payload: Payload): ReadPayload {
  const type = payload.metadata?.type;
  if (typeof type !== 'string' || type === '') throw new PayloadError('payload without metadata.type');
  const raw = payload.body?.value;
  let body: unknown = {};
  if (raw && raw.length > 0) {
    try {
      body = JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8'));
    } catch {
      throw new PayloadError(`${type} body is not JSON`);
    }
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new PayloadError(`${type} body is not a JSON object`);
  return { type, headers: { ...(payload.metadata?.headers ?? {}) }, body: body as Record<string, unknown> };
}
