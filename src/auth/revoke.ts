import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { endConnection } from '../domain/connections.js';
import { findFamilyConnection, findRefreshGrant } from '../domain/refresh-tokens.js';
import { refuseClientCredentials, requireClientId } from './client-authentication.js';
import { Params } from '../web/form.js';
import { OAuthError } from '../http/oauth-errors.js';
import { hashSecret } from '../base/secrets.js';
import { familyOf } from './refresh-token.js';

/**
 * Token revocation (RFC 7009) at POST /oauth/revoke, for refresh and access tokens alike (§2.1: the client may send
 * either). Either ends the token's connection (the grant): the app's refresh-token families and every access token
 * minted under it stop working, at once on this instance and on the others within the liveness bound. A revocation is
 * the app saying "forget this authorization", and an access token alone cannot be revoked more narrowly without a
 * per-token deny list on every resource server. Unknown tokens, and tokens of another client, answer 200 (§2.2) and
 * revoke nothing.
 */
export async function revokeRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  // Under the OAuth scope's prefix, /oauth (auth/plugin.ts).
  app.post('/revoke', async (request, reply) => {
    const p = Params.fromBody(request.body);
    refuseClientCredentials(ctx, request, p);
    const token = p.require('token');
    const hint = p.get('token_type_hint');
    if (hint !== undefined && hint !== 'refresh_token' && hint !== 'access_token') {
      throw new OAuthError('unsupported_token_type', `token_type_hint ${hint} is not supported`);
    }
    // RFC 7009 §2.1: the server verifies the token was issued to the client making the request; a public client
    // identifies itself by client_id, so without it nothing can be checked and nothing is revoked.
    const clientId = requireClientId(p);
    const owner = await tokenOwner(ctx, token, hint);
    if (owner && owner.clientId === clientId) {
      if (await endConnection(ctx, owner.connectionId, 'revoked_by_client')) {
        request.log.info({ connection_id: owner.connectionId }, 'connection revoked by the client');
      }
    }
    return reply.code(200).header('cache-control', 'no-store').send();
  });
}

/** The connection and client of a refresh or access token (the hint only orders the look-ups, RFC 7009 §2.1). */
async function tokenOwner(
  ctx: AppContext,
  token: string,
  hint: string | undefined,
): Promise<{ connectionId: string; clientId: string } | undefined> {
  const asRefresh = async () => {
    const row = await findRefreshGrant(ctx.store.sql, hashSecret(token));
    if (row) return { connectionId: row.id, clientId: row.client_id };
    // A rotated token whose row was pruned still names its family, and so its connection.
    const family = familyOf(token);
    const owner = family === undefined ? undefined : await findFamilyConnection(ctx.store.sql, family);
    return owner && { connectionId: owner.id, clientId: owner.client_id };
  };
  const asAccess = async () => {
    const principal = await ctx.verifier.inspectAccessToken(token);
    return principal?.connectionId === undefined
      ? undefined
      : { connectionId: principal.connectionId, clientId: principal.clientId };
  };
  return hint === 'access_token'
    ? ((await asAccess()) ?? (await asRefresh()))
    : ((await asRefresh()) ?? (await asAccess()));
}
