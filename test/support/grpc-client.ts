import * as grpc from '@grpc/grpc-js';
import { nacosGrpcServices, readPayload, toPayload, type Payload, type ReadPayload } from '../../adapters/nacos/grpc/payload.js';
import { waitUntil } from './wait-until.js';

/** How a {@link TestGrpcClient} answers a server request on the stream; undefined = no answer at all. */
export type Answerer = (request: ReadPayload) => { type: string; body: Record<string, unknown> } | undefined;

/** Answers every server request with its response class and success, as a well-behaved SDK does. */
export const answerOk: Answerer = (request) => {
  const type = request.type.replace(/Request$/, 'Response');
  return { type, body: { resultCode: 200, errorCode: 0, requestId: request.body.requestId, success: true } };
};

export interface TestGrpcClientOptions {
  /** `ConnectionSetupRequest.labels`; default `{source:'sdk', module:'naming', AppName:'test'}`. */
  labels?: Record<string, string>;
  /** `metadata.clientIp` of the setup (the consumer IP for selectors). Default 127.0.0.1. */
  clientIp?: string;
  /** Send `abilityTable: {}` and wait for SetupAck (default true); false: wait for a health check to pass. */
  abilityTable?: boolean;
  /** Skip the setup entirely (only ServerCheck). */
  setup?: boolean;
  /** Headers put on every naming request (auth). */
  headers?: Record<string, string>;
}

/**
 * A bare Nacos SDK connection for tests, over the real @grpc/grpc-js client and the shared payload
 * codec: one HTTP/2 channel for unary calls and the bi-stream (the stream client overrides its channel
 * with the unary client's), the handshake as the Java SDK does it, every server request recorded and
 * answered by a replaceable answerer.
 */
export class TestGrpcClient {
  /** Server requests received on the stream, in order (SetupAck included). */
  readonly received: ReadPayload[] = [];
  answer: Answerer = answerOk;
  connectionId = '';
  streamEnded = false;
  private readonly unary: grpc.Client;
  private readonly biClient: grpc.Client;
  private stream: grpc.ClientDuplexStream<Payload, Payload> | undefined;

  constructor(
    readonly address: string,
    private readonly options: TestGrpcClientOptions = {},
  ) {
    const { Request, BiRequestStream } = nacosGrpcServices();
    // A local subchannel pool: two test clients must not share one HTTP/2 connection (grpc-js pools
    // subchannels globally), or the server would see them as one connection.
    this.unary = new Request(address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    this.biClient = new BiRequestStream(address, grpc.credentials.createInsecure(), { channelOverride: this.unary.getChannel() });
  }

  /** ServerCheck, then (unless `setup: false`) the bi-stream with ConnectionSetupRequest and the wait for its ack. */
  static async connect(address: string, options: TestGrpcClientOptions = {}): Promise<TestGrpcClient> {
    const client = new TestGrpcClient(address, options);
    const check = await client.call('ServerCheckRequest', { headers: {}, module: 'internal' });
    client.connectionId = String(check.body.connectionId);
    if (options.setup !== false) await client.setup();
    return client;
  }

  /** Opens the bi-stream and writes ConnectionSetupRequest; resolves once the server has registered it. */
  async setup(): Promise<void> {
    const stream = (this.biClient as unknown as { requestBiStream(): grpc.ClientDuplexStream<Payload, Payload> }).requestBiStream();
    this.stream = stream;
    stream.on('data', (payload: Payload) => {
      const message = readPayload(payload);
      this.received.push(message);
      if (message.type === 'SetupAckRequest') return;
      const reply = this.answer(message);
      if (reply) stream.write(toPayload(reply.type, reply.body));
    });
    stream.on('error', () => {
      this.streamEnded = true;
    });
    stream.on('end', () => {
      this.streamEnded = true;
    });
    const withAbilities = this.options.abilityTable !== false;
    stream.write(
      toPayload(
        'ConnectionSetupRequest',
        {
          headers: {},
          clientVersion: 'Nacos-Java-Client:v2.5.1',
          labels: this.options.labels ?? { source: 'sdk', module: 'naming', AppName: 'test' },
          ...(withAbilities ? { abilityTable: {} } : {}),
          module: 'internal',
        },
        undefined,
        this.options.clientIp ?? '127.0.0.1',
      ),
    );
    if (withAbilities) await waitUntil(() => this.received.some((m) => m.type === 'SetupAckRequest'), { message: 'SetupAckRequest' });
    else await waitUntil(async () => (await this.call('HealthCheckRequest', { headers: {}, module: 'internal' })).body.resultCode === 200, { message: 'health check 200' });
  }

  /** One unary call; resolves with the answer read by the shared codec. */
  call(type: string, body: Record<string, unknown>, headers?: Record<string, string>): Promise<ReadPayload> {
    return this.callRaw(toPayload(type, body, headers ?? this.options.headers, this.options.clientIp ?? '127.0.0.1'));
  }

  /** One unary call with a hand-made payload (e.g. a body that is not JSON). */
  callRaw(payload: Payload): Promise<ReadPayload> {
    return new Promise((resolve, reject) => {
      (this.unary as unknown as { request(p: Payload, cb: (err: grpc.ServiceError | null, p?: Payload) => void): void }).request(
        payload,
        (err, answer) => (err || !answer ? reject(err ?? new Error('no payload')) : resolve(readPayload(answer))),
      );
    });
  }

  /** A naming request on `service` in `namespace` (default public, DEFAULT_GROUP). */
  naming(type: string, service: string, fields: Record<string, unknown>, ref: { namespace?: string; groupName?: string } = {}): Promise<ReadPayload> {
    return this.call(type, {
      headers: {},
      namespace: ref.namespace ?? 'public',
      serviceName: service,
      groupName: ref.groupName ?? 'DEFAULT_GROUP',
      ...fields,
      module: 'naming',
    });
  }

  /** Writes a message on the bi-stream: an answer given later than its request (a slow SDK). */
  write(type: string, body: Record<string, unknown>): void {
    this.stream?.write(toPayload(type, body));
  }

  /** Pushes received for a service, newest last. */
  pushes(service: string): Array<Record<string, unknown>> {
    return this.received
      .filter((m) => m.type === 'NotifySubscriberRequest')
      .map((m) => m.body.serviceInfo as Record<string, unknown>)
      .filter((info) => info.name === service);
  }

  /** Ends the stream and closes the channel: the server sees the connection go. */
  close(): void {
    this.stream?.end();
    this.stream?.cancel();
    this.biClient.close();
    this.unary.close();
  }
}

/** An instance body as the Java SDK writes it. */
export function wireHost(ip: string, port: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ip, port, weight: 1, healthy: true, enabled: true, ephemeral: true, clusterName: 'DEFAULT', metadata: {}, ...extra };
}
