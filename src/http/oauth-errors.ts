import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { isDependencyOutage, OUTAGE_RETRY_AFTER_SECONDS } from '../http/dependency-outage.js';

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

export function sendOAuthError(reply: FastifyReply, e: OAuthError): FastifyReply {
  return reply
    .code(e.status)
    .headers({ 'cache-control': 'no-store', pragma: 'no-cache', ...e.headers })
    .type('application/json; charset=utf-8')
    .send({ error: e.code, error_description: e.description });
}

/** Error handler for an encapsulated scope of JSON OAuth endpoints (token, register, revoke). */
export const oauthJsonErrors = fp(
  async (app: FastifyInstance) => {
    app.setErrorHandler((error, request, reply) => {
      if (error instanceof OAuthError) return sendOAuthError(reply, error);
      const e = error as FastifyError;
      if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
        return sendOAuthError(reply, new OAuthError('invalid_request', 'The request body is too large', 413));
      }
      if (e.code?.startsWith('FST_ERR_CTP_') || (e.statusCode && e.statusCode < 500)) {
        return sendOAuthError(reply, new OAuthError('invalid_request', 'The request body could not be read'));
      }
      if (isDependencyOutage(error)) {
        // RFC 6749 §4.1.2.1 names temporarily_unavailable; used at the JSON endpoints too, with Retry-After.
        return sendOAuthError(
          reply,
          new OAuthError(
            'temporarily_unavailable',
            'A service this request needs is unavailable; retry',
            503,
            {
              'retry-after': String(OUTAGE_RETRY_AFTER_SECONDS),
            },
          ),
        );
      }
      request.log.error({ err: error }, 'unhandled error');
      return sendOAuthError(
        reply,
        new OAuthError('server_error', `An internal error occurred (request ${request.id})`, 500),
      );
    });
  },
  { name: 'oauth-json-errors' },
);
