import { request as httpRequest } from 'node:http';
import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import {
  connectClient,
  initializeMessage,
  jsonRpcOf,
  MCP_VERSIONS,
  MODERN,
  modernRequest,
  expectEachAnsweredAsBug,
  post,
  userReads,
} from '../helpers/mcp.js';
import { baseClaims, mintAccessToken, signWithServerKey, TOKEN_TYPES } from '../helpers/tokens.js';

let server: TestServer;
let session: { id: string; token: string };
let adaId: string;
let endpoint: string;

beforeAll(async () => {
  server = await startTestServer();
  session = await signIn(server, 'ada');
  endpoint = `${server.url.mcp}/mcp`;
  const row = await server.services.ctx.db
    .selectFrom('users')
    .select('id')
    .where('username', '=', 'ada')
    .executeTakeFirstOrThrow();
  adaId = row.id;
});
afterAll(() => server.close());

const ADA = () => ({ object: 'user', id: adaId, username: 'ada', image_url: null });

describe.each(MCP_VERSIONS)('a real SDK client pinned to %s', (version) => {
  let client: Client;
  beforeAll(async () => {
    client = await connectClient(endpoint, session.token, version);
  });
  afterAll(() => client.close());

  it('lists get_me with its title, output schema and read-only hint', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['get_me']);
    const [getMe] = tools;
    expect(getMe!.title).toBe('Get my profile');
    expect(getMe!.annotations?.readOnlyHint).toBe(true);
    expect(getMe!.outputSchema?.['required']).toEqual(['object', 'id', 'username', 'image_url']);
  });

  it('calls get_me: structured content plus its text rendering, as GET /me renders it', async () => {
    const result = await client.callTool({ name: 'get_me', arguments: {} });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual(ADA());
    expect(result.content).toEqual([{ type: 'text', text: JSON.stringify(ADA()) }]);
    const rest = await fetch(`${server.url.api}/me`, {
      headers: { authorization: `Bearer ${session.token}` },
    });
    expect(await rest.json()).toEqual(result.structuredContent);
    expect(result._meta?.['svc/api-version']).toBe(rest.headers.get('svc-version'));
  });

  // It was "data must NOT have additional properties", which named neither the argument nor what the tool takes.
  it('get_me with an argument: a tool error naming it, and that the tool takes none', async () => {
    const result = await client.callTool({ name: 'get_me', arguments: { username: 'grace' } });
    expect(result.isError).toBe(true);
    const [content] = result.content as { type: string; text: string }[];
    expect(content!.text).toContain('username');
    expect(content!.text).toContain('this tool takes no arguments');
    // The input schema it lists is unchanged: an empty object, nothing else.
    const { tools } = await client.listTools();
    expect(tools[0]!.inputSchema).toEqual({ type: 'object', properties: {}, additionalProperties: false });
  });

  it('reads user://me as application/json', async () => {
    const { contents } = await client.readResource({ uri: 'user://me' });
    expect(contents).toEqual([
      { uri: 'user://me', mimeType: 'application/json', text: JSON.stringify(ADA()) },
    ]);
  });

  it('names the server from package.json and gives instructions', () => {
    expect(client.getServerVersion()).toMatchObject({ name: 'svc-agent-access', version: '0.1.0' });
    expect(client.getInstructions()).toMatch(/get_me/);
  });
});

// A bug while reading the user: the SDK sent a tool error (HTTP 200) and `-32603` carrying the error's own words, and
// logged nothing; the fast path answered 500 and logged it. Now every path answers as the fast path did.
describe('a handler that fails: 500 -32603 on every path, the error logged and never shown', () => {
  it('get_me and user://me, on the fast path and through the SDK, on both wires', async () => {
    const users = server.services.ctx.users;
    const realGet = users.get.bind(users);
    users.get = () => Promise.reject(new TypeError('internal detail of the failure'));
    const requests = userReads(endpoint, session.token);
    try {
      await expectEachAnsweredAsBug(requests, server.logs, 'internal detail of the failure');
    } finally {
      users.get = realGet;
    }
    expect((await requests['user://me, 2026-07-28']!()).status).toBe(200);
  });
});

describe('refused credentials: 401 before any MCP processing', () => {
  const refusedWith401 = async (token: string, error?: string) => {
    for (const version of MCP_VERSIONS) {
      await expect(connectClient(endpoint, token, version)).rejects.toThrow();
    }
    const res = await modernRequest(endpoint, 'tools/call', { name: 'get_me', arguments: {} }, { token });
    expect(res.status).toBe(401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer /);
    expect(challenge).toContain(
      `resource_metadata="${server.url.mcp}/.well-known/oauth-protected-resource/mcp"`,
    );
    if (error) expect(challenge).toContain(`error="${error}"`);
    return (await res.json()) as Record<string, string>;
  };

  it('no token at all: challenge without an error code (RFC 6750 §3.1)', async () => {
    const res = await post(endpoint, initializeMessage('2025-11-25'));
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).not.toContain('error=');
  });

  it('an expired token', async () => {
    const ctx = server.services.ctx;
    const claims = baseClaims(ctx, adaId, endpoint, session.id);
    const token = await signWithServerKey(
      ctx,
      { typ: TOKEN_TYPES.session },
      { ...claims, iat: claims.iat - 700, nbf: claims.nbf - 700, exp: claims.iat - 100 },
    );
    expect((await refusedWith401(token, 'invalid_token'))['error_description']).toMatch(/expired/);
  });

  it('a session token that expires while cached', async () => {
    const ctx = server.services.ctx;
    const claims = {
      ...baseClaims(ctx, adaId, endpoint, session.id),
      exp: Math.floor(ctx.clock.now() / 1000) + 2,
    };
    const token = await signWithServerKey(ctx, { typ: TOKEN_TYPES.session }, claims);
    const client = await connectClient(endpoint, token, MODERN);
    await client.close();
    // Past `exp` but within LIVENESS_CACHE_SECONDS: the verification and the session's liveness are both still
    // cached, so the expiry must be caught on the cached path itself.
    expect(server.config.livenessCacheSeconds * 1000).toBeGreaterThan(2_500);
    server.clock.advance(2_500);
    try {
      await refusedWith401(token, 'invalid_token');
    } finally {
      server.clock.advance(-2_500);
    }
  });

  it('a revoked session', async () => {
    const s = await signIn(server, 'linus');
    (await connectClient(endpoint, s.token, MODERN)).close();
    const del = await fetch(`${server.url.auth}/api/sessions/current`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${s.token}` },
    });
    expect(del.status).toBe(204);
    await refusedWith401(s.token, 'invalid_token');
  });

  it('a token minted for another audience (the REST API)', async () => {
    const token = await mintAccessToken(server.services.ctx, {
      userId: adaId,
      audience: server.url.api,
      scope: 'user:read',
    });
    expect((await refusedWith401(token, 'invalid_token'))['error_description']).toMatch(/audience/);
  });

  it('garbage in the Authorization header', async () => {
    await refusedWith401('not-a-jwt', 'invalid_token');
  });
});

describe('OAuth access tokens for this resource', () => {
  it('work with user:read', async () => {
    const token = await mintAccessToken(server.services.ctx, {
      userId: adaId,
      audience: endpoint,
      scope: 'user:read',
    });
    const client = await connectClient(endpoint, token, MODERN);
    expect((await client.callTool({ name: 'get_me', arguments: {} })).structuredContent).toEqual(ADA());
    await client.close();
  });

  it('without user:read: 403 insufficient_scope naming the scope', async () => {
    const token = await mintAccessToken(server.services.ctx, {
      userId: adaId,
      audience: endpoint,
      scope: 'x:y',
    });
    const res = await modernRequest(endpoint, 'tools/list', {}, { token });
    expect(res.status).toBe(403);
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toContain('error="insufficient_scope"');
    expect(challenge).toContain('scope="user:read"');
    expect(challenge).toContain('resource_metadata=');
  });
});

describe('protected-resource metadata (RFC 9728)', () => {
  it.each(['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp'])(
    'is public at %s',
    async (path) => {
      const res = await fetch(`${server.url.mcp}${path}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        resource: endpoint,
        authorization_servers: [server.url.auth],
        scopes_supported: ['user:read'],
      });
    },
  );
});

describe('the HTTP edge', () => {
  const token = () => session.token;

  it('refuses a foreign Host with 403 (DNS rebinding) and accepts loopback names', async () => {
    const port = new URL(endpoint).port;
    const evil = await withHost(`evil.example:${port}`);
    expect(evil.status).toBe(403);
    expect((JSON.parse(evil.body) as { error: { code: number } }).error.code).toBe(-32000);
    expect((await withHost(`localhost:${port}`)).status).toBe(200);
    expect((await withHost(`[::1]:${port}`)).status).toBe(200);
  });

  it('refuses a foreign Origin with 403', async () => {
    const res = await modernRequest(
      endpoint,
      'tools/list',
      {},
      { token: token(), headers: { origin: 'https://evil.example' } },
    );
    expect(res.status).toBe(403);
    const ok = await modernRequest(
      endpoint,
      'tools/list',
      {},
      { token: token(), headers: { origin: server.url.mcp } },
    );
    expect(ok.status).toBe(200);
  });

  it('bounds the body: 413 in the JSON-RPC shape', async () => {
    const big = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'ping',
      params: { pad: 'x'.repeat(server.config.bodyLimitBytes) },
    });
    const res = await post(endpoint, undefined, { token: token(), body: big });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32000);
  });

  it('refuses other media types with 415 and broken JSON with -32700', async () => {
    const text = await post(endpoint, undefined, {
      token: token(),
      body: 'hi',
      headers: { 'content-type': 'text/plain' },
    });
    expect(text.status).toBe(415);
    const broken = await post(endpoint, undefined, { token: token(), body: '{"jsonrpc":' });
    expect(broken.status).toBe(400);
    expect(((await broken.json()) as { error: { code: number } }).error.code).toBe(-32700);
  });

  it('answers unknown paths with a JSON 404 and wrong methods with 405 and Allow', async () => {
    const missing = await fetch(`${server.url.mcp}/nope`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toMatch(/Not Found/);
    const put = await fetch(endpoint, { method: 'PUT', headers: { authorization: `Bearer ${token()}` } });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toContain('POST');
  });

  it('names in Allow only the method it serves, whichever method was refused (RFC 9110 §10.2.1)', async () => {
    const allows: Record<string, string | null> = {};
    for (const method of ['GET', 'DELETE', 'PUT', 'PATCH', 'HEAD']) {
      const res = await fetch(endpoint, { method, headers: { authorization: `Bearer ${token()}` } });
      expect(res.status).toBe(405);
      allows[method] = res.headers.get('allow');
    }
    // Before, GET and DELETE said POST while every other method said "GET, POST, DELETE".
    expect(allows).toEqual({ GET: 'POST', DELETE: 'POST', PUT: 'POST', PATCH: 'POST', HEAD: 'POST' });
  });
});

/** An initialize POST with a Host header of the test's choosing (fetch would send the URL's own host). */
function withHost(host: string): Promise<{ status: number; body: string }> {
  const u = new URL(endpoint);
  const body = JSON.stringify(initializeMessage('2025-11-25'));
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        setHost: false,
        headers: {
          host,
          authorization: `Bearer ${session.token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
      },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('protocol versions', () => {
  it('2026-07-28: an unsupported revision in the envelope is 400 -32022 naming the supported ones', async () => {
    const res = await post(
      endpoint,
      {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/list',
        params: {
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2099-01-01',
            'io.modelcontextprotocol/clientInfo': { name: 'x', version: '1' },
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      },
      { token: session.token, headers: { 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'tools/list' } },
    );
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: number; data: { supported: string[] } } };
    expect(body.error.code).toBe(-32022);
    expect(body.error.data.supported).toContain(MODERN);
  });

  it('2026-07-28: Mcp-Method disagreeing with the body is 400 -32020', async () => {
    const res = await modernRequest(
      endpoint,
      'tools/list',
      {},
      { token: session.token, headers: { 'mcp-method': 'ping' } },
    );
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32020);
  });

  it('2026-07-28: unknown methods are HTTP 404', async () => {
    const res = await modernRequest(endpoint, 'no/such', {}, { token: session.token });
    expect(res.status).toBe(404);
  });

  it('2025: initialize with an unsupported version is answered with a supported one', async () => {
    const res = await post(endpoint, initializeMessage('2024-11-05'), { token: session.token });
    const body = (await jsonRpcOf(res)) as { result: { protocolVersion: string } };
    expect(['2025-11-25', '2025-06-18']).toContain(body.result.protocolVersion);
  });

  it('2025: an unsupported MCP-Protocol-Version header is 400 naming the supported versions', async () => {
    const res = await post(
      endpoint,
      { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} },
      { token: session.token, headers: { 'mcp-protocol-version': '2024-11-05' } },
    );
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('2025-11-25');
  });
});
