import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { noteAnsweredError } from './answered-error.js';
import { UNAVAILABLE_MESSAGE } from './errors.js';
import { type ErrorClass, renderErrors, type RouteMiss, routeMissMessage } from './framework-errors.js';

/**
 * Errors of the OAuth endpoints in the RFC 6749 §5.2 shape `{"error","error_description"}` — never the REST error
 * object. Codes come from RFC 6749 §4.1.2.1 and §5.2, RFC 7591 §3.2.2, RFC 7009 §2.2.1 and RFC 8707 §2.
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'invalid_target'
  | 'access_denied'
  | 'server_error'
  | 'temporarily_unavailable'
  | 'invalid_redirect_uri'
  | 'invalid_client_metadata'
  | 'unsupported_token_type'
  | 'rate_limited';

export class OAuthError extends Error {
  override name = 'OAuthError';
  constructor(
    readonly code: OAuthErrorCode,
    readonly description: string,
    readonly status = 400,
    readonly headers: Record<string, string> = {},
  ) {
    super(description);
  }
}

/** RFC 6749 §5.1 and §5.2: no caching of any answer of the token endpoint, tokens or errors. */
export const NO_STORE: Readonly<Record<string, string>> = { 'cache-control': 'no-store', pragma: 'no-cache' };

/** The headers of an error answer before its content type, and its body: one definition for every writer. */
export const oauthErrorHeaders = (e: OAuthError): Record<string, string> => ({ ...NO_STORE, ...e.headers });
export const oauthErrorBody = (e: OAuthError) => ({ error: e.code, error_description: e.description });

export function sendOAuthError(reply: FastifyReply, e: OAuthError): FastifyReply {
  noteAnsweredError(reply.request.raw, e.code);
  return reply
    .code(e.status)
    .headers(oauthErrorHeaders(e))
    .type('application/json; charset=utf-8')
    .send(oauthErrorBody(e));
}

/**
 * Error handler for an encapsulated scope of JSON OAuth endpoints (token, register, revoke), registered under its own
 * prefix so that a wrong method or path there is answered in the shape an OAuth client parses too: `error` a string,
 * not the REST error object (RFC 6749 §5.2 names no code for it; `invalid_request` is "otherwise malformed").
 */
export const oauthJsonErrors = fp(
  async (app: FastifyInstance) => {
    renderErrors(app, {
      own: (error, _request, reply) =>
        error instanceof OAuthError ? sendOAuthError(reply, error) : undefined,
      classified: (error, request, reply) => sendOAuthError(reply, toOAuthError(error, request.id)),
      routeMiss: (miss, request, reply) => sendOAuthError(reply, missToOAuthError(miss, request.method)),
    });
  },
  { name: 'oauth-json-errors' },
);

/** RFC 9110 §15.5.6: a 405's `Allow` header, set by renderErrors, lists the methods the endpoint takes. */
const missToOAuthError = (miss: RouteMiss, method: string): OAuthError =>
  new OAuthError(
    'invalid_request',
    routeMissMessage(miss, method),
    miss.kind === 'route_not_found' ? 404 : 405,
  );

/** Fastify's refusals, outages and bugs as RFC 6749 errors. */
export function toOAuthError(error: ErrorClass, requestId: string): OAuthError {
  switch (error.kind) {
    case 'body_too_large':
      return new OAuthError('invalid_request', 'The request body is too large', 413);
    case 'unsupported_media_type':
      return new OAuthError(
        'invalid_request',
        "The request body's Content-Type is not accepted here: the token, revocation and authorization endpoints " +
          'read application/x-www-form-urlencoded (RFC 6749 §3.2), registration application/json (RFC 7591 §3.1)',
      );
    case 'unsupported_content_coding':
      return new OAuthError(
        'invalid_request',
        `The request body must be sent uncompressed: Content-Encoding ${error.coding} is not accepted`,
        415,
      );
    case 'invalid_json':
      return new OAuthError('invalid_request', 'The request body is not valid JSON');
    case 'invalid_content_length':
      return new OAuthError('invalid_request', 'Content-Length does not match the body');
    case 'invalid_request':
      return new OAuthError('invalid_request', error.message ?? 'The request body could not be read');
    case 'unavailable':
      // RFC 6749 §4.1.2.1 names temporarily_unavailable; used at the JSON endpoints too, with Retry-After.
      return new OAuthError('temporarily_unavailable', UNAVAILABLE_MESSAGE, 503);
    case 'internal':
      return new OAuthError('server_error', `An internal error occurred (request ${requestId})`, 500);
  }
}
