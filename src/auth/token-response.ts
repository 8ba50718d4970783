import type { FastifyReply } from 'fastify';
import type { AppContext } from '../context.js';
import type { ConnectionRow } from '../domain/connections.js';
import { NO_STORE } from '../http/oauth-errors.js';
import type { FastResponse } from '../http/server.js';
import { ACCESS_TOKEN_TTL_SECONDS, mintConnectionAccessToken } from './access-token.js';

/** A successful token response (RFC 6749 §5.1). */
export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
}

/** The answer of the code and refresh grants: a new access token for `scope`, and a refresh token when there is one. */
export async function connectionTokens(
  ctx: AppContext,
  connection: Pick<ConnectionRow, 'id' | 'user_id' | 'client_id' | 'resource' | 'agency_id' | 'member_id'>,
  scope: string,
  refreshToken: string | undefined,
): Promise<TokenResponse> {
  return {
    access_token: await mintConnectionAccessToken(ctx, connection, scope),
    token_type: 'Bearer',
    expires_in: ACCESS_TOKEN_TTL_SECONDS,
    scope,
    ...(refreshToken === undefined ? {} : { refresh_token: refreshToken }),
  };
}

/** Browser-based clients call the OAuth JSON endpoints cross-origin, without cookies (auth/plugin.ts). */
export const ANY_ORIGIN = ['access-control-allow-origin', '*'] as const;
const JSON_TYPE = 'application/json; charset=utf-8';

export function sendTokens(reply: FastifyReply, body: TokenResponse): FastifyReply {
  return reply.code(200).headers(NO_STORE).type(JSON_TYPE).send(body);
}

/**
 * The same answer for a fast path (http/server.ts), headers in the order Fastify writes them for `sendTokens` and
 * the OAuth scope's CORS header (auth/plugin.ts) after them.
 */
export function tokenAnswer(
  route: string,
  status: number,
  headers: Readonly<Record<string, string>>,
  body: unknown,
): FastResponse {
  const list: string[] = [];
  for (const [name, value] of Object.entries(headers)) list.push(name, value);
  list.push('content-type', JSON_TYPE, ...ANY_ORIGIN);
  return { route, status, headers: list, body: JSON.stringify(body) };
}
