import type { FastifyReply } from 'fastify';
import type { FastResponse } from '../http/server.js';

/** A successful token response (RFC 6749 §5.1). */
export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
}

/** RFC 6749 §5.1: no-store on every response carrying tokens. */
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' } as const;
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
  headers: Record<string, string>,
  body: unknown,
): FastResponse {
  const list: string[] = [];
  for (const [name, value] of Object.entries(headers)) list.push(name, value);
  list.push('content-type', JSON_TYPE, 'access-control-allow-origin', '*');
  return { route, status, headers: list, body: JSON.stringify(body) };
}

export { NO_STORE };
