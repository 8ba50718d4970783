import type { IncomingMessage } from 'node:http';
import type { AppContext } from '../context.js';
import { classifyError } from '../http/framework-errors.js';
import { OAuthError, oauthErrorBody, oauthErrorHeaders, toOAuthError } from '../http/oauth-errors.js';
import type { FastResponse, FormFastPath } from '../http/server.js';
import { Params } from '../web/form.js';
import { refreshTokenGrant } from './refresh-grant.js';
import { NO_STORE, tokenAnswer } from './token-response.js';

const ROUTE = '/oauth/token';

/**
 * The refresh_token grant answered beside Fastify (http/server.ts): the request agents make most, once an hour per
 * connection and in bursts when hosts refresh in parallel. Fastify's request, reply, routing, body parser and hooks
 * cost about as much per rotation as the rotation's database work (bench/refresh.mjs, docs/performance.md).
 *
 * It takes only a form whose one `grant_type` is `refresh_token`, with no client credentials (no Authorization header,
 * no `client_secret` or `client_assertion`: those get the route's `invalid_client` answer); everything else goes to the
 * route in token.ts unread. What it takes it answers whole with the route's own grant (refresh-grant.ts), so the
 * rules exist once; only the writing of the answer is its own, the route's bytes and headers in the route's order
 * (`test/auth/token-fast-path.test.ts` holds the two to the same answers).
 */
export function tokenFastPath(ctx: AppContext): FormFastPath {
  return {
    url: ROUTE,
    async answer(request, form, requestId) {
      if (!isPlainRefresh(request, form)) return undefined;
      try {
        return tokenAnswer(ROUTE, 200, NO_STORE, await refreshTokenGrant(ctx, new Params(form)));
      } catch (error) {
        return errorAnswer(ctx, error, requestId);
      }
    },
  };
}

function isPlainRefresh(request: IncomingMessage, form: URLSearchParams): boolean {
  const grantTypes = form.getAll('grant_type');
  return (
    grantTypes.length === 1 &&
    grantTypes[0] === 'refresh_token' &&
    request.headers.authorization === undefined &&
    !form.has('client_secret') &&
    !form.has('client_assertion')
  );
}

/** As the OAuth scope's error handler answers (http/oauth-errors.ts, http/framework-errors.ts `renderErrors`). */
function errorAnswer(ctx: AppContext, error: unknown, requestId: string): FastResponse {
  if (error instanceof OAuthError)
    return tokenAnswer(ROUTE, error.status, oauthErrorHeaders(error), oauthErrorBody(error));
  const classified = classifyError(error);
  if (classified.kind === 'internal') ctx.log.error({ err: error, request_id: requestId }, 'unhandled error');
  const e = toOAuthError(classified, requestId);
  const retryAfter: Record<string, string> =
    classified.kind === 'unavailable' && classified.retryAfterSeconds !== undefined
      ? { 'retry-after': String(classified.retryAfterSeconds) }
      : {};
  return tokenAnswer(ROUTE, e.status, { ...retryAfter, ...oauthErrorHeaders(e) }, oauthErrorBody(e));
}
