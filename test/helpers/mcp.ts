import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { expect } from 'vitest';

/** The MCP protocol revisions the user MCP server serves (docs/contract.md#surfaces). */
export const MCP_VERSIONS = ['2026-07-28', '2025-11-25', '2025-06-18'] as const;
export type McpVersion = (typeof MCP_VERSIONS)[number];
export const MODERN = '2026-07-28';

/** A real SDK client pinned to exactly one protocol revision, sending the bearer token on every request. */
export async function connectClient(endpoint: string, token: string, version: McpVersion): Promise<Client> {
  const client = new Client(
    { name: 'svc-test-client', version: '1.0.0' },
    version === MODERN
      ? { versionNegotiation: { mode: { pin: MODERN } } }
      : { supportedProtocolVersions: [version] },
  );
  const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

/** The `_meta` envelope every 2026-07-28 request carries (MCP 2026-07-28 basic §Request metadata). */
export function modernMeta(version = MODERN): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientInfo': { name: 'raw-test', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
}

export interface RawMcpOptions {
  token?: string;
  headers?: Record<string, string>;
  /** The raw body; defaults to the JSON of `message`. */
  body?: string;
  /** Ends the request, e.g. `AbortSignal.timeout`, where an answer that never ends would hang the test. */
  signal?: AbortSignal;
}

let nextId = 1;

/** One 2026-07-28 request over plain fetch, with the `Mcp-Method`/`Mcp-Name` headers the wire requires. */
export function modernRequest(
  endpoint: string,
  method: string,
  params: Record<string, unknown> = {},
  o: RawMcpOptions = {},
): Promise<Response> {
  const name =
    typeof params['name'] === 'string'
      ? params['name']
      : typeof params['uri'] === 'string'
        ? params['uri']
        : undefined;
  return post(
    endpoint,
    { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: modernMeta() } },
    {
      ...o,
      headers: {
        'mcp-protocol-version': MODERN,
        'mcp-method': method,
        ...(name ? { 'mcp-name': name } : {}),
        ...o.headers,
      },
    },
  );
}

/**
 * The four ways a client reads the user on the user MCP server, by name: `get_me` on the fast path (its canonical
 * 2026-07-28 shape) and through the SDK (a progress token takes it there), and `user://me` on both wires.
 */
export function userReads(endpoint: string, token: string): Record<string, () => Promise<Response>> {
  const legacy = { token, headers: { 'mcp-protocol-version': '2025-11-25' } };
  const legacyRequest = (method: string, params: Record<string, unknown>) =>
    post(endpoint, { jsonrpc: '2.0', id: nextId++, method, params }, legacy);
  return {
    'get_me on the fast path': () =>
      modernRequest(endpoint, 'tools/call', { name: 'get_me', arguments: {} }, { token }),
    'get_me through the SDK': () =>
      legacyRequest('tools/call', { name: 'get_me', _meta: { progressToken: 1 } }),
    'user://me, 2025-11-25': () => legacyRequest('resources/read', { uri: 'user://me' }),
    'user://me, 2026-07-28': () => modernRequest(endpoint, 'resources/read', { uri: 'user://me' }, { token }),
  };
}

/** One POST of a JSON-RPC message with the Accept header Streamable HTTP requires. */
export function post(endpoint: string, message: unknown, o: RawMcpOptions = {}): Promise<Response> {
  return fetch(endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(o.token ? { authorization: `Bearer ${o.token}` } : {}),
      ...o.headers,
    },
    body: o.body ?? JSON.stringify(message),
    ...(o.signal ? { signal: o.signal } : {}),
  });
}

/** The legacy `initialize` request of the 2025 revisions. */
export function initializeMessage(protocolVersion: string) {
  return {
    jsonrpc: '2.0',
    id: nextId++,
    method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw-test', version: '1.0.0' } },
  };
}

/** Reads a JSON or single-event SSE response body as the JSON-RPC message it carries. */
export async function jsonRpcOf(res: Response): Promise<Record<string, unknown>> {
  const text = await res.text();
  if (!res.headers.get('content-type')?.includes('text/event-stream')) return JSON.parse(text);
  return sseMessages(text).at(-1)!;
}

/** The JSON-RPC messages of an SSE body, one per `data:` line, in order. */
export function sseMessages(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim())
    .filter(Boolean)
    .map((data) => JSON.parse(data) as Record<string, unknown>);
}

/**
 * Each request, made while a handler behind it throws an error whose words include `detail`: answered HTTP 500 with
 * `-32603` "Internal server error", those words never shown, and the error logged once as `unhandled error` with the
 * request's id (`logs`: the server's captured lines).
 */
export async function expectEachAnsweredAsBug(
  requests: Record<string, () => Promise<Response>>,
  logs: { lines: Record<string, unknown>[] },
  detail: string,
): Promise<void> {
  for (const [name, request] of Object.entries(requests)) {
    const logged = logs.lines.length;
    const res = await request();
    const text = await res.text();
    expect({ name, status: res.status }).toEqual({ name, status: 500 });
    expect(text, name).not.toContain(detail);
    expect((JSON.parse(text) as { error: unknown }).error, name).toMatchObject({
      code: -32603,
      message: 'Internal server error',
    });
    const errors = logs.lines.slice(logged).filter((l) => l['msg'] === 'unhandled error');
    expect(errors, name).toHaveLength(1);
    expect(JSON.stringify(errors[0]), name).toContain(detail);
    expect(errors[0]!['request_id'], name).toBe(res.headers.get('x-request-id'));
  }
}
