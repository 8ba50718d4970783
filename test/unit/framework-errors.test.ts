import { describe, expect, it } from 'vitest';
import { classifyError } from '../../src/http/framework-errors.js';

/** The one classification of errors every surface renders in its own shape (REST, OAuth, pages, JSON-RPC). */

const fastify = (code: string, statusCode: number, extra: object = {}) =>
  Object.assign(new Error(code), { code, statusCode, ...extra });

describe('classifyError', () => {
  it.each([
    [fastify('FST_ERR_CTP_BODY_TOO_LARGE', 413), { kind: 'body_too_large', status: 413 }],
    [fastify('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415), { kind: 'unsupported_media_type', status: 415 }],
    [fastify('FST_ERR_CTP_INVALID_JSON_BODY', 400), { kind: 'invalid_json', status: 400, empty: false }],
    [fastify('FST_ERR_CTP_EMPTY_JSON_BODY', 400), { kind: 'invalid_json', status: 400, empty: true }],
    [fastify('FST_ERR_CTP_INVALID_CONTENT_LENGTH', 400), { kind: 'invalid_content_length', status: 400 }],
  ])("Fastify's own refusal %#", (error, expected) => {
    expect(classifyError(error)).toEqual(expected);
  });

  it('a schema validation keeps its message; another 4xx does not show its text', () => {
    expect(
      classifyError(
        fastify('FST_ERR_VALIDATION', 400, { validation: [{}], message: 'body/x must be string' }),
      ),
    ).toEqual({ kind: 'invalid_request', status: 400, message: 'body/x must be string' });
    expect(classifyError(fastify('FST_ERR_SOMETHING', 404))).toEqual({
      kind: 'invalid_request',
      status: 404,
      message: undefined,
    });
  });

  it('a dependency outage is 503 with Retry-After; shutting down is 503 without', () => {
    const terminated = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
    });
    expect(classifyError(terminated)).toEqual({ kind: 'unavailable', status: 503, retryAfterSeconds: 5 });
    expect(classifyError(new Error('Query read timeout'))).toMatchObject({ kind: 'unavailable' });
    expect(classifyError(Object.assign(new Error('closing'), { statusCode: 503 }))).toEqual({
      kind: 'unavailable',
      status: 503,
      retryAfterSeconds: undefined,
    });
  });

  it('anything else is internal: a bug, never shown', () => {
    expect(classifyError(new TypeError('x is undefined'))).toEqual({ kind: 'internal', status: 500 });
    expect(classifyError('a string')).toEqual({ kind: 'internal', status: 500 });
    expect(classifyError(null)).toEqual({ kind: 'internal', status: 500 });
  });
});
