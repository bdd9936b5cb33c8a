import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ApiError } from './api-error.js';
import { toApiError } from './error-handler.js';
import { describeViolation } from '../validation/violation.js';
import { API_ERRORS, type ApiErrorCode } from './errors.js';

const apiDir = fileURLToPath(new URL('.', import.meta.url));
const sources = readdirSync(apiDir)
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
  .map((f) => ({ file: f, text: readFileSync(`${apiDir}/${f}`, 'utf8') }));

describe('API_ERRORS', () => {
  it('gives every code an error status and a meaning', () => {
    for (const [code, entry] of Object.entries(API_ERRORS)) {
      expect(code, code).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(Number.isInteger(entry.status) && entry.status >= 400 && entry.status <= 599, code).toBe(true);
      expect(entry.meaning.length, code).toBeGreaterThan(10);
    }
  });

  it('lists every code the app uses, and only those', () => {
    const used = new Set<string>();
    let constructions = 0;
    for (const { file, text } of sources) {
      constructions += (text.match(/new ApiError\(/g) ?? []).length;
      for (const m of text.matchAll(/new ApiError\(\s*'([^']*)'/g)) {
        used.add(m[1] as string);
        expect(Object.hasOwn(API_ERRORS, m[1] as string), `${file} uses code ${m[1]}, missing from errors.ts`).toBe(true);
      }
    }
    // Every construction names its code literally, so the scan above sees them all.
    const literal = sources.reduce((n, { text }) => n + [...text.matchAll(/new ApiError\(\s*'[^']*'/g)].length, 0);
    expect(literal).toBe(constructions);
    expect([...used].sort()).toEqual(Object.keys(API_ERRORS).sort());
  });
});

describe('toApiError', () => {
  const fastifyError = (code: string, statusCode: number, message = 'boom') =>
    Object.assign(new Error(message), { code, statusCode });

  it('maps Fastify errors to codes', () => {
    const cases: [Error, ApiErrorCode, number][] = [
      [fastifyError('FST_ERR_CTP_INVALID_JSON_BODY', 400), 'invalid_json', 400],
      [fastifyError('FST_ERR_CTP_EMPTY_JSON_BODY', 400), 'invalid_json', 400],
      [fastifyError('FST_ERR_CTP_BODY_TOO_LARGE', 413), 'body_too_large', 413],
      [fastifyError('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415), 'unsupported_media_type', 415],
      [fastifyError('FST_ERR_CTP_INVALID_CONTENT_LENGTH', 400), 'invalid_request', 400],
      [fastifyError('FST_ERR_MAX_PARAM_LENGTH', 414), 'uri_too_long', 414],
      [fastifyError('FST_ERR_BAD_URL', 400), 'invalid_request', 400],
      [fastifyError('FST_ERR_SOMETHING_NEW', 404), 'not_found', 404],
      [fastifyError('FST_ERR_SOMETHING_ELSE', 500), 'internal', 500],
    ];
    for (const [error, code, status] of cases) {
      const mapped = toApiError(error, 1024);
      expect({ code: mapped.code, status: mapped.status }).toEqual({ code, status });
    }
    expect(toApiError(fastifyError('FST_ERR_CTP_BODY_TOO_LARGE', 413), 1024).message).toContain('1024 bytes');
  });

  it('hides the message of unexpected errors', () => {
    const mapped = toApiError(new Error('connection to 10.0.0.1 refused, password=hunter2'), 1024);
    expect(mapped.code).toBe('internal');
    expect(mapped.status).toBe(500);
    expect(mapped.message).not.toContain('hunter2');
    expect(toApiError('a string', 1024).code).toBe('internal');
  });

  it('keeps ApiErrors as they are', () => {
    const error = new ApiError('task_not_found', 'no task x');
    expect(toApiError(error, 1024)).toBe(error);
    expect(error.toBody()).toEqual({ error: { code: 'task_not_found', message: 'no task x' } });
  });
});

describe('describeViolation', () => {
  it('names the field, with array indexes and escaped keys', () => {
    expect(describeViolation('body', { keyword: 'type', instancePath: '/endpoints/2', params: {}, message: 'must be string' })).toBe(
      'body.endpoints[2] must be string',
    );
    expect(describeViolation('body', { keyword: 'type', instancePath: '/labels/a~1b', params: {}, message: 'must be string' })).toBe(
      'body.labels.a/b must be string',
    );
    expect(describeViolation('body', { keyword: 'additionalProperties', instancePath: '/options', params: { additionalProperty: 'x' } })).toBe(
      'body.options.x is not a known field',
    );
    expect(describeViolation('params', { keyword: 'required', instancePath: '', params: { missingProperty: 'id' } })).toBe('params.id is required');
    expect(describeViolation('body', { keyword: 'pattern', instancePath: '/x', params: { pattern: '^a$' } })).toBe('body.x has the wrong format');
  });
});
