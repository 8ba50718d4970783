import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { revokeConnection } from '../domain/connections.js';
import { Params } from './form.js';
import { OAuthError } from './oauth-errors.js';
import { hashSecret } from './secrets.js';

/**
 * Token revocation (RFC 7009) at POST /oauth/revoke. Revoking a refresh token ends its connection (the grant), so
 * the access tokens minted under it stop working too (RFC 7009 §2.1). Unknown tokens answer 200 (§2.2).
 */
export async function revokeRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.post('/oauth/revoke', async (request, reply) => {
    const p = Params.fromBody(request.body);
    if (request.headers.authorization !== undefined || p.has('client_secret')) {
      throw new OAuthError(
        'invalid_client',
        'This server has public clients only; send client_id without credentials',
        401,
      );
    }
    const token = p.require('token');
    const hint = p.get('token_type_hint');
    // RFC 7009 §2.2.1: we only revoke refresh tokens; access tokens expire within the hour or die with the grant.
    if (hint !== undefined && hint !== 'refresh_token' && hint !== 'access_token') {
      throw new OAuthError('unsupported_token_type', `token_type_hint ${hint} is not supported`);
    }
    const clientId = p.get('client_id');
    const row = await ctx.db
      .selectFrom('refresh_tokens as rt')
      .innerJoin('connections as c', 'c.id', 'rt.connection_id')
      .select(['c.id', 'c.client_id'])
      .where('rt.hash', '=', hashSecret(token))
      .executeTakeFirst();
    // RFC 7009 §2.1: a token of another client is not revoked (and the answer does not say so).
    if (row && (clientId === undefined || clientId === row.client_id)) {
      if (await revokeConnection(ctx.db, ctx.clock, row.id, 'revoked_by_client')) {
        ctx.connectionLiveness.forget(row.id);
        request.log.info({ connection_id: row.id }, 'connection revoked by the client');
      }
    }
    return reply.code(200).header('cache-control', 'no-store').send();
  });
}
