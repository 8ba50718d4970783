import { Buffer } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import type { Config, Surface } from '../config/config.js';
import { type AddressSet, addressSet, networkOf } from '../base/address-set.js';
import { atMostEvery, systemClock } from '../base/clock.js';
import { newId } from '../base/ids.js';
import type { Metrics } from '../base/metrics.js';
import { keepTickObjectShape } from '../base/tick-shape.js';
import { endOfTurn } from '../base/turn-end.js';
import { applyV8Flags } from '../base/v8-flags.js';
import { answeredError } from './answered-error.js';
import { deferredChildLogger } from './deferred-logger.js';
import { ApiError, type ErrorCode } from './errors.js';
import {
  bodyContentCoding,
  RequestRefused,
  ROUTE_METHODS,
  UnsupportedContentCoding,
} from './framework-errors.js';
import { isServerWideOptions, originForm, pathOf, sentTarget, targetProblem } from './request-target.js';

export interface ServerOptions {
  surface: Surface;
  logger: FastifyBaseLogger;
  /** Counts every answered request by surface, route pattern and status class (NO_METRICS when METRICS_PORT is unset). */
  metrics: Metrics;
  /** Headers every response of the surface carries (the REST host's `Link` to its AI catalog). */
  responseHeaders?: Record<string, string>;
  /** Headers added to the raw error responses written before a request exists (431, 400 on a broken request). */
  connectionErrorHeaders?: () => Record<string, string>;
  /** The body of those raw error responses in the surface's error shape; the REST error object by default. */
  connectionErrorBody?: (error: ApiError, requestId: string) => unknown;
  /** The surface's answer to its hottest request, written beside Fastify (see `answerBesideFastify`). */
  fastPath?: RawFastPath;
  /** The surface's answer to its hottest form POST, written beside Fastify (see `answerFormsBesideFastify`). */
  formFastPath?: FormFastPath;
}

/** A response a surface computed for one exact request shape, without Fastify. */
export interface FastResponse {
  /** The route pattern Fastify would have matched, for the access log and the metrics. */
  route: string;
  status: number;
  /**
   * The route's own headers in the order its handler sets them, names (lower case) and values alternating as
   * node:http's `writeHead` takes them; the request id, the static headers and the length are added around them.
   */
  headers: readonly string[];
  body: string;
  /** The answer's error code, when it is a refusal, for the access log (http/answered-error.ts). */
  error?: string | number;
}

/**
 * Answers `request` when it has exactly the shape the fast path serves and everything it needs is in memory, or
 * returns undefined to let Fastify handle it. Synchronous: it must not read the database or throw.
 */
export type RawFastPath = (request: IncomingMessage) => FastResponse | undefined;

/**
 * A form POST (`application/x-www-form-urlencoded`, RFC 6749 §3.2) to one path, answered beside Fastify once its
 * body has arrived. `answer` returns undefined to hand the request to Fastify, which then reads the same body (kept
 * for it, see `answerFormsBesideFastify`) as if nothing had happened: so it may only return undefined before it has
 * acted on the request. It must not reject.
 */
export interface FormFastPath {
  url: string;
  /** `log` is the server's; a line about this request carries `requestId` (a child is made only to log). */
  answer(
    request: IncomingMessage,
    form: URLSearchParams,
    requestId: string,
    log: FastifyBaseLogger,
  ): Promise<FastResponse | undefined>;
}

/** What a surface declares about the server it runs on (its static headers and error shape). */
export type SurfaceServerOptions = Omit<ServerOptions, 'surface' | 'logger' | 'metrics'>;

/**
 * The access log: one line per request for the operator, keyed by request id like every other line, with the surface
 * (from the server's logger), method, route, path, status and duration — never the query, headers or body, where
 * tokens, codes and passwords travel. Errors at error, the rest at info; with ACCESS_LOG=off successes go to debug.
 * It replaces Fastify's two lines, and costs no hook of its own; the request metrics ride on it for the same reason.
 */
class RequestLog extends LogController {
  constructor(
    private readonly successLevel: 'info' | 'debug',
    private readonly surface: Surface,
    private readonly metrics: Metrics,
  ) {
    super({ requestIdLogLabel: 'request_id' });
  }

  override incomingRequest(): void {}

  override requestCompleted(
    _error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    // The route pattern, never the raw path: label values stay bounded whatever paths clients send.
    const route = request.routeOptions.url;
    this.record(
      request.log,
      request.method,
      route,
      request.url,
      reply.statusCode,
      reply.elapsedTime,
      undefined,
      request.raw,
    );
  }

  /**
   * The metrics and the access line of one answered request, by Fastify (`log` is the request's logger) or by a
   * surface's fast path (`log` is the server's, and `requestId` is written in the line). `raw`, Fastify's request, tells
   * the target as the client sent it when it was routed as another (request-target.ts).
   */
  record(
    log: FastifyBaseLogger,
    method: string,
    route: string | undefined,
    url: string,
    status: number,
    elapsedMs: number,
    requestId?: string,
    raw?: IncomingMessage,
    error?: string | number,
  ): void {
    this.metrics.httpRequest(this.surface, method, route, status, elapsedMs / 1000);
    const level = status >= 500 ? 'error' : status >= 400 ? 'info' : this.successLevel;
    if (!(log as unknown as Logger).isLevelEnabled(level)) return;
    // The path only: the query is where tokens and codes can travel (docs/deployment.md).
    const path = pathOf(url);
    const fields: Record<string, unknown> = {
      method,
      route: route ?? null,
      path,
      status,
      ms: Math.round(elapsedMs),
    };
    // An absolute-form URI routed as its path, an undecodable path with its `%` taken literally: the line also shows
    // the target as sent, so that it matches what a proxy's log shows.
    const sent = raw && sentTarget(raw);
    if (sent !== undefined) fields.target = pathOf(sent);
    // The refusal's code (http/answered-error.ts): a fast path's is in its answer, Fastify's noted by its writer (a
    // refusal is a 4xx or 5xx, or a redirect carrying an authorization error back to the client).
    const code = error ?? (raw && status >= 300 ? answeredError(raw) : undefined);
    if (code !== undefined) fields.error = code;
    // A fast path's line carries its request id in the line itself: no child logger made per request for it.
    log[level](
      requestId === undefined ? fields : { [this.requestIdLogLabel]: requestId, ...fields },
      'request',
    );
  }
}

/**
 * The client as every limit per client counts it: its address — the peer's, or behind the proxies `TRUST_PROXY` names
 * the one the last of them appended to `X-Forwarded-For` (createServer's `trustProxy`) — or an IPv6 address's /64
 * (base/address-set.ts, `networkOf`).
 */
export function clientNetwork(request: FastifyRequest): string {
  // eslint-disable-next-line no-restricted-syntax -- the one reading of the address every limit counts by
  return networkOf(request.ip);
}

/**
 * The Fastify instance every surface is built on: request ids (`x-request-id` on every response, never taken from
 * the caller), the size limits, and JSON error responses for requests Node rejects before Fastify sees them.
 */
export function createServer(config: Config, o: ServerOptions): FastifyInstance {
  // Once per process, before any server answers: node:http's hot paths stay on V8's fast way of making nextTick's
  // entries (base/tick-shape.ts), and V8 runs with the service's heap settings (base/v8-flags.ts).
  keepTickObjectShape();
  applyV8Flags();
  const log = o.logger.child({ surface: o.surface });
  const requestLog = new RequestLog(config.accessLog ? 'info' : 'debug', o.surface, o.metrics);
  const proxies = addressSet(config.trustedProxies);
  const app = Fastify({
    loggerInstance: log,
    genReqId: () => newId('req'),
    requestIdHeader: false,
    logController: requestLog,
    childLoggerFactory: deferredChildLogger,
    bodyLimit: config.bodyLimitBytes,
    // Slow requests are cut (RFC 9110 §15.5.9): the whole request, headers and body, within requestTimeout, checked
    // every second (Node's default check runs every 30 s). Node reads it when the server is created, so it goes in
    // the server's own options as well as Fastify's.
    http: {
      maxHeaderSize: config.maxHeaderBytes,
      connectionsCheckingInterval: 1000,
      requestTimeout: config.requestTimeoutSeconds * 1000,
    },
    requestTimeout: config.requestTimeoutSeconds * 1000,
    keepAliveTimeout: config.keepAliveTimeoutSeconds * 1000,
    // `request.ip`, which the rate limits key on: the peer, or behind the operator's proxies the entry of
    // X-Forwarded-For the last of them appended — proxy-addr walks the header from its end while each address
    // it meets, the peer's first, is one of theirs (config.ts, TRUST_PROXY).
    trustProxy: config.trustedProxies.length > 0 ? (address: string) => proxies.has(address) : false,
    // A stop drains (endConnectionsOnClose): a request that reaches a route once closing has begun is served, with
    // `Connection: close`, not answered with Fastify's own 503, which has neither this service's error shape nor a
    // Retry-After. Connections idle at that moment are closed at once.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // No path parameter is refused for its length before its route reads it (Fastify's router answered a long one with
    // its own JSON, FST_ERR_MAX_PARAM_LENGTH, in no surface's shape): the header limit bounds the whole target, and
    // every route checks its ids (an unknown one is that route's 404).
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: config.maxHeaderBytes },
    // An absolute-form target (`GET http://host/me`) is routed, logged and served as its origin-form (RFC 9112 §3.2.2).
    rewriteUrl: originForm,
    clientErrorHandler(err, socket) {
      writeConnectionError(log, err, socket, o);
    },
  });
  if (config.maxConnectionsPerIp > 0) capConnectionsPerPeer(app, config.maxConnectionsPerIp, proxies, log);
  endConnectionsOnClose(app);
  refuseLargeBodiesBeforeContinue(app, config.bodyLimitBytes);
  serveUnknownExpectations(app);
  refuseTunnels(app, log, o);
  const serverWideAllow = methodsOfRoutes(app);
  // One callback-style hook (an async hook costs a promise per request): the request id and the surface's static headers.
  const staticHeaders = Object.entries(o.responseHeaders ?? {});
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    for (const [name, value] of staticHeaders) reply.header(name, value);
    const badTarget = targetProblem(request.raw, request.url);
    if (badTarget !== undefined) return done(new RequestRefused(badTarget));
    if (isServerWideOptions(request.url))
      return void reply.code(200).header('allow', serverWideAllow()).header('content-length', '0').send();
    const coding = bodyContentCoding(request.headers);
    done(coding === undefined ? undefined : new UnsupportedContentCoding(coding));
  });
  if (o.fastPath || o.formFastPath) {
    const fastPath = o.fastPath ?? (() => undefined);
    const forms = o.formFastPath && answerFormsBesideFastify(app, log, o.formFastPath, config.bodyLimitBytes);
    answerBesideFastify(app, log, requestLog, fastPath, staticHeaders, forms);
  }
  return app;
}

/**
 * The methods some route of the server takes, as `OPTIONS *` names them in `Allow` (RFC 9110 §9.3.7: an answer to
 * OPTIONS SHOULD name the server's optional features, `Allow` among them; for `*`, the server as a whole), from the
 * same list and in the same order as a 405's `Allow`. Gathered as the routes are added (the hook is installed before
 * any surface's plugin), read once the server answers.
 */
function methodsOfRoutes(app: FastifyInstance): () => string {
  const methods = new Set<string>();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) methods.add(method);
  });
  let allow: string | undefined;
  return () => (allow ??= ROUTE_METHODS.filter((method) => methods.has(method)).join(', '));
}

/** Answers a form POST that the form fast path takes: `write` sends its answer, `handOver` gives it to Fastify. */
type FormAnswerer = (
  request: IncomingMessage,
  write: (answer: FastResponse, requestId: string) => void,
  handOver: () => void,
) => boolean;

const FORM_TYPE = 'application/x-www-form-urlencoded';

/**
 * The form fast path's side of the server: which requests it takes (exactly its path, a POST whose content type is
 * exactly the form type, a `Content-Length` within the body limit, no `Transfer-Encoding`; anything else stays with
 * Fastify untouched), the body read once, and the hand-over: a request the fast path declines reaches Fastify with
 * its body served again from memory by a `preParsing` hook (Fastify's documented way to replace the payload stream),
 * so Fastify's parser, limits and errors apply to it unchanged.
 */
function answerFormsBesideFastify(
  app: FastifyInstance,
  log: FastifyBaseLogger,
  fastPath: FormFastPath,
  bodyLimit: number,
): FormAnswerer {
  const kept = new WeakMap<IncomingMessage, Buffer>();
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const body = kept.get(request.raw);
    if (!body) return done(null, payload);
    kept.delete(request.raw);
    const replay = Readable.from([body], { objectMode: false }) as Readable & {
      receivedEncodedLength?: number;
    };
    replay.receivedEncodedLength = body.length;
    done(null, replay);
  });
  return (request, write, handOver) => {
    if (request.method !== 'POST' || request.url !== fastPath.url) return false;
    const { headers } = request;
    const length = Number(headers['content-length']);
    if (headers['content-type'] !== FORM_TYPE || headers['transfer-encoding'] !== undefined) return false;
    // A compressed body goes to Fastify, which refuses it (415) before reading it: the same rule, not a second one.
    if (bodyContentCoding(headers) !== undefined) return false;
    if (!Number.isInteger(length) || length > bodyLimit) return false;
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      const id = newId('req');
      fastPath.answer(request, new URLSearchParams(body.toString()), id, log).then(
        (answer) => {
          if (answer) return write(answer, id);
          kept.set(request, body);
          handOver();
        },
        (err: unknown) => {
          log.error({ err, request_id: id }, 'form fast path failed');
          request.socket.destroy();
        },
      );
    });
    return true;
  };
}

/**
 * Puts `fastPath` in front of Fastify's request handler on the same node:http server. Why: Fastify's request, reply
 * and routing cost more than the work of the hottest route itself (an empty `GET /health` costs 1.5× a bare
 * node:http answer, `bench/rest.mjs`). What it answers carries what Fastify's answer would — the request id (same
 * scheme), the surface's static headers, the route's headers, the same body and `content-length` — and is counted and
 * logged by the same `RequestLog`; everything else, and everything while the server closes (Fastify answers those
 * 503), goes to Fastify.
 */
function answerBesideFastify(
  app: FastifyInstance,
  log: FastifyBaseLogger,
  requestLog: RequestLog,
  fastPath: RawFastPath,
  staticHeaders: [string, string][],
  forms?: FormAnswerer,
): void {
  const [fastify, ...others] = app.server.listeners('request') as ((
    request: IncomingMessage,
    response: ServerResponse,
  ) => void)[];
  if (!fastify || others.length) throw new Error('fast path: expected Fastify as the only request listener');
  const staticFlat = staticHeaders.flat();
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.server.removeListener('request', fastify);
  app.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const started = performance.now();
    const write = (answer: FastResponse, id: string) => {
      // A flat list, not an object: node:http writes it in this order without walking an object's keys (megamorphic
      // property loads and stores were ~3 % of a fast-path GET /me, perf).
      const headers = ['x-request-id', id, ...staticFlat, ...answer.headers];
      headers.push('content-length', String(Buffer.byteLength(answer.body)));
      response.writeHead(answer.status, headers);
      response.end(answer.body);
      const elapsedMs = performance.now() - started;
      requestLog.record(
        log,
        request.method!,
        answer.route,
        request.url!,
        answer.status,
        elapsedMs,
        id,
        undefined,
        answer.error,
      );
    };
    if (closing) return fastify(request, response);
    // A form's answer is written when its write commits, with the other writes of that commit: already together.
    if (forms?.(request, write, () => fastify(request, response))) return;
    const answer = tryFastPath(fastPath, request, log);
    if (!answer) return fastify(request, response);
    // With the turn's other answers (base/turn-end.ts). A throw here would be a bug; it closes this connection only.
    const id = newId('req');
    endOfTurn()
      .then(() => write(answer, id))
      .catch((err: unknown) => {
        log.error({ err, request_id: id }, 'fast path answer failed; the connection is closed');
        request.socket.destroy();
      });
  });
}

/** A fast path that throws (a bug: it must not) is logged and leaves the request to Fastify, never the process. */
function tryFastPath(
  fastPath: RawFastPath,
  request: IncomingMessage,
  log: FastifyBaseLogger,
): FastResponse | undefined {
  try {
    return fastPath(request);
  } catch (err) {
    log.error({ err }, 'fast path failed; the request goes to Fastify');
    return undefined;
  }
}

const REFUSAL_WARNING_INTERVAL_MS = 10_000;

/**
 * Closes a new connection at once when its peer already holds `max` on this surface: one address (an IPv6 peer's /64,
 * any of whose addresses it can take) cannot hold every file descriptor of the process (the slow-body attack kept
 * hundreds of connections open). The operator's proxies are not capped: every client behind them shares their
 * addresses (cap per client at the proxy). Refusals are logged at most once every 10 s, with their count.
 */
function capConnectionsPerPeer(
  app: FastifyInstance,
  max: number,
  proxies: AddressSet,
  log: FastifyBaseLogger,
): void {
  const open = new Map<string, number>();
  // A client that reconnects in a loop is refused thousands of times a second: one warning per interval says so,
  // with how many were refused since the last one (each of them a line before, the log flooded as it went).
  const warnNow = atMostEvery(REFUSAL_WARNING_INTERVAL_MS, systemClock);
  let refused = 0;
  app.server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    if (proxies.has(address)) return;
    const peer = networkOf(address);
    const n = (open.get(peer) ?? 0) + 1;
    if (n > max) {
      socket.destroy();
      refused++;
      if (warnNow()) {
        log.warn(
          { peer, address, max, refused },
          'connections refused: too many open connections from one address',
        );
        refused = 0;
      }
      return;
    }
    open.set(peer, n);
    socket.once('close', () => {
      const left = (open.get(peer) ?? 1) - 1;
      if (left > 0) open.set(peer, left);
      else open.delete(peer);
    });
  });
}

/**
 * `Expect: 100-continue` (RFC 9110 §10.1.1; curl sends it before a large body): a request announcing a body over the
 * limit gets its 413 at once, not `100 Continue` first — node:http's default answered every one with 100, so the
 * client sent the whole body (up to the client's own limit) only to be refused after it.
 */
function refuseLargeBodiesBeforeContinue(app: FastifyInstance, bodyLimitBytes: number): void {
  app.server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    if (!(Number(request.headers['content-length']) > bodyLimitBytes)) response.writeContinue();
    app.server.emit('request', request, response);
  });
}

/**
 * An `Expect` other than 100-continue, an empty one included: node:http answered it 417 by itself, whatever the
 * request — no request id, no body, no access-log line, in no surface's shape. RFC 9110 §10.1.1 lets a server answer
 * an expectation it does not know with 417 or serve the request; no other expectation is defined, and none would
 * change what a route answers, so the request is served as if the field were absent.
 */
function serveUnknownExpectations(app: FastifyInstance): void {
  app.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    app.server.emit('request', request, response);
  });
}

/** What node:http keeps on a socket: the response being written on it (undocumented, stable since Node 0.x). */
interface SocketWithResponse extends Socket {
  _httpMessage?: ServerResponse | null;
}

/**
 * At a stop, the answer of every request still in flight says `Connection: close`, so that its connection ends once
 * it is written. Without it such an answer said `keep-alive`: the client (a load balancer always keeps connections)
 * held the connection open, the server's close waited for it until SHUTDOWN_TIMEOUT_SECONDS, and the process exited
 * 1 with "shutdown timed out" — on every stop under load — while new requests on that connection got Fastify's 503.
 * Costs a set entry per connection, nothing per request.
 */
function endConnectionsOnClose(app: FastifyInstance): void {
  const open = new Set<SocketWithResponse>();
  app.server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  app.addHook('preClose', (done) => {
    for (const socket of open) {
      const response = socket._httpMessage;
      if (response && !response.headersSent) response.setHeader('connection', 'close');
    }
    done();
  });
}

type ParserRefusal = [status: number, code: ErrorCode, reason: string, message: string];

/** The code `refuseTunnels` refuses a CONNECT with (node's own codes start with HPE_ or ERR_). */
const TUNNEL_REFUSED = 'SVC_CONNECT_REFUSED';
/** How each refusal of Node's HTTP parser is answered, by its error code; anything else is a 400. */
const PARSER_REFUSALS: Record<string, ParserRefusal> = {
  HPE_HEADER_OVERFLOW: [
    431,
    'headers_too_large',
    'Request Header Fields Too Large',
    'The request headers are too large',
  ],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'request_timeout', 'Request Timeout', 'The request was not sent in time'],
  [TUNNEL_REFUSED]: [
    400,
    'invalid_request',
    'Bad Request',
    'CONNECT is not served: this server opens no tunnels (RFC 9110 §9.3.6)',
  ],
};
const BAD_SYNTAX: ParserRefusal = [400, 'invalid_request', 'Bad Request', 'The request could not be parsed'];

/**
 * CONNECT (RFC 9110 §9.3.6) asks for a tunnel, which no surface opens. Without a listener for it, node:http closed the
 * socket without an answer; it is refused as the parser's refusals are, in the surface's shape, then closed.
 */
function refuseTunnels(app: FastifyInstance, log: FastifyBaseLogger, o: ServerOptions): void {
  app.server.on('connect', (_request: IncomingMessage, socket: Socket) => {
    writeConnectionError(log, Object.assign(new Error('CONNECT'), { code: TUNNEL_REFUSED }), socket, o);
  });
}

/** Every status a request refused by the parser can get (the metrics export each from the start). */
export const PARSER_REFUSAL_STATUSES = [
  ...new Set([...Object.values(PARSER_REFUSALS), BAD_SYNTAX].map(([status]) => status)),
];

/**
 * Node's parser refused the request (headers too large, bad syntax), or it was a CONNECT: answer in the error shape,
 * then close.
 */
function writeConnectionError(
  log: FastifyBaseLogger,
  err: NodeJS.ErrnoException,
  socket: Socket,
  o: ServerOptions,
): void {
  if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const requestId = newId('req');
  const [status, code, reason, message] = PARSER_REFUSALS[err.code ?? ''] ?? BAD_SYNTAX;
  log.info({ request_id: requestId, err_code: err.code }, 'connection error');
  o.metrics.unparsedRequest(o.surface, status);
  const error = new ApiError(code, message);
  const body = JSON.stringify(
    o.connectionErrorBody ? o.connectionErrorBody(error, requestId) : error.body(requestId),
  );
  const headers = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    'x-request-id': requestId,
    connection: 'close',
    ...o.responseHeaders,
    ...o.connectionErrorHeaders?.(),
  };
  const head = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n');
  socket.end(`HTTP/1.1 ${status} ${reason}\r\n${head}\r\n\r\n${body}`);
}
