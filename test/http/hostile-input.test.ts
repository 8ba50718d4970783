import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../agency-mcp/helpers.js';
import { agencyIds, Browser, connect, pkce, register } from '../auth/oauth-helpers.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { jsonRpcOf, post } from '../helpers/mcp.js';
import { rawRequest } from '../helpers/raw-http.js';

/**
 * A sweep of hostile values through every parameter a client writes: each agency tool's arguments, the authorization,
 * token, revocation and registration endpoints' parameters (each replaced, repeated and left out), the session API's
 * body, the member pages' paths and forms (signed in, with a valid CSRF token, so that the values reach the
 * handlers), and the request headers the surfaces read, on a request of each. Whatever the value, the answer is the
 * surface's normal answer or its refusal in its own shape — never a 5xx, never an error in the log. The specific
 * attacks have tests of their own; this is the net under them (a NUL in a task's title was once a 500 on PostgreSQL).
 */

const STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  'x'.repeat(5000),
  '%00',
  '%zz',
  '../..',
  '🙂',
  '\ud800',
  '\u202e',
  '<script>',
  '\r\nX: y',
  'null',
  '[]',
  '-1',
  '1e999',
  'http://evil.example/',
  'javascript:alert(1)',
  'S256',
  'agency:mcp:read agency:mcp:write',
];
const JSON_VALUES: unknown[] = [
  ...STRINGS,
  null,
  true,
  -1,
  0,
  1.5,
  1e308,
  2 ** 53 + 1,
  [],
  ['x'],
  {},
  { a: 1 },
  [null],
];

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({
    env: { DCR_LIMIT_PER_IP: '100000', SIGNIN_LIMIT_PER_IP: '100000', SIGNIN_LIMIT_PER_USERNAME: '100000' },
  });
});
afterAll(() => server?.close());

/** Collects what a sweep found: a 5xx, or an answer not in its surface's shape. */
class Findings {
  readonly list: string[] = [];
  requests = 0;

  /** The response's status and body, noted when it is a 5xx or `shapeOk` refuses it. */
  async check(label: string, res: Response, shapeOk: (res: Response, body: string) => boolean) {
    this.requests++;
    const body = await res.text();
    if (res.status >= 500 || !shapeOk(res, body))
      this.list.push(`${label} → ${res.status} ${body.slice(0, 200)}`);
  }

  /** Every finding, and every error the server logged meanwhile. */
  all(): string[] {
    const errors = server.logs.lines.filter((l) => Number(l['level']) >= 50);
    return [...this.list, ...errors.map((e) => `log: ${JSON.stringify(e).slice(0, 400)}`)];
  }
}

const parsed = (body: string): Record<string, unknown> | undefined => {
  try {
    return JSON.parse(body) as Record<string, unknown>;
  } catch {
    return undefined;
  }
};
/** RFC 6749 §5.2: a refusal is a JSON object with an `error` code. */
const oauthShape = (res: Response, body: string) => res.ok || typeof parsed(body)?.['error'] === 'string';
/** docs/contract.md#errors: `error.code`, and `error.request_id` equal to the `x-request-id` header. */
const restShape = (res: Response, body: string) => {
  if (res.ok) return true;
  const error = parsed(body)?.['error'] as Record<string, unknown> | undefined;
  return typeof error?.['code'] === 'string' && error['request_id'] === res.headers.get('x-request-id');
};
/** A page, or a redirect somewhere. */
const pageShape = (res: Response) =>
  res.status === 302 || res.status === 303
    ? res.headers.get('location') !== null
    : (res.headers.get('content-type') ?? '').startsWith('text/html');
const safeEncode = (value: string) => {
  try {
    return encodeURIComponent(value);
  } catch {
    return '%ED%A0%80'; // a lone surrogate, as its bytes
  }
};

describe(`hostile input on every surface (${ENGINE})`, () => {
  it("each agency tool's arguments: a result or a JSON-RPC error, never a 5xx", async () => {
    const g = await grant(server);
    const endpoint = `${server.url.agencyMcp}/mcp`;
    const options = { token: g.token, headers: { 'mcp-protocol-version': '2025-11-25' } };
    const call = async (name: string, args: unknown) =>
      post(
        endpoint,
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
        options,
      );
    const firstId = async (tool: string) => {
      const message = await jsonRpcOf(await call(tool, {}));
      const result = message['result'] as { structuredContent: { data: { id: string }[] } };
      return result.structuredContent.data[0]!.id;
    };
    // Real ids, so that a hostile value in one argument meets valid ones in the others and reaches the store.
    const ids: Record<string, string> = {
      client_id: await firstId('list_clients'),
      project_id: await firstId('list_projects'),
      task_id: await firstId('list_tasks'),
      member_id: await firstId('list_members'),
    };
    const listed = await jsonRpcOf(
      await post(endpoint, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, options),
    );
    const tools = (listed['result'] as { tools: { name: string; inputSchema: JsonSchema }[] }).tools;
    expect(tools.length).toBeGreaterThan(10);
    const findings = new Findings();
    const jsonRpcShape = (res: Response, body: string) =>
      res.status === 200 && /"jsonrpc":"2.0"/.test(body) && /"(result|error)":/.test(body);
    for (const tool of tools) {
      const properties = tool.inputSchema.properties ?? {};
      const valid = Object.fromEntries(
        Object.entries(properties).map(([name, schema]) => [name, ids[name] ?? plausible(schema)]),
      );
      for (const args of [valid, { ...valid, unknown: 1 }])
        await findings.check(tool.name, await call(tool.name, args), jsonRpcShape);
      for (const name of Object.keys(properties)) {
        for (const value of JSON_VALUES) {
          const label = `${tool.name} ${name}=${JSON.stringify(value).slice(0, 40)}`;
          await findings.check(label, await call(tool.name, { ...valid, [name]: value }), jsonRpcShape);
        }
      }
    }
    expect(findings.requests).toBeGreaterThan(500);
    expect(findings.all()).toEqual([]);
  });

  it('the authorization, token, revocation and registration endpoints and the session API', async () => {
    const findings = new Findings();
    const auth = server.url.auth;
    const { clientId, tokens, redirectUri } = await connect(server, {});
    const { challenge, verifier } = pkce();
    const authorization: Record<string, string> = {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: redirectUri,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      resource: `${server.url.agencyMcp}/mcp`,
      scope: 'agency:mcp:read offline_access',
      state: 'state',
    };
    const member = new Browser(auth);
    await member.signIn('ada');
    for (const browser of [new Browser(auth), member]) {
      for (const name of Object.keys(authorization)) {
        for (const value of STRINGS) {
          const replaced = new URLSearchParams({ ...authorization, [name]: value });
          const repeated = new URLSearchParams(authorization);
          repeated.append(name, value);
          const label = `authorize ${name}=${JSON.stringify(value).slice(0, 40)}`;
          await findings.check(label, await browser.get(`/oauth2/auth?${replaced}`), pageShape);
          await findings.check(`${label} repeated`, await browser.get(`/oauth2/auth?${repeated}`), pageShape);
        }
        const without = new URLSearchParams(authorization);
        without.delete(name);
        await findings.check(
          `authorize without ${name}`,
          await browser.get(`/oauth2/auth?${without}`),
          pageShape,
        );
      }
    }

    const form = (path: string, body: Record<string, string>) =>
      fetch(`${auth}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(body),
      });
    const grants: Record<string, string>[] = [
      { grant_type: 'refresh_token', refresh_token: tokens['refresh_token']!, client_id: clientId },
      {
        grant_type: 'authorization_code',
        code: 'unknown',
        code_verifier: verifier,
        redirect_uri: redirectUri,
        client_id: clientId,
        resource: `${server.url.agencyMcp}/mcp`,
      },
      {
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        subject_token: tokens['access_token']!,
        subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        audience: `${auth}/api`,
      },
    ];
    for (const request of grants) {
      for (const name of [...Object.keys(request), 'resource', 'scope', 'client_secret']) {
        for (const value of STRINGS) {
          const label = `token ${request['grant_type']} ${name}=${JSON.stringify(value).slice(0, 40)}`;
          await findings.check(label, await form('/oauth/token', { ...request, [name]: value }), oauthShape);
        }
      }
    }
    for (const value of STRINGS) {
      const revocations: Record<string, string>[] = [
        { token: value, client_id: clientId },
        { token: tokens['access_token']!, client_id: value },
        { token: tokens['access_token']!, client_id: clientId, token_type_hint: value },
      ];
      for (const revocation of revocations)
        await findings.check(
          `revoke ${JSON.stringify(revocation).slice(0, 60)}`,
          await form('/oauth/revoke', revocation),
          oauthShape,
        );
    }

    const metadata: Record<string, unknown> = {
      redirect_uris: ['http://127.0.0.1/callback'],
      client_name: 'Sweep',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      scope: 'agency:mcp:read',
      client_uri: 'https://example.com',
      logo_uri: 'https://example.com/logo.png',
      application_type: 'native',
    };
    for (const name of Object.keys(metadata)) {
      for (const value of JSON_VALUES) {
        const { res, body } = await register(server, { ...metadata, [name]: value });
        findings.requests++;
        if (res.status >= 500 || (!res.ok && typeof body['error'] !== 'string'))
          findings.list.push(`register ${name}=${JSON.stringify(value).slice(0, 40)} → ${res.status}`);
      }
    }

    for (const value of JSON_VALUES) {
      for (const credentials of [
        { username: value, password: 'ada-demo-password' },
        { username: 'ada', password: value },
      ]) {
        const res = await fetch(`${auth}/api/sessions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(credentials),
        });
        await findings.check(`sessions ${JSON.stringify(credentials).slice(0, 60)}`, res, restShape);
      }
    }
    expect(findings.requests).toBeGreaterThan(1000);
    expect(findings.all()).toEqual([]);
  });

  it("the member pages' paths and forms, signed in with a valid CSRF token", async () => {
    const findings = new Findings();
    const member = new Browser(server.url.auth);
    await member.signIn('ada');
    const agency = Object.values(await agencyIds(server))[0]!;
    for (const value of STRINGS) {
      const segment = safeEncode(value);
      for (const path of [
        `/dashboard/agencies/${segment}/members`,
        `/dashboard/agencies/${segment}/settings`,
        `/dashboard/agencies/${segment}/history`,
        `/dashboard/members/${segment}/remove`,
        `/dashboard/connections/${segment}/disconnect`,
        `/dashboard?done=${segment}`,
        `/sign-in?next=${segment}`,
      ])
        await findings.check(`GET ${path.slice(0, 80)}`, await member.get(path), pageShape);
      const fields = {
        csrf: member.csrf,
        role: value,
        agent_write_enabled: value,
        agency_id: value,
        decision: value,
        ceiling: value,
        next: value,
      };
      for (const path of [
        `/dashboard/connections/${segment}/disconnect`,
        `/dashboard/members/${segment}/role`,
        `/dashboard/members/${segment}/remove`,
        `/dashboard/agencies/${segment}/settings`,
        `/dashboard/agencies/${agency}/settings`,
        '/oauth2/auth/consent',
      ])
        await findings.check(
          `POST ${path.slice(0, 80)} ${JSON.stringify(value).slice(0, 30)}`,
          await member.post(path, fields),
          pageShape,
        );
    }
    // Still signed in: the sweep reached the handlers, not the sign-in page.
    expect((await member.get('/dashboard')).status).toBe(200);
    expect(findings.all()).toEqual([]);
  });
});

describe(`hostile request headers on every surface (${ENGINE})`, () => {
  const HEADERS = [
    'Authorization',
    'Cookie',
    'MCP-Protocol-Version',
    'Svc-Version',
    'Accept',
    'Content-Type',
    'Content-Encoding',
    'Origin',
    'Mcp-Method',
    'Mcp-Name',
    'Mcp-Session-Id',
    'Last-Event-ID',
    'If-None-Match',
    'X-Forwarded-For',
    'Expect',
  ];
  const VALUES = [
    '',
    'x'.repeat(8000),
    'Ã©', // UTF-8 bytes, read by node:http as Latin-1
    'a, b',
    'null; x=y',
    '*/*',
    'Bearer ',
    'Bearer a b',
    `bearer ${'a'.repeat(4000)}`,
    'Basic !!!',
    '2025-11-25, 2026-07-28',
    '9999-99-99',
    'http://evil.example',
    'text/event-stream;q=0',
    'application/json; charset=utf-16',
    '__Host-svc_session=x; svc_csrf=y',
  ];

  it('a normal answer or a refusal, with the request id, never a 5xx and never without an answer', async () => {
    const s = server;
    const { token } = await signIn(s);
    const agencyToken = (await grant(s)).token;
    const toolCall = (name: string) =>
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } });
    const mcpHeaders = (bearer: string): [string, string][] => [
      ['Authorization', `Bearer ${bearer}`],
      ['Content-Type', 'application/json'],
      ['Accept', 'application/json, text/event-stream'],
      ['MCP-Protocol-Version', '2025-11-25'],
    ];
    const requests: { url: string; method: string; headers: [string, string][]; body?: string }[] = [
      { url: `${s.url.api}/me`, method: 'GET', headers: [['Authorization', `Bearer ${token}`]] },
      { url: `${s.url.api}/health`, method: 'GET', headers: [] },
      { url: `${s.url.mcp}/mcp`, method: 'POST', headers: mcpHeaders(token), body: toolCall('get_me') },
      {
        url: `${s.url.agencyMcp}/mcp`,
        method: 'POST',
        headers: mcpHeaders(agencyToken),
        body: toolCall('list_clients'),
      },
      { url: `${s.url.agencyMcp}/.well-known/oauth-protected-resource/mcp`, method: 'GET', headers: [] },
      { url: `${s.url.auth}/dashboard`, method: 'GET', headers: [] },
      {
        url: `${s.url.auth}/oauth/token`,
        method: 'POST',
        headers: [['Content-Type', 'application/x-www-form-urlencoded']],
        body: 'grant_type=refresh_token&refresh_token=x&client_id=y',
      },
      {
        url: `${s.url.auth}/api/sessions`,
        method: 'POST',
        headers: [['Content-Type', 'application/json']],
        body: JSON.stringify({ username: 'ada', password: 'ada-demo-password' }),
      },
    ];
    const found: string[] = [];
    let sent = 0;
    for (const request of requests) {
      for (const name of HEADERS) {
        for (const value of VALUES) {
          const headers = request.headers.filter(([h]) => h.toLowerCase() !== name.toLowerCase());
          headers.push([name, value]);
          const answer = await rawRequest(request.url, {
            method: request.method,
            headers,
            ...(request.body === undefined ? {} : { body: request.body }),
          });
          sent++;
          if (answer.status >= 500 || !answer.header('x-request-id'))
            found.push(`${request.method} ${request.url} ${name}: ${value.slice(0, 30)} → ${answer.status}`);
        }
      }
    }
    expect(sent).toBe(requests.length * HEADERS.length * VALUES.length);
    const errors = server.logs.lines.filter((l) => Number(l['level']) >= 50);
    expect([...found, ...errors.map((e) => JSON.stringify(e).slice(0, 400))]).toEqual([]);
  });
});

interface JsonSchema {
  properties?: Record<string, { type?: string; enum?: unknown[] }>;
}

/** A value its schema accepts, for the arguments a case leaves valid. */
function plausible(schema: { type?: string; enum?: unknown[] }): unknown {
  if (schema.enum) return schema.enum[0];
  if (schema.type === 'integer' || schema.type === 'number') return 1;
  if (schema.type === 'boolean') return true;
  return 'Sweep';
}
