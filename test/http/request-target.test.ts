import { describe, expect, it } from 'vitest';
import { serverWithMcpTokens } from '../agency-mcp/helpers.js';
import { ENGINE } from '../helpers/harness.js';
import { rawRequest, type RawResponse } from '../helpers/raw-http.js';

/**
 * The absolute-form of request-target (RFC 9112 §3.2.2: a server MUST accept it; proxies send it), through raw
 * sockets since fetch always sends the origin-form. Served as its origin-form on every surface, with the host taken
 * from the target; a target that is neither form is refused in the surface's error shape.
 */

const env = serverWithMcpTokens();

const hostOf = (base: string) => new URL(base).host;

/** An MCP `initialize` with `bearer`, its request line's target as given. */
function initialize(base: string, target: string, bearer = 'x'): Promise<RawResponse> {
  return rawRequest(base, {
    method: 'POST',
    target,
    headers: [
      ['Authorization', `Bearer ${bearer}`],
      ['Accept', 'application/json, text/event-stream'],
      ['Content-Type', 'application/json'],
    ],
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
  });
}

/** The JSON-RPC message of an MCP answer, whether sent as JSON or as one SSE event. */
function jsonRpc(answer: RawResponse): {
  result?: { serverInfo: { name: string } };
  error?: { message: string };
} {
  const data = /^data: (.*)$/m.exec(answer.body)?.[1];
  return JSON.parse(data ?? answer.body);
}

describe(`absolute-form request targets (${ENGINE})`, () => {
  it('REST: GET http://host/me answers as GET /me', async () => {
    const base = env.server.url.api;
    const headers: [string, string][] = [['Authorization', `Bearer ${env.token.mcp}`]];
    const origin = await rawRequest(`${base}/me`, { headers });
    const absolute = await rawRequest(base, { target: `http://${hostOf(base)}/me`, headers });
    expect(origin.status).toBe(200);
    expect(absolute.status).toBe(200);
    expect(absolute.json()).toEqual(origin.json());
    // The scheme is case-insensitive (RFC 3986 §3.1), and an empty path is `/`.
    expect((await rawRequest(base, { target: `HTTP://${hostOf(base)}/health` })).status).toBe(200);
    const root = await rawRequest(base, { target: `http://${hostOf(base)}?x=1` });
    expect(root.json()).toMatchObject({ error: { message: 'No route for GET /' } });
  });

  for (const surface of ['mcp', 'agencyMcp'] as const) {
    it(`${surface}: POST http://host/mcp initializes as POST /mcp does (it was a 500)`, async () => {
      const base = env.server.url[surface];
      const origin = await initialize(base, '/mcp', env.token[surface]);
      const absolute = await initialize(base, `http://${hostOf(base)}/mcp`, env.token[surface]);
      expect(absolute.status).toBe(200);
      expect(jsonRpc(absolute).result).toEqual(jsonRpc(origin).result);
      expect(jsonRpc(absolute).result?.serverInfo.name).toMatch(/^svc-/);
    });

    it(`${surface}: the target's host is the one checked against DNS rebinding, not the Host header`, async () => {
      const answer = await initialize(env.server.url[surface], 'http://evil.example/mcp', env.token[surface]);
      expect(answer.status).toBe(403);
      expect(jsonRpc(answer).error?.message).toBe('Invalid Host: evil.example');
    });
  }

  it('the access log records the path routed, and the target as sent (without its query)', async () => {
    const base = env.server.url.api;
    await rawRequest(base, { target: `http://${hostOf(base)}/health?probe=absolute-form` });
    const line = env.server.logs.lines.findLast((l) => l['msg'] === 'request' && l['route'] === '/health');
    expect(line).toMatchObject({ path: '/health', target: `http://${hostOf(base)}/health` });
    // A target routed as it came has no second field.
    await rawRequest(base, { target: '/health?probe=origin-form' });
    const plain = env.server.logs.lines.findLast((l) => l['msg'] === 'request' && l['route'] === '/health');
    expect(plain).not.toHaveProperty('target');
  });
});

describe(`request targets that are neither a path nor an http(s) URI (${ENGINE})`, () => {
  const reason =
    'The request target must be a path or an absolute http(s) URI without userinfo (RFC 9112 §3.2)';

  for (const target of ['ftp://example.com/mcp', 'http://user@127.0.0.1/mcp']) {
    it(`${target}: 400 in the REST shape on the API`, async () => {
      const answer = await rawRequest(env.server.url.api, { target });
      expect(answer.status).toBe(400);
      expect(answer.json()).toMatchObject({ error: { code: 'invalid_request', message: reason } });
    });

    it(`${target}: 400 as JSON-RPC on both MCP hosts`, async () => {
      for (const base of [env.server.url.mcp, env.server.url.agencyMcp]) {
        const answer = await initialize(base, target);
        expect(answer.status).toBe(400);
        expect(jsonRpc(answer).error?.message).toBe(`Bad Request: ${reason}`);
      }
    });
  }
});

describe(`the asterisk-form, * (${ENGINE})`, () => {
  const hosts = () => [env.server.url.api, env.server.url.mcp, env.server.url.agencyMcp, env.server.url.auth];

  // It was each surface's 404 (and on the authorization server a 405 "use GET, HEAD", from a route that matched `*`).
  it('OPTIONS * (RFC 9110 §9.3.7, the server as a whole): 200 with no content, on every host', async () => {
    for (const base of hosts()) {
      const answer = await rawRequest(base, { method: 'OPTIONS', target: '*' });
      expect(answer.status, base).toBe(200);
      expect(answer.header('content-length'), base).toBe('0');
      expect(answer.header('x-request-id'), base).toMatch(/^req_/);
      expect(answer.body, base).toBe('');
    }
  });

  // RFC 9110 §9.3.7: the answer SHOULD name the server's features, e.g. `Allow`; it named none.
  it("OPTIONS *: Allow names the methods the host's routes take", async () => {
    const allowOf = async (base: string) =>
      (await rawRequest(base, { method: 'OPTIONS', target: '*' })).header('allow')?.split(', ');
    // The REST API is read-only; its OPTIONS answers CORS preflights.
    expect(await allowOf(env.server.url.api)).toEqual(['GET', 'HEAD', 'OPTIONS']);
    // Streamable HTTP's POST, GET and DELETE on /mcp.
    for (const base of [env.server.url.mcp, env.server.url.agencyMcp])
      expect(await allowOf(base), base).toEqual(expect.arrayContaining(['GET', 'POST', 'DELETE']));
    // Sign-in, the token endpoint, the dashboard API's writes.
    expect(await allowOf(env.server.url.auth)).toEqual(
      expect.arrayContaining(['GET', 'HEAD', 'POST', 'PATCH', 'DELETE']),
    );
  });

  // GET * on the authorization server redirected to /dashboard; elsewhere they were 404s or 405s.
  it('any other method with *: 400 in the surface shape (RFC 9112 §3.2.4)', async () => {
    const reason = 'The request target * is for OPTIONS only (RFC 9112 §3.2.4)';
    for (const method of ['GET', 'POST', 'DELETE']) {
      const api = await rawRequest(env.server.url.api, { method, target: '*' });
      expect(api.status, method).toBe(400);
      expect(api.json(), method).toMatchObject({ error: { code: 'invalid_request', message: reason } });
      const auth = await rawRequest(env.server.url.auth, { method, target: '*' });
      expect(auth.status, method).toBe(400);
      // As `/` is answered there: a page for GET, the REST object otherwise.
      if (method === 'GET') expect(auth.header('content-type')).toMatch(/^text\/html/);
      else expect(auth.json(), method).toMatchObject({ error: { code: 'invalid_request', message: reason } });
      for (const base of [env.server.url.mcp, env.server.url.agencyMcp]) {
        const answer = await rawRequest(base, { method, target: '*' });
        expect(answer.status, `${method} ${base}`).toBe(400);
        expect(jsonRpc(answer).error?.message, `${method} ${base}`).toBe(`Bad Request: ${reason}`);
      }
    }
    const initialized = await initialize(env.server.url.agencyMcp, '*', env.token.mcp);
    expect(initialized.status).toBe(400);
  });
});

describe(`paths whose percent-encoding does not decode (${ENGINE})`, () => {
  // Fastify's router answered each of these itself, with its own JSON (FST_ERR_BAD_URL), no request id and no
  // access-log line, on every surface.
  const reason =
    "The request target's path has a percent-encoding that does not decode to UTF-8 (RFC 3986 §2.1, §2.5)";

  it('REST: 400 invalid_request with the request id, and an access-log line', async () => {
    for (const target of [
      '/me%',
      '/%zz',
      '/me%ED%A0%80',
      `http://${hostOf(env.server.url.api)}/me%C0%AF?x=1`,
    ]) {
      const answer = await rawRequest(env.server.url.api, { target });
      expect(answer.status, target).toBe(400);
      expect(answer.json(), target).toEqual({
        error: {
          type: 'invalid_request_error',
          code: 'invalid_request',
          message: reason,
          request_id: answer.header('x-request-id'),
        },
      });
    }
    const line = env.server.logs.lines.findLast((l) => l['msg'] === 'request' && l['status'] === 400);
    expect(line).toMatchObject({ surface: 'api', method: 'GET' });
    // The line shows the path as routed and as the client sent it, which is what a proxy's log shows.
    await rawRequest(env.server.url.api, { target: '/me%zz?x=1' });
    const sent = env.server.logs.lines.findLast((l) => l['msg'] === 'request' && l['status'] === 400);
    expect(sent).toMatchObject({ path: '/me%25zz', target: '/me%zz' });
    // Only the path is judged: a query is read leniently, as before, and a path's valid escapes pass.
    for (const target of ['/health?x=%zz', '/health?x=%ED%A0%80', '/health?'])
      expect((await rawRequest(env.server.url.api, { target })).status, target).toBe(200);
    const escaped = await rawRequest(env.server.url.api, { target: '/%68ealth' });
    expect(escaped.status).toBe(200);
  });

  it('both MCP hosts: 400 as JSON-RPC', async () => {
    for (const base of [env.server.url.mcp, env.server.url.agencyMcp]) {
      for (const target of ['/mcp%ED', '/mcp/%zz']) {
        const answer = await initialize(base, target, env.token.mcp);
        expect(answer.status, target).toBe(400);
        expect(jsonRpc(answer).error?.message, target).toBe(`Bad Request: ${reason}`);
      }
    }
  });

  it("the authorization server: a page on the member's pages, RFC 6749's shape under /oauth, REST's on the dashboard API", async () => {
    const base = env.server.url.auth;
    const page = await rawRequest(base, { target: '/dashboard/agencies/%zz/members' });
    expect(page.status).toBe(400);
    expect(page.header('content-type')).toMatch(/^text\/html/);
    const oauth = await rawRequest(base, { target: '/oauth/%ED%A0%80' });
    expect(oauth.status).toBe(400);
    expect(oauth.json()).toEqual({ error: 'invalid_request', error_description: reason });
    const api = await rawRequest(base, { target: '/api/agencies/%ED%A0%80/clients' });
    expect(api.status).toBe(400);
    expect(api.json()).toMatchObject({ error: { code: 'invalid_request', message: reason } });
  });

  it('a path parameter of any length reaches its route, which answers for an id it does not know', async () => {
    // Over 200 characters, Fastify's router answered 414 with its own JSON (FST_ERR_MAX_PARAM_LENGTH).
    const answer = await rawRequest(env.server.url.auth, {
      target: `/api/agencies/${'x'.repeat(300)}/clients`,
    });
    expect(answer.status).toBe(404);
    expect(answer.json()).toMatchObject({ error: { code: 'resource_not_found', param: 'agency_id' } });
  });
});
