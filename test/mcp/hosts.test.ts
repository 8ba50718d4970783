import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../agency-mcp/helpers.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { sendRaw } from '../helpers/raw-http.js';
import {
  jsonRpcOf,
  MCP_VERSIONS,
  type McpVersion,
  MODERN,
  modernMeta,
  post,
  sseMessages,
} from '../helpers/mcp.js';

/**
 * What MCP hosts and hostile clients send to both MCP servers, on every served revision: JSON-RPC batches (removed
 * in 2025-06-18), unknown tools, malformed or repeated Host headers, a foreign Origin behind other spellings of the
 * endpoint path.
 */

let server: TestServer;
let userToken: string;
let agencyReadToken: string;
const endpoints = () => ({ user: `${server.url.mcp}/mcp`, agency: `${server.url.agencyMcp}/mcp` });

beforeAll(async () => {
  server = await startTestServer();
  userToken = (await signIn(server)).token;
  agencyReadToken = (await grant(server, { scopes: ['agency:mcp:read'] })).token;
});
afterAll(() => server?.close());

const tokenFor = (which: 'user' | 'agency') => (which === 'user' ? userToken : agencyReadToken);

/** A request of any method in the shape of the given revision, with the headers 2026-07-28 asks for. */
function request(
  version: McpVersion,
  method: string,
  params: Record<string, unknown>,
  name?: string,
  id = 7,
) {
  const message = {
    jsonrpc: '2.0',
    id,
    method,
    params: version === MODERN ? { ...params, _meta: modernMeta() } : params,
  };
  const headers: Record<string, string> =
    version === MODERN
      ? { 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(name ? { 'mcp-name': name } : {}) }
      : { 'mcp-protocol-version': version };
  return { message, headers };
}

/** A tools/call of `name` without arguments, as `request` makes it. */
const toolsCall = (version: McpVersion, name: string, id = 1) =>
  request(version, 'tools/call', { name, arguments: {} }, name, id);

describe(`neither server promises list-change notifications it cannot send (${ENGINE})`, () => {
  // Every request is served by a fresh server that publishes no event (src/mcp-kit/capabilities.ts).
  const lists = { user: ['tools', 'resources'], agency: ['tools'] } as const;
  for (const which of ['user', 'agency'] as const) {
    for (const version of MCP_VERSIONS) {
      it(`${which} server, ${version}: the capabilities say listChanged false`, async () => {
        const { message, headers } =
          version === MODERN
            ? request(version, 'server/discover', {})
            : request(version, 'initialize', {
                protocolVersion: version,
                capabilities: {},
                clientInfo: { name: 'raw-test', version: '1.0.0' },
              });
        const res = await post(endpoints()[which], message, { token: tokenFor(which), headers });
        const { result } = (await jsonRpcOf(res)) as {
          result: { capabilities: Record<string, { listChanged?: boolean }> };
        };
        for (const list of lists[which])
          expect(result.capabilities[list], list).toEqual({ listChanged: false });
      });
    }
    it(`${which} server, ${MODERN}: subscriptions/listen for list changes is acknowledged with none and ends`, async () => {
      // Acknowledged, such a stream stayed open with keep-alives only, one of the SDK's 1,024 per process.
      const { message, headers } = request(MODERN, 'subscriptions/listen', {
        notifications: { toolsListChanged: true, resourcesListChanged: true },
      });
      const res = await post(endpoints()[which], message, {
        token: tokenFor(which),
        headers,
        signal: AbortSignal.timeout(5_000),
      });
      const events = sseMessages(await res.text());
      expect(events[0]).toMatchObject({
        method: 'notifications/subscriptions/acknowledged',
        params: { notifications: {} },
      });
      expect(events[1]).toMatchObject({ id: 7, result: { resultType: 'complete' } });
    });
  }
});

describe(`JSON-RPC batches are refused on both MCP servers (${ENGINE})`, () => {
  for (const which of ['user', 'agency'] as const) {
    for (const version of MCP_VERSIONS) {
      it(`${which} server, ${version}: an array body → 400 -32600, nothing in it runs`, async () => {
        // A write tool inside a batch on a read-only token: a batch must not bypass the 403 step-up or the filter.
        const batch = [toolsCall(version, 'get_me', 1).message, toolsCall(version, 'create_task', 2).message];
        const res = await post(endpoints()[which], batch, {
          token: tokenFor(which),
          headers: toolsCall(version, 'get_me').headers,
        });
        expect(res.status).toBe(400);
        const body = (await res.json()) as { error: { code: number; message: string }; id: null };
        expect(body.error.code).toBe(-32600);
        expect(body.error.message).toMatch(/batch/i);
        expect(body.id).toBeNull();
      });
    }
  }
});

describe(`an unknown tool is -32602 naming it, HTTP 200 (${ENGINE})`, () => {
  for (const which of ['user', 'agency'] as const) {
    for (const version of MCP_VERSIONS) {
      it(`${which} server, ${version}`, async () => {
        const call = toolsCall(version, 'no_such_tool');
        const res = await post(endpoints()[which], call.message, {
          token: tokenFor(which),
          headers: call.headers,
        });
        expect(res.status).toBe(200);
        const message = (await jsonRpcOf(res)) as { error?: { code: number; message: string } };
        expect(message.error?.code).toBe(-32602);
        expect(message.error?.message).toContain('no_such_tool');
      });
    }
  }
});

// JSON-RPC 2.0 §5.1; the SDK alone answered -32603 Internal error with a JSON dump of zod's issues (mcp-kit/invalid-params.ts).
describe(`params that do not fit the method are -32602 naming the field, HTTP 200 (${ENGINE})`, () => {
  const cases = [
    [
      'agency',
      'tools/list',
      { cursor: 5 },
      undefined,
      'Invalid params for tools/list: cursor: expected string, received number',
    ],
    [
      'agency',
      'tools/call',
      { name: 'list_clients', arguments: [] },
      'list_clients',
      'Invalid params for tools/call: arguments: expected object, received array',
    ],
    [
      'user',
      'resources/read',
      {},
      undefined,
      'Invalid params for resources/read: uri: expected string, received undefined',
    ],
    [
      'user',
      'logging/setLevel',
      { level: 'loud' },
      undefined,
      'Invalid params for logging/setLevel: level: expected one of',
    ],
  ] as const;
  for (const [which, method, params, name, expected] of cases) {
    for (const version of MCP_VERSIONS) {
      if (method === 'logging/setLevel' && version === MODERN) continue; // 2026-07-28 sets the level per request
      it(`${which} server, ${method}, ${version}`, async () => {
        const { message, headers } = request(version, method, params, name);
        const res = await post(endpoints()[which], message, { token: tokenFor(which), headers });
        expect(res.status).toBe(200);
        const answer = (await jsonRpcOf(res)) as { id: unknown; error?: { code: number; message: string } };
        expect(answer.id).toBe(7);
        expect(answer.error?.code).toBe(-32602);
        expect(answer.error?.message.startsWith(expected), answer.error?.message).toBe(true);
      });
    }
  }
  it('a method the server does not serve is still -32601, whatever its params', async () => {
    const { message, headers } = request('2025-11-25', 'prompts/get', {});
    const answer = (await jsonRpcOf(
      await post(endpoints().user, message, { token: userToken, headers }),
    )) as { error?: { code: number } };
    expect(answer.error?.code).toBe(-32601);
  });
});

describe(`Host must be one valid host[:port]: 400 otherwise, RFC 9112 §3.2 (${ENGINE})`, () => {
  const initialize = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  const mcpHeaders = (which: 'user' | 'agency') => [
    `Authorization: Bearer ${tokenFor(which)}`,
    'Content-Type: application/json',
    'Accept: application/json, text/event-stream',
    'MCP-Protocol-Version: 2025-11-25',
  ];
  for (const which of ['user', 'agency'] as const) {
    const hostOf = () => new URL(endpoints()[which]).host;
    it(`${which} server: userinfo in Host (evil.example@127.0.0.1:port) → 400`, async () => {
      const res = await send(
        endpoints()[which],
        '/mcp',
        [`Host: evil.example@${hostOf()}`, ...mcpHeaders(which)],
        initialize,
      );
      expect(res.status).toBe(400);
      expect((JSON.parse(res.body) as { error: { code: number } }).error.code).toBe(-32600);
    });
    it(`${which} server: two Host headers → 400`, async () => {
      const res = await send(
        endpoints()[which],
        '/mcp',
        [`Host: ${hostOf()}`, `Host: ${hostOf()}`, ...mcpHeaders(which)],
        initialize,
      );
      expect(res.status).toBe(400);
    });
    const targets = () => ['/%6dcp', '/m%63p', '/mcp#x', `http://${hostOf()}/mcp`];
    for (const [i, label] of ['/%6dcp', '/m%63p', '/mcp#x', 'an absolute-form target'].entries()) {
      it(`${which} server: a foreign Origin on ${label} → refused, never served`, async () => {
        const res = await send(
          endpoints()[which],
          targets()[i]!,
          [`Host: ${hostOf()}`, 'Origin: https://evil.example', ...mcpHeaders(which)],
          initialize,
        );
        expect([403, 404]).toContain(res.status);
        expect(res.body).not.toContain('"result"');
      });
    }
  }
});

/** One request over a plain socket with exactly the request target and header lines given (no Host added). */
function send(endpoint: string, target: string, headers: string[], body: string) {
  const payload = [
    `POST ${target} HTTP/1.1`,
    ...headers,
    'Connection: close',
    `Content-Length: ${Buffer.byteLength(body)}`,
    '',
    body,
  ].join('\r\n');
  return sendRaw(endpoint, payload);
}
