import { describe, expect, it } from 'vitest';
import { EncodedBody, nacosGrpcServices, PayloadError, readPayload, toPayload, type Payload } from './payload.js';

describe('Nacos gRPC payloads', () => {
  it('serialise as the reference bytes: type(3), headers(7), clientIp(8), then body.value (Any field 2)', () => {
    const { Request } = nacosGrpcServices();
    const method = Request.service.request;
    expect(method?.path).toBe('/Request/request');
    const payload: Payload = { metadata: { type: 'X', headers: { k: 'v' }, clientIp: '1' }, body: { value: Buffer.from('{}') } };
    expect(method?.requestSerialize(payload).toString('hex')).toBe('120e1a01583a060a016b1201764201311a0412027b7d');
  });

  it('name the methods without a package', () => {
    const { BiRequestStream } = nacosGrpcServices();
    expect(BiRequestStream.service.requestBiStream?.path).toBe('/BiRequestStream/requestBiStream');
    expect(BiRequestStream.service.requestBiStream?.requestStream).toBe(true);
    expect(BiRequestStream.service.requestBiStream?.responseStream).toBe(true);
  });

  it('round-trip a body through the wire, headers in metadata', () => {
    const method = nacosGrpcServices().Request.service.request;
    const sent = toPayload('HealthCheckRequest', { headers: {}, module: 'internal' }, { accessToken: 't' });
    const decoded = method?.requestDeserialize(method.requestSerialize(sent)) as Payload;
    expect(readPayload(decoded)).toEqual({ type: 'HealthCheckRequest', headers: { accessToken: 't' }, body: { headers: {}, module: 'internal' } });
  });

  it('send a body given as JSON text as it is, read back as the object it spells', () => {
    const method = nacosGrpcServices().Request.service.request;
    const text = '{"headers":{},"module":"naming","instances":[{"ip":"10.0.0.1","port":80}]}';
    const sent = toPayload('BatchInstanceRequest', new EncodedBody(text));
    expect(Buffer.from(sent.body?.value ?? []).toString('utf8')).toBe(text);
    const decoded = method?.requestDeserialize(method.requestSerialize(sent)) as Payload;
    expect(readPayload(decoded).body).toEqual({ headers: {}, module: 'naming', instances: [{ ip: '10.0.0.1', port: 80 }] });
  });

  it('refuse payloads that are not Nacos messages', () => {
    expect(() => readPayload({ metadata: {}, body: { value: Buffer.from('{}') } })).toThrow(PayloadError);
    expect(() => readPayload({ metadata: { type: 'X' }, body: { value: Buffer.from('{') } })).toThrow(/not JSON/);
    expect(() => readPayload({ metadata: { type: 'X' }, body: { value: Buffer.from('[1]') } })).toThrow(/not a JSON object/);
    expect(readPayload({ metadata: { type: 'X' } }).body).toEqual({});
  });
});
