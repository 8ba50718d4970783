import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalToolCall } from '../../src/mcp-kit/fast-path.js';
import { signIn, startTestServer, type TestServer, userId } from '../helpers/harness.js';
import { modernMeta } from '../helpers/mcp.js';

const LEGACY = ['2025-11-25', '2025-06-18'];
const ACCEPT = 'application/json, text/event-stream';

function modern(
  overrides: {
    headers?: Record<string, unknown>;
    body?: Record<string, unknown>;
    params?: Record<string, unknown>;
  } = {},
) {
  return {
    method: 'POST',
    headers: {
      accept: ACCEPT,
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'get_me',
      ...overrides.headers,
    },
    body: {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'get_me', arguments: {}, _meta: modernMeta(), ...overrides.params },
      ...overrides.body,
    },
  };
}
function legacy(overrides: { headers?: Record<string, unknown>; params?: Record<string, unknown> } = {}) {
  return {
    method: 'POST',
    headers: { accept: ACCEPT, 'mcp-protocol-version': '2025-11-25', ...overrides.headers },
    body: { jsonrpc: '2.0', id: 'x', method: 'tools/call', params: { name: 'get_me', ...overrides.params } },
  };
}
const recognise = (r: unknown) => canonicalToolCall(r as FastifyRequest, 'get_me', LEGACY);

describe('the fast path recognises only the canonical shape', () => {
  it('takes canonical calls on both wires', () => {
    expect(recognise(modern())).toEqual({ wire: 'modern', id: 1 });
    expect(recognise(legacy())).toEqual({ wire: 'legacy', id: 'x' });
    expect(recognise(legacy({ headers: { 'mcp-protocol-version': '2025-06-18' } }))).toEqual({
      wire: 'legacy',
      id: 'x',
    });
  });

  it.each([
    ['another tool', modern({ params: { name: 'get_you' } })],
    ['arguments', modern({ params: { arguments: { x: 1 } } })],
    [
      'an extra _meta key (progress token)',
      modern({ params: { _meta: { ...modernMeta(), progressToken: 1 } } }),
    ],
    [
      'no client info',
      modern({
        params: {
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    ],
    ['another revision in _meta', modern({ params: { _meta: modernMeta('2026-01-01') } })],
    ['Mcp-Name disagreeing', modern({ headers: { 'mcp-name': 'other' } })],
    ['Mcp-Method disagreeing', modern({ headers: { 'mcp-method': 'tools/list' } })],
    ['no Accept for SSE', modern({ headers: { accept: 'application/json' } })],
    ['a null id', modern({ body: { id: null } })],
    ['a fractional id', modern({ body: { id: 1.5 } })],
    ['an extra top-level key', modern({ body: { extra: true } })],
    ['jsonrpc 1.0', modern({ body: { jsonrpc: '1.0' } })],
    ['a batch', { ...modern(), body: [modern().body] }],
    ['a GET', { ...modern(), method: 'GET' }],
    ['legacy with _meta', legacy({ params: { _meta: { progressToken: 'p' } } })],
    ['legacy with modern headers', legacy({ headers: { 'mcp-method': 'tools/call' } })],
    ['legacy without a version header', legacy({ headers: { 'mcp-protocol-version': undefined } })],
    ['an unsupported legacy revision', legacy({ headers: { 'mcp-protocol-version': '2024-11-05' } })],
  ])('leaves %s to the SDK', (_name, request) => {
    expect(recognise(request)).toBeUndefined();
  });
});

describe('the fast path answers exactly what the SDK answers', () => {
  let fast: TestServer;
  let sdk: TestServer;
  let tokens: { fast: string; sdk: string };
  let ids: { fast: string; sdk: string };
  beforeAll(async () => {
    [fast, sdk] = await Promise.all([startTestServer(), startTestServer({ env: { MCP_FAST_PATH: 'off' } })]);
    tokens = { fast: (await signIn(fast)).token, sdk: (await signIn(sdk)).token };
    ids = { fast: await userId(fast), sdk: await userId(sdk) };
  });
  afterAll(() => Promise.all([fast?.close(), sdk?.close()]));

  async function call(
    server: TestServer,
    token: string,
    request: { headers: Record<string, unknown>; body: unknown },
  ) {
    const headers = Object.fromEntries(
      Object.entries(request.headers).filter(([, v]) => v !== undefined),
    ) as Record<string, string>;
    const res = await fetch(`${server.url.mcp}/mcp`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(request.body),
    });
    return {
      status: res.status,
      type: res.headers.get('content-type'),
      cache: res.headers.get('cache-control'),
      body: await res.text(),
    };
  }

  it.each([
    ['2026-07-28', modern()],
    [
      '2026-07-28 with a string id and no arguments',
      modern({ body: { id: 'abc' }, params: { arguments: undefined } }),
    ],
    ['2025-11-25', legacy()],
    ['2025-06-18', legacy({ headers: { 'mcp-protocol-version': '2025-06-18' } })],
    [
      'a non-canonical call (falls through on both)',
      modern({ params: { _meta: { ...modernMeta(), progressToken: 7 } } }),
    ],
  ])('%s', async (_name, request) => {
    const a = await call(fast, tokens.fast, request);
    const b = await call(sdk, tokens.sdk, request);
    expect(a.status).toBe(200);
    expect({ ...a, body: a.body.replaceAll(ids.fast, ids.sdk) }).toEqual(b);
  });
});
