import type { FastifyRequest } from 'fastify';
import { acceptsEventStream } from './accept.js';

/**
 * A precomputed answer to one exact request shape, written without building an SDK server.
 *
 * Why: the SDK serves each stateless request with a fresh server, transport and zod wire parse (docs/contract.md#mcp-servers measured
 * ~2.2k calls/s per core against ~39k for a plain dispatch). The hottest call an agent makes is answered here instead,
 * but only in its canonical, certainly-valid shape; every other request — any odd header, extra field or error case —
 * goes to the SDK, which stays the authority on the protocol. `test/mcp/fast-path.test.ts` asserts the two answers are
 * identical for the same requests.
 */
export interface FastAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Answers the request, or returns undefined to let the SDK handle it. */
export type FastPath = (request: FastifyRequest) => Promise<FastAnswer | undefined>;

export const MODERN_REVISION = '2026-07-28';

export type Wire = 'modern' | 'legacy';

export interface CanonicalToolCall {
  wire: Wire;
  id: string | number;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;

const onlyKeys = (o: Record<string, unknown>, allowed: readonly string[]) =>
  Object.keys(o).every((k) => allowed.includes(k));

const isEmptyArguments = (v: unknown) => v === undefined || (isPlainObject(v) && Object.keys(v).length === 0);

const isRequestId = (v: unknown): v is string | number =>
  typeof v === 'string' || (typeof v === 'number' && Number.isSafeInteger(v));

/** The 2026-07-28 per-request envelope with nothing but the three standard keys (MCP 2026-07-28 §Request metadata). */
function isPlainModernMeta(meta: unknown): boolean {
  if (!isPlainObject(meta)) return false;
  const info = meta['io.modelcontextprotocol/clientInfo'];
  return (
    onlyKeys(meta, [
      'io.modelcontextprotocol/protocolVersion',
      'io.modelcontextprotocol/clientInfo',
      'io.modelcontextprotocol/clientCapabilities',
    ]) &&
    meta['io.modelcontextprotocol/protocolVersion'] === MODERN_REVISION &&
    isPlainObject(info) &&
    onlyKeys(info, ['name', 'version', 'title']) &&
    typeof info['name'] === 'string' &&
    typeof info['version'] === 'string' &&
    isPlainObject(meta['io.modelcontextprotocol/clientCapabilities'])
  );
}

/**
 * Recognises `tools/call <tool>` with no arguments in its canonical shape on either wire, or returns undefined.
 * Modern: `Mcp-Method`/`Mcp-Name`/`MCP-Protocol-Version` headers agreeing with the body and a plain `_meta` envelope.
 * Legacy: an `MCP-Protocol-Version` header naming a served 2025 revision and no `_meta` at all.
 */
export function canonicalToolCall(
  request: FastifyRequest,
  tool: string,
  legacyRevisions: readonly string[],
): CanonicalToolCall | undefined {
  const call = canonicalCall(request, tool, legacyRevisions);
  return call && isEmptyArguments(call.arguments) ? { wire: call.wire, id: call.id } : undefined;
}

/**
 * The same canonical shape with arguments: a plain object (or none), returned for the caller to validate against the
 * tool's input schema exactly as the SDK would, falling back to the SDK whenever they do not pass.
 */
export function canonicalToolCallWithArguments(
  request: FastifyRequest,
  tool: string,
  legacyRevisions: readonly string[],
): (CanonicalToolCall & { arguments: Record<string, unknown> }) | undefined {
  const call = canonicalCall(request, tool, legacyRevisions);
  const args = call?.arguments ?? {};
  return call && isPlainObject(args) ? { wire: call.wire, id: call.id, arguments: args } : undefined;
}

function canonicalCall(
  request: FastifyRequest,
  tool: string,
  legacyRevisions: readonly string[],
): (CanonicalToolCall & { arguments: unknown }) | undefined {
  const body = request.body;
  if (request.method !== 'POST' || !acceptsEventStream(request.headers.accept) || !isPlainObject(body))
    return undefined;
  if (!onlyKeys(body, ['jsonrpc', 'id', 'method', 'params']) || body['jsonrpc'] !== '2.0') return undefined;
  if (body['method'] !== 'tools/call' || !isRequestId(body['id'])) return undefined;
  const params = body['params'];
  if (!isPlainObject(params) || !onlyKeys(params, ['name', 'arguments', '_meta'])) return undefined;
  if (params['name'] !== tool) return undefined;
  const found = { id: body['id'], arguments: params['arguments'] };
  const revision = request.headers['mcp-protocol-version'];
  if (revision === MODERN_REVISION) {
    const agrees = request.headers['mcp-method'] === 'tools/call' && request.headers['mcp-name'] === tool;
    return agrees && isPlainModernMeta(params['_meta']) ? { wire: 'modern', ...found } : undefined;
  }
  const legacy =
    typeof revision === 'string' && legacyRevisions.includes(revision) && params['_meta'] === undefined;
  const noModernHeaders =
    request.headers['mcp-method'] === undefined && request.headers['mcp-name'] === undefined;
  return legacy && noModernHeaders ? { wire: 'legacy', ...found } : undefined;
}

/**
 * A tool result as the SDK writes it: on the modern wire as JSON with `resultType` and the server's identity in
 * `_meta` (kept where the tool's own `_meta` stands, else written last, as the SDK adds it); on the 2025 wire as one
 * SSE `message` event (Streamable HTTP, 2025-11-25 §Sending Messages to the Server).
 */
export function toolResultAnswer(
  call: CanonicalToolCall,
  result: { _meta?: Record<string, unknown>; [key: string]: unknown },
  serverInfo: Record<string, unknown>,
): FastAnswer {
  if (call.wire === 'modern') {
    return {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: modernBody(call, result, serverInfo),
    };
  }
  return {
    status: 200,
    headers: {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
    },
    body: `event: message\ndata: ${JSON.stringify({ result, jsonrpc: '2.0', id: call.id })}\n\n`,
  };
}

/** The server's identity as the modern wire's `_meta` writes it, serialized once per server. */
const identities = new WeakMap<Record<string, unknown>, string>();

const identityOf = (serverInfo: Record<string, unknown>) => ({
  'io.modelcontextprotocol/serverInfo': serverInfo,
});

function modernBody(
  call: CanonicalToolCall,
  result: { _meta?: Record<string, unknown>; [key: string]: unknown },
  serverInfo: Record<string, unknown>,
): string {
  if (result._meta || 'resultType' in result) {
    // `Object.assign`, not spreads followed by more members (the same members in the same order): on Node 20 every
    // object made that way is promoted out of the young generation (docs/performance.md, lever 31).
    const modern = Object.assign({}, result, {
      _meta: Object.assign({}, result._meta, identityOf(serverInfo)),
      resultType: 'complete',
    });
    return JSON.stringify({ result: modern, jsonrpc: '2.0', id: call.id });
  }
  // The tools' results carry no `_meta`: the two members are appended to the result's own JSON instead of copying
  // it into a new object first (the copy and the identity's serialization were half of this function's cost).
  let identityJson = identities.get(serverInfo);
  if (identityJson === undefined)
    identities.set(serverInfo, (identityJson = JSON.stringify(identityOf(serverInfo))));
  const json = JSON.stringify(result);
  const members = `"resultType":"complete","_meta":${identityJson}`;
  const modern = json === '{}' ? `{${members}}` : `${json.slice(0, -1)},${members}}`;
  return `{"result":${modern},"jsonrpc":"2.0","id":${JSON.stringify(call.id)}}`;
}
