import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import type { ConnectionRow } from '../domain/connections.js';
import { signJwt, TOKEN_TYPES } from '../tokens/jwt.js';

/** docs/contract.md#tokens: access tokens of the agency MCP flow live one hour. */
export const ACCESS_TOKEN_TTL_SECONDS = 3600;

/**
 * An RFC 9068 access token for a connection: `aud` = the resource, `sub` = the user, and the claims of docs/contract.md#tokens
 * (client_id, scope, jti, agency_id, member_id, cid). Resource servers check `cid` is live on every call.
 */
export function mintConnectionAccessToken(
  ctx: AppContext,
  c: Pick<ConnectionRow, 'id' | 'user_id' | 'client_id' | 'resource' | 'agency_id' | 'member_id'>,
  scope: string,
): Promise<string> {
  return signJwt(ctx.keys, ctx.clock, {
    typ: TOKEN_TYPES.access,
    issuer: urls.issuer(ctx.config),
    subject: c.user_id,
    audience: c.resource,
    lifetimeSeconds: ACCESS_TOKEN_TTL_SECONDS,
    claims: {
      client_id: c.client_id,
      scope,
      ...(c.agency_id ? { agency_id: c.agency_id } : {}),
      ...(c.member_id ? { member_id: c.member_id } : {}),
      cid: c.id,
    },
  });
}
