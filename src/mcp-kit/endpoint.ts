import { Buffer } from 'node:buffer';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { AuthInfo, McpHttpHandler } from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { endOfTurn } from '../base/turn-end.js';
import { noteAnsweredError } from '../http/answered-error.js';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../http/dependency-outage.js';
import { UNAVAILABLE_MESSAGE } from '../http/errors.js';
import { classifyAndReport, type ErrorClass, renderErrors } from '../http/framework-errors.js';
import type { SurfaceServerOptions } from '../http/server.js';
import { type Interruption, McpAuthError } from './auth.js';
import type { FastPath } from './fast-path.js';
import { acceptForSdk } from './accept.js';
import { hostCheck, malformedHost, originProblem } from './host-guard.js';
import { JSON_RPC_ERRORS, jsonRpcErrorBody } from './json-rpc.js';

/**
 * The HTTP edge of an MCP server on Fastify, shared by every MCP host: Host/Origin checks, authentication before any
 * MCP processing, bounded JSON bodies, the hand-off to the SDK's web-standard handler, and JSON errors everywhere
 * else on the host. What the server offers lives in the SDK factory behind `handler`.
 */
export interface McpEndpointOptions {
  /** The endpoint path, `/mcp`. */
  path: string;
  /** Hostnames the host answers to (see `allowedHostnames`). */
  allowedHosts: () => readonly string[];
  /** Verifies the caller; throws McpAuthError. Runs before the body is even read. */
  authenticate(request: FastifyRequest): Promise<AuthInfo>;
  handler: McpHttpHandler;
  /** Answers the hottest calls without the SDK when they arrive in their canonical shape (see fast-path.ts). */
  fastPath?: FastPath;
  /**
   * Set while a request ran when it cannot be answered with its result after all (`Interruption`). When set, the SDK's
   * answer to a request that can be interrupted (`tools/call`, `resources/read`) is read whole before it is sent, so
   * that its status can still change.
   */
  interruption?(request: FastifyRequest): Interruption | undefined;
}

function sendInterruption(request: FastifyRequest, reply: FastifyReply, i: Interruption): FastifyReply {
  if ('refused' in i) return sendAuthError(request, reply, i.refused);
  if ('failed' in i) return sendClassified(request, reply, i.failed);
  reply.header('retry-after', String(OUTAGE_RETRY_AFTER_SECONDS));
  return sendJsonRpcError(request, reply, 503, JSON_RPC_ERRORS.serverError, i.unavailable);
}

/** Every MCP host answers in JSON-RPC, also when Node refuses a request before it exists (431, broken syntax). */
export const MCP_SERVER_OPTIONS: SurfaceServerOptions = {
  connectionErrorBody: (error, requestId) =>
    jsonRpcErrorBody(JSON_RPC_ERRORS.serverError, error.message, requestId),
};

/**
 * Streamable HTTP's methods: POST for messages, GET to open a 2025-era stream, DELETE to end a 2025-era session. GET
 * and DELETE are routed so that they are authenticated first (a client probing without a token gets the bearer
 * challenge); every revision here is served statelessly, so the SDK answers them 405 and only POST is served.
 */
const MCP_METHODS: HTTPMethods[] = ['POST', 'GET', 'DELETE'];
const SERVED_METHODS: HTTPMethods[] = ['POST'];

declare module 'fastify' {
  interface FastifyRequest {
    mcpAuth: AuthInfo | null;
  }
}

export async function mountMcpEndpoint(app: FastifyInstance, o: McpEndpointOptions): Promise<void> {
  app.decorateRequest('mcpAuth', null);
  // Only JSON reaches the endpoint (Streamable HTTP: "the body MUST be a single JSON-RPC message"); others get 415.
  app.removeContentTypeParser('text/plain');
  // Host on every path (DNS rebinding); malformed or repeated first, as the 400 RFC 9112 §3.2 requires.
  const hostProblem = hostCheck(o.allowedHosts);
  // Callback-style: an async hook costs a promise and a turn of the microtask queue on every request. A refusal is
  // sent without calling `done` (and without returning the reply, which Fastify would take for a promise).
  app.addHook('onRequest', (request, reply, done) => {
    const malformed = malformedHost(request.raw.rawHeaders);
    const problem = malformed ? undefined : hostProblem(request.headers.host);
    if (malformed) sendJsonRpcError(request, reply, 400, JSON_RPC_ERRORS.invalidRequest, malformed);
    else if (problem) sendJsonRpcError(request, reply, 403, JSON_RPC_ERRORS.serverError, problem);
    else done();
  });
  renderErrors(app, {
    classified: (error, request, reply) =>
      sendJsonRpcError(request, reply, error.status, ...jsonRpcOf(error)),
    routeMiss: (miss, request, reply) => {
      // On the endpoint, Allow names what is served, as the SDK's 405 to GET and DELETE does (RFC 9110 §10.2.1).
      const allowed = miss.kind === 'method_not_allowed' && miss.path === o.path ? SERVED_METHODS : undefined;
      if (allowed) reply.header('allow', allowed.join(', '));
      const [status, message] =
        miss.kind === 'route_not_found'
          ? [404, `Not Found: no route for ${miss.path}`]
          : [405, `Method not allowed: use ${(allowed ?? miss.allowed).join(', ')} on ${miss.path}`];
      return sendJsonRpcError(request, reply, status, JSON_RPC_ERRORS.serverError, message);
    },
  });
  app.route({
    method: MCP_METHODS,
    url: o.path,
    exposeHeadRoute: false,
    onRequest: async (request, reply) => {
      // Origin on the routed endpoint itself, whatever spelling of the path reached it (`/%6dcp`, `/mcp#x`,
      // absolute-form targets): browsers send MCP traffic only here. Host was checked on the way in, on every path.
      const origin = originProblem(request.headers.origin, o.allowedHosts());
      if (origin) return sendJsonRpcError(request, reply, 403, JSON_RPC_ERRORS.serverError, origin);
      try {
        request.mcpAuth = await o.authenticate(request);
      } catch (e) {
        if (!(e instanceof McpAuthError)) throw e;
        return sendAuthError(request, reply, e);
      }
    },
    handler: async (request, reply) => {
      // JSON-RPC batches were removed in MCP 2025-06-18 and no served revision has them: an array is refused whole,
      // before any per-message check could be skipped (Streamable HTTP: a body the server cannot accept gets 400).
      if (Array.isArray(request.body)) {
        return sendJsonRpcError(
          request,
          reply,
          400,
          JSON_RPC_ERRORS.invalidRequest,
          'Invalid Request: JSON-RPC batches are not supported; send one message per request',
        );
      }
      const fast = o.fastPath && (await o.fastPath(request));
      // Written with the turn's other answers (base/turn-end.ts); the interruption is checked after the wait.
      if (fast) await endOfTurn();
      const interrupted = o.interruption?.(request);
      if (interrupted) return sendInterruption(request, reply, interrupted);
      // Serialized already: through an identity serializer Fastify sends the string with its content type as it is
      // (it appends a charset to a JSON string it sends itself), and writes the headers and the body in one write
      // (as a Buffer they took a copy and a second buffer of the socket's writev: ~6 µs of a call, A/B).
      if (fast) return reply.code(fast.status).headers(fast.headers).serializer(asIs).send(fast.body);
      return serveMcp(o, request, reply);
    },
  });
}

const asIs = (body: string): string => body;

/** Hands the authenticated request to the SDK and writes its web Response back through Fastify. */
async function serveMcp(o: McpEndpointOptions, request: FastifyRequest, reply: FastifyReply) {
  const abort = new AbortController();
  // Only a client that leaves before the answer is complete cancels the exchange (an SSE stream, a slow handler).
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  const response = await o.handler.fetch(toWebRequest(request, abort.signal), {
    ...(request.mcpAuth ? { authInfo: request.mcpAuth } : {}),
    ...(request.body !== undefined ? { parsedBody: request.body } : {}),
  });
  if (o.interruption && isInterruptible(request.body)) {
    // The answer to one such request ends with its result (a JSON body, or a stream the SDK closes after it): read
    // whole, it is sent only once the request is known not to have been interrupted.
    const body = Buffer.from(await response.arrayBuffer());
    const interrupted = o.interruption(request);
    if (interrupted) return sendInterruption(request, reply, interrupted);
    noteSdkError(request, response.status, body);
    return reply.code(response.status).headers(endToEndHeaders(response.headers)).send(body);
  }
  reply.code(response.status).headers(endToEndHeaders(response.headers));
  if (response.body === null) return reply.send();
  if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
    return reply.send(Readable.fromWeb(response.body as NodeReadableStream<Uint8Array>));
  }
  const body = Buffer.from(await response.arrayBuffer());
  noteSdkError(request, response.status, body);
  return reply.send(body);
}

/** The JSON-RPC code of a refusal the SDK's transport answered itself (a 4xx), for the access log. */
function noteSdkError(request: FastifyRequest, status: number, body: Buffer): void {
  if (status < 400) return;
  try {
    const code = (JSON.parse(body.toString('utf8')) as { error?: { code?: unknown } }).error?.code;
    if (typeof code === 'number') noteAnsweredError(request.raw, code);
  } catch {
    // Not JSON: the status says what there is to say.
  }
}

/**
 * The connection's own fields (RFC 9110 §7.6.1; RFC 9112 §6.1, §9.6), which node:http sets for the connection the
 * answer goes out on. The SDK's event streams say `Connection: keep-alive`: copied, that overrode the `close` a client
 * asked for (RFC 9112 §9.6: the server MUST close after answering it) and the `close` a stop gives every answer in
 * flight (http/server.ts), so such a connection stayed open and a stop waited for it until its timeout.
 */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** The web Response's headers without the hop-by-hop ones. */
function endToEndHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of headers) if (!HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

/**
 * The requests whose handlers read what can be gone or down by the time they answer (a tool's data, `user://me`), each
 * answered by one result. Not `subscriptions/listen`, whose stream stays open: read whole, it would never be sent.
 */
const INTERRUPTIBLE_METHODS = new Set(['tools/call', 'resources/read']);

function isInterruptible(body: unknown): boolean {
  const method =
    typeof body === 'object' && body !== null ? (body as { method?: unknown }).method : undefined;
  return typeof method === 'string' && INTERRUPTIBLE_METHODS.has(method);
}

/**
 * A body-less web Request: the SDK takes the body Fastify already parsed (`parsedBody`), so only the method, URL and
 * headers are carried over. Node has already joined or dropped repeated singleton headers (RFC 9110 §5.3).
 */
function toWebRequest(request: FastifyRequest, signal: AbortSignal): Request {
  const headers = new Headers();
  const raw = request.raw.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  // The host the request was for: the absolute-form target's when it came in that form (http/request-target.ts).
  if (request.headers.host !== undefined) headers.set('host', request.headers.host);
  // Accept as RFC 9110 reads it, not as the SDK's transport does (mcp-kit/accept.ts).
  const accept = acceptForSdk(request.headers.accept);
  if (accept === undefined) headers.delete('accept');
  else headers.set('accept', accept);
  return new Request(`http://${request.headers.host ?? 'localhost'}${request.url}`, {
    method: request.method,
    headers,
    signal,
  });
}

/** Sends an authentication refusal (401/403) with its challenge, a JSON body and `no-store`. */
export function sendAuthError(request: FastifyRequest, reply: FastifyReply, e: McpAuthError): FastifyReply {
  // RFC 6750 §3.1: a request without credentials is refused with no code.
  if (e.oauthError) noteAnsweredError(request.raw, e.oauthError);
  return reply
    .code(e.status)
    .header('www-authenticate', e.challenge)
    .header('cache-control', 'no-store')
    .type('application/json; charset=utf-8')
    .send(e.body(request.id));
}

/**
 * An error a handler threw, answered as Fastify's error handler answers it on this host: classified and, when it is a
 * bug, logged, in one place (`classifyAndReport`); an outage is 503 with Retry-After.
 */
function sendClassified(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  const { error: classified, headers } = classifyAndReport(error, request.log);
  return sendJsonRpcError(request, reply.headers(headers), classified.status, ...jsonRpcOf(classified));
}

export function sendJsonRpcError(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  code: number,
  message: string,
): FastifyReply {
  noteAnsweredError(request.raw, code);
  return reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send(jsonRpcErrorBody(code, message, request.id));
}

/** Each class of error as a JSON-RPC error code and message. */
function jsonRpcOf(error: ErrorClass): [code: number, message: string] {
  switch (error.kind) {
    case 'body_too_large':
      return [JSON_RPC_ERRORS.serverError, 'Payload Too Large: the request body is too large'];
    case 'unsupported_media_type':
      return [JSON_RPC_ERRORS.serverError, 'Unsupported Media Type: Content-Type must be application/json'];
    case 'unsupported_content_coding':
      return [
        JSON_RPC_ERRORS.serverError,
        `Unsupported Media Type: send the body uncompressed (Content-Encoding ${error.coding} is not accepted)`,
      ];
    case 'invalid_json':
      return [
        JSON_RPC_ERRORS.parseError,
        `Parse error: the body is ${error.empty ? 'empty' : 'not valid JSON'}`,
      ];
    case 'invalid_content_length':
      return [JSON_RPC_ERRORS.invalidRequest, 'Bad Request: Content-Length does not match the body'];
    case 'invalid_request':
      return [
        JSON_RPC_ERRORS.invalidRequest,
        error.message ? `Bad Request: ${error.message}` : 'Bad Request',
      ];
    case 'unavailable':
      return [JSON_RPC_ERRORS.serverError, UNAVAILABLE_MESSAGE];
    case 'internal':
      return [JSON_RPC_ERRORS.internalError, 'Internal server error'];
  }
}
