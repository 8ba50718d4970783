import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { OpenApiChecker } from '../helpers/openapi.js';
import { rawRequest } from '../helpers/raw-http.js';

type ErrorBody = {
  error: { type: string; code: string; message: string; param?: string; request_id: string };
};

let server: TestServer;
let openapi: OpenApiChecker;
beforeAll(async () => {
  server = await startTestServer();
  openapi = await OpenApiChecker.fetch(server.url.api);
});
afterAll(() => server.close());

/** Every non-2xx of a REST surface is the docs/contract.md#errors error object, its request_id equal to the x-request-id header. */
async function expectError(res: Response, status: number, code: string): Promise<ErrorBody['error']> {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  const body = (await res.json()) as ErrorBody;
  expect(body.error.code).toBe(code);
  expect(body.error.request_id).toBe(res.headers.get('x-request-id'));
  expect(body.error.request_id).toMatch(/^req_/);
  return body.error;
}

describe('REST error responses', () => {
  it('unknown route: 404 route_not_found, with Svc-Version', async () => {
    const res = await fetch(`${server.url.api}/nope`);
    await expectError(res, 404, 'route_not_found');
    expect(res.headers.get('svc-version')).toBe('2026-09-24.albus');
  });

  it('a trailing slash is another route', async () => {
    await expectError(await fetch(`${server.url.api}/me/`), 404, 'route_not_found');
  });

  it('wrong method: 405 with Allow', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const res = await fetch(`${server.url.api}/me`, { method });
      const error = await expectError(res, 405, 'method_not_allowed');
      expect(error.type).toBe('invalid_request_error');
      expect(res.headers.get('allow')).toBe('GET, HEAD');
    }
    const res = await fetch(`${server.url.auth}/api/sessions`, { method: 'GET' });
    await expectError(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')).toBe('POST');
  });

  it('a 64 KiB header: 431 headers_too_large in the error shape', async () => {
    const res = await rawRequest(`${server.url.api}/me`, { headers: [['X-Padding', 'a'.repeat(64 * 1024)]] });
    expect(res.status).toBe(431);
    const body = res.json() as ErrorBody;
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'headers_too_large' });
    expect(body.error.request_id).toBe(res.header('x-request-id'));
    expect(res.header('svc-version')).toBe('2026-09-24.albus');
    expect(res.header('link')).toBe('</.well-known/ai-catalog.json>; rel="ai-catalog"');
  });

  it('a 64 KiB header on an MCP host: 431 in the JSON-RPC error shape', async () => {
    for (const host of [server.url.mcp, server.url.agencyMcp]) {
      const res = await rawRequest(`${host}/mcp`, { headers: [['X-Padding', 'a'.repeat(64 * 1024)]] });
      expect(res.status).toBe(431);
      const body = res.json() as {
        jsonrpc: string;
        error: { code: number; data: { request_id: string } };
        id: null;
      };
      expect(body).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 }, id: null });
      expect(body.error.data.request_id).toBe(res.header('x-request-id'));
      expect(res.header('svc-version')).toBeUndefined();
    }
  });

  it('an oversized body: 413 body_too_large', async () => {
    const res = await fetch(`${server.url.auth}/api/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'ada', password: 'x'.repeat(server.config.bodyLimitBytes) }),
    });
    await expectError(res, 413, 'body_too_large');
  });

  it('a non-JSON body where JSON is expected: 400 invalid_json', async () => {
    const res = await fetch(`${server.url.auth}/api/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"username": "ada", ',
    });
    await expectError(res, 400, 'invalid_json');
  });

  it('JSON that is not an object: 400 invalid_request', async () => {
    for (const body of ['[]', '"ada"', 'null', '42']) {
      const res = await fetch(`${server.url.auth}/api/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      await expectError(res, 400, 'invalid_request');
    }
  });

  // The field, then what it should be: zod's "Invalid input: " prefix said nothing the name did not (base/issue-text.ts).
  it('a field of the wrong type: 400 invalid_request naming it and the type it takes', async () => {
    const res = await fetch(`${server.url.auth}/api/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 42, password: 'ada-demo-password' }),
    });
    const error = await expectError(res, 400, 'invalid_request');
    expect(error).toMatchObject({ param: 'username', message: 'username: expected string, received number' });
  });

  it('another media type: 415 unsupported_media_type', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await fetch(`${server.url.auth}/api/sessions`, {
        method: 'POST',
        headers: { 'content-type': type },
        body: 'username=ada&password=ada-demo-password',
      });
      const error = await expectError(res, 415, 'unsupported_media_type');
      expect(error.param).toBe('content-type');
    }
  });

  it('a prototype-poisoning body is refused, not merged', async () => {
    const res = await fetch(`${server.url.auth}/api/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"username":"ada","password":"ada-demo-password","__proto__":{"admin":true}}',
    });
    await expectError(res, 400, 'invalid_json');
  });

  it('every response carries a unique x-request-id that the caller cannot choose', async () => {
    const res = await fetch(`${server.url.api}/health`, { headers: { 'x-request-id': 'chosen-by-caller' } });
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
  });
});

describe('an internal failure', () => {
  let broken: TestServer;
  beforeAll(async () => {
    broken = await startTestServer();
  });
  afterAll(() => broken.close());

  it('is a 500 api_error with no internals in the body; the log has them under the request id', async () => {
    const { token } = await signIn(broken, 'ada');
    await broken.services.ctx.store.close(); // the database goes away under a running server
    const res = await fetch(`${broken.url.api}/me`, { headers: { authorization: `Bearer ${token}` } });
    const checker = openapi;
    expect(res.status).toBe(500);
    const body = (await checker.check('GET', '/me', res.clone())) as ErrorBody;
    expect(body.error).toMatchObject({ type: 'api_error', code: 'internal_error' });
    const text = JSON.stringify(body);
    expect(text).not.toMatch(/destroyed|stack|at \w+ \(|kysely|sqlite|postgres/i);
    const logged = broken.logs.lines.find((l) => l['request_id'] === body.error.request_id && l['err']);
    expect(logged, 'an error log line keyed by the request id').toBeDefined();
    expect(JSON.stringify(logged)).toMatch(/stack/);
  });
});

/**
 * A request no route takes is answered as the route miss it is, whatever its body: Fastify reads the body of such a
 * request before its not-found handler runs, and answered a broken JSON body with 400 `invalid_json` and a `QUERY`
 * without `Content-Type` (RFC 10008 §2) with 400 "The request could not be read", telling a client that sent to the wrong
 * path or with the wrong method that its body was at fault.
 */
describe('a request no route takes, whatever its body', () => {
  const brokenJson = { headers: [['Content-Type', 'application/json']] as [string, string][], body: '{bad' };

  it('REST and the authorization server: 404 or 405 with Allow, never invalid_json', async () => {
    for (const base of [server.url.api, server.url.auth]) {
      const missing = await rawRequest(`${base}/nothing`, { method: 'POST', ...brokenJson });
      expect(missing.status, base).toBe(404);
      expect(missing.json(), base).toMatchObject({
        error: { code: 'route_not_found', message: 'No route for POST /nothing' },
      });
      const query = await rawRequest(`${base}/nothing`, { method: 'QUERY' });
      expect(query.status, base).toBe(404);
      expect(query.json(), base).toMatchObject({ error: { code: 'route_not_found' } });
    }
    for (const request of [
      { method: 'POST', ...brokenJson },
      { method: 'QUERY' },
      { method: 'PUT', headers: [['Content-Encoding', 'gzip']] as [string, string][], body: 'x' },
    ]) {
      const wrongMethod = await rawRequest(`${server.url.api}/me`, request);
      expect(wrongMethod.status, request.method).toBe(405);
      expect(wrongMethod.header('allow'), request.method).toBe('GET, HEAD');
      expect(wrongMethod.json(), request.method).toMatchObject({
        error: {
          code: 'method_not_allowed',
          message: `${request.method} is not allowed on /me; use GET, HEAD`,
        },
      });
    }
  });

  it('the MCP hosts: their JSON-RPC 404 and 405, not a parse error', async () => {
    for (const base of [server.url.mcp, server.url.agencyMcp]) {
      const missing = await rawRequest(`${base}/nothing`, { method: 'POST', ...brokenJson });
      expect(missing.status, base).toBe(404);
      expect(missing.json(), base).toMatchObject({
        jsonrpc: '2.0',
        error: { message: 'Not Found: no route for /nothing' },
      });
      const query = await rawRequest(`${base}/mcp`, { method: 'QUERY' });
      expect(query.status, base).toBe(405);
      expect(query.header('allow'), base).toBe('POST');
    }
  });

  it('a route that takes the method still reads the body: 400 invalid_json', async () => {
    const res = await rawRequest(`${server.url.auth}/api/sessions`, { method: 'POST', ...brokenJson });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_json' } });
  });
});
