import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { isUnstorableText } from '../store/pg-errors.js';
import { isDependencyOutage, OUTAGE_RETRY_AFTER_SECONDS } from './dependency-outage.js';
import { pathOf } from './request-target.js';

const UNSTORABLE_TEXT_MESSAGE = 'The request holds a character that cannot be stored (U+0000)';

/**
 * What went wrong with a request, whatever surface it reached: Fastify's own refusals, a dependency outage, a request
 * for a route that does not exist. Classified here once; each surface only renders the class in its own shape (the
 * REST error object, RFC 6749 JSON, an HTML page, JSON-RPC).
 */
export type ErrorClass =
  | { kind: 'body_too_large'; status: 413 }
  | { kind: 'unsupported_media_type'; status: 415 }
  | { kind: 'invalid_json'; status: 400; empty: boolean }
  | { kind: 'invalid_content_length'; status: 400 }
  /** A body sent compressed (`Content-Encoding`): none is decoded here (RFC 9110 §8.4.1). */
  | { kind: 'unsupported_content_coding'; status: 415; coding: string }
  /** Any other refusal of the request by the framework; `message` is safe to show (schema validation). */
  | { kind: 'invalid_request'; status: number; message: string | undefined }
  /** A dependency is down (`retryAfterSeconds` set), or the server is shutting down. */
  | { kind: 'unavailable'; status: 503; retryAfterSeconds: number | undefined }
  /** A bug: logged with its stack under the request id, answered without detail. */
  | { kind: 'internal'; status: 500 };

const BY_CODE: Record<string, ErrorClass> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { kind: 'body_too_large', status: 413 },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { kind: 'unsupported_media_type', status: 415 },
  FST_ERR_CTP_INVALID_JSON_BODY: { kind: 'invalid_json', status: 400, empty: false },
  FST_ERR_CTP_EMPTY_JSON_BODY: { kind: 'invalid_json', status: 400, empty: true },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { kind: 'invalid_content_length', status: 400 },
};

/**
 * A body in a content coding (`Content-Encoding: gzip`…): no surface decodes one, so it is refused before it is read,
 * where it was read as broken JSON or a broken form (RFC 9110 §15.5.16: 415, with `Accept-Encoding` naming what is).
 */
export class UnsupportedContentCoding extends Error {
  override name = 'UnsupportedContentCoding';
  readonly statusCode = 415;
  constructor(readonly coding: string) {
    super(`Content-Encoding ${coding} is not accepted`);
  }
}

/** The content coding of a request's body when it has one other than identity, else undefined. */
export function bodyContentCoding(headers: {
  'content-encoding'?: string | undefined;
  'content-length'?: string | undefined;
  'transfer-encoding'?: string | undefined;
}): string | undefined {
  const coding = headers['content-encoding']?.trim().toLowerCase();
  if (!coding || coding === 'identity') return undefined;
  const hasBody = headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
  return hasBody ? coding : undefined;
}

/** A request the HTTP layer refuses before any surface reads it: a 400 whose message is safe to show. */
export class RequestRefused extends Error {
  override name = 'RequestRefused';
  readonly statusCode = 400;
}

export function classifyError(error: unknown): ErrorClass {
  if (error instanceof UnsupportedContentCoding)
    return { kind: 'unsupported_content_coding', status: 415, coding: error.coding };
  if (error instanceof RequestRefused)
    return { kind: 'invalid_request', status: 400, message: error.message };
  const e = (typeof error === 'object' && error !== null ? error : {}) as Partial<FastifyError>;
  const known = typeof e.code === 'string' ? BY_CODE[e.code] : undefined;
  if (known) return known;
  if (isDependencyOutage(error)) {
    return { kind: 'unavailable', status: 503, retryAfterSeconds: OUTAGE_RETRY_AFTER_SECONDS };
  }
  // Whatever field carried it, the value was the request's, not a bug (PostgreSQL stores no U+0000 in text).
  if (isUnstorableText(error))
    return { kind: 'invalid_request', status: 400, message: UNSTORABLE_TEXT_MESSAGE };
  const status = e.statusCode ?? 500;
  if (status === 503) return { kind: 'unavailable', status: 503, retryAfterSeconds: undefined };
  if (status >= 400 && status < 500) {
    return { kind: 'invalid_request', status, message: e.validation ? e.message : undefined };
  }
  return { kind: 'internal', status: 500 };
}

/** No route answers this request: no route has the path (404), or not with this method (405, RFC 9110 §15.5.6). */
export type RouteMiss =
  | { kind: 'route_not_found'; path: string }
  | { kind: 'method_not_allowed'; path: string; allowed: HTTPMethods[] };

/** What a route miss says in the REST and OAuth shapes: "No route for GET /x", "GET is not allowed on /x; use POST". */
export function routeMissMessage(miss: RouteMiss, method: string): string {
  return miss.kind === 'route_not_found'
    ? `No route for ${method} ${miss.path}`
    : `${method} is not allowed on ${miss.path}; use ${miss.allowed.join(', ')}`;
}

/** The methods the routes here take, in the order `Allow` names them (the 405s, and `OPTIONS *` in server.ts). */
export const ROUTE_METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

export function routeMiss(app: FastifyInstance, request: FastifyRequest): RouteMiss {
  const path = pathOf(request.url);
  const allowed = ROUTE_METHODS.filter((method) => app.findRoute({ method, url: path }) !== null);
  return allowed.length === 0
    ? { kind: 'route_not_found', path }
    : { kind: 'method_not_allowed', path, allowed };
}

/** How a surface answers errors: its own error type first, then the classes above, and route misses. */
export interface ErrorRendering {
  /** The surface's own error (ApiError, OAuthError, PageError...): rendered as it is, or undefined if not one. */
  own?(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined;
  classified(error: ErrorClass, request: FastifyRequest, reply: FastifyReply): FastifyReply;
  /** Unset: the parent scope's not-found handler answers. */
  routeMiss?(miss: RouteMiss, request: FastifyRequest, reply: FastifyReply): FastifyReply;
}

/**
 * An error that is not a surface's own, as every surface answers it: classified, logged (with its stack, on `log`:
 * the request's logger, or one that adds the request id) when it is a bug, and with the `Retry-After` header an
 * outage is answered with. The one place unexpected errors are logged, for Fastify's handlers (`renderErrors`) and
 * for the fast paths beside Fastify alike.
 */
export function classifyAndReport(
  error: unknown,
  log: { error(fields: object, message: string): void },
): { error: ErrorClass; headers: Record<string, string> } {
  const classified = classifyError(error);
  if (classified.kind === 'internal') log.error({ err: error }, 'unhandled error');
  const retryAfter = classified.kind === 'unavailable' ? classified.retryAfterSeconds : undefined;
  const headers: Record<string, string> =
    retryAfter === undefined ? {} : { 'retry-after': String(retryAfter) };
  // RFC 9110 §12.5.3: a 415 for a content coding names the codings accepted.
  if (classified.kind === 'unsupported_content_coding') headers['accept-encoding'] = 'identity';
  return { error: classified, headers };
}

/**
 * A refusal of the body Fastify makes before the not-found handler runs: it reads a request no route takes as it would
 * read one a route takes (the media type, the coding, the JSON; and a `QUERY` without `Content-Type`, which RFC 10008
 * §2 has a server fail, before it asks whether any route takes `QUERY`). For such a request the route miss is the
 * answer: what is wrong is the method or the path, and a body no route reads says nothing.
 */
function refusesBodyOfMiss(error: unknown, classified: ErrorClass): boolean {
  if ((error as Partial<FastifyError> | undefined)?.code === 'FST_ERR_ROUTE_MISSING_CONTENT_TYPE')
    return true;
  return (
    classified.kind === 'invalid_json' ||
    classified.kind === 'unsupported_media_type' ||
    classified.kind === 'unsupported_content_coding'
  );
}

/** Installs a scope's error and not-found handlers. */
export function renderErrors(app: FastifyInstance, rendering: ErrorRendering): void {
  const renderMiss = rendering.routeMiss;
  const answerMiss =
    renderMiss &&
    ((request: FastifyRequest, reply: FastifyReply) => {
      const miss = routeMiss(app, request);
      if (miss.kind === 'method_not_allowed') reply.header('allow', miss.allowed.join(', '));
      return renderMiss(miss, request, reply);
    });
  app.setErrorHandler((error, request, reply) => {
    const own = rendering.own?.(error, request, reply);
    if (own) return own;
    const { error: classified, headers } = classifyAndReport(error, request.log);
    if (answerMiss && request.is404 && refusesBodyOfMiss(error, classified))
      return answerMiss(request, reply);
    reply.headers(headers);
    return rendering.classified(classified, request, reply);
  });
  if (answerMiss) app.setNotFoundHandler(answerMiss);
}
