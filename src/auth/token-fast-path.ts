import type { AppContext } from '../context.js';
import type { FastifyBaseLogger } from 'fastify';
import { classifyAndReport } from '../http/framework-errors.js';
import {
  NO_STORE,
  OAuthError,
  oauthErrorBody,
  oauthErrorHeaders,
  toOAuthError,
} from '../http/oauth-errors.js';
import type { FastResponse, FormFastPath } from '../http/server.js';
import { Params } from '../web/form.js';
import { presentsClientCredentials } from './client-authentication.js';
import { refreshTokenGrant } from './refresh-grant.js';
import { tokenAnswer } from './token-response.js';

const ROUTE = '/oauth/token';

/**
 * The refresh_token grant answered beside Fastify (http/server.ts): the request agents make most, once an hour per
 * connection and in bursts when hosts refresh in parallel. Fastify's request, reply, routing, body parser and hooks
 * cost about as much per rotation as the rotation's database work (bench/refresh.mjs, docs/performance.md).
 *
 * It takes only a form whose one `grant_type` is `refresh_token`, with no client credentials (`presentsClientCredentials`,
 * the rule the route refuses them by with `invalid_client`); everything else goes to the route in token.ts with its
 * body (http/server.ts replays it). What it takes it answers whole with the route's own grant (refresh-grant.ts), so the
 * rules exist once; only the writing of the answer is its own, the route's bytes and headers in the route's order
 * (`test/auth/token-fast-path.test.ts` holds the two to the same answers).
 */
export function tokenFastPath(ctx: AppContext): FormFastPath {
  return {
    url: ROUTE,
    async answer(request, form, requestId, log) {
      const p = new Params(form);
      // Anything else, credentials included, is the route's to answer (the token exchange, `invalid_client`...).
      if (!isRefreshGrant(form) || presentsClientCredentials(request.headers.authorization, p))
        return undefined;
      try {
        return tokenAnswer(ROUTE, 200, NO_STORE, await refreshTokenGrant(ctx, p));
      } catch (error) {
        return errorAnswer(error, requestId, log);
      }
    },
  };
}

/** One `grant_type`, `refresh_token` (a repeated one is the route's `invalid_request`). */
function isRefreshGrant(form: URLSearchParams): boolean {
  const grantTypes = form.getAll('grant_type');
  return grantTypes.length === 1 && grantTypes[0] === 'refresh_token';
}

/** As the OAuth scope's error handler answers (http/oauth-errors.ts through http/framework-errors.ts). */
function errorAnswer(error: unknown, requestId: string, log: FastifyBaseLogger): FastResponse {
  if (error instanceof OAuthError)
    return {
      ...tokenAnswer(ROUTE, error.status, oauthErrorHeaders(error), oauthErrorBody(error)),
      error: error.code,
    };
  // A bug is logged with the request's id, as on the route; the line is written only then.
  const { error: classified, headers } = classifyAndReport(error, {
    error: (fields, message) => log.error({ request_id: requestId, ...fields }, message),
  });
  const e = toOAuthError(classified, requestId);
  const answer = tokenAnswer(ROUTE, e.status, { ...headers, ...oauthErrorHeaders(e) }, oauthErrorBody(e));
  return { ...answer, error: e.code };
}
