import type { FastifyInstance, FastifyReply } from 'fastify';
import type { AppContext } from '../context.js';
import { activateGrant, endConnection, isUniqueViolation } from '../domain/connections.js';
import { parseList } from '../domain/permissions.js';
import { storeRefreshToken } from '../domain/refresh-tokens.js';
import { newRefreshToken } from './refresh-token.js';
import type { ClientRegistry } from './clients/registry.js';
import { refuseClientCredentials, requireClientId } from './client-authentication.js';
import { Params } from '../web/form.js';
import { OAuthError } from '../http/oauth-errors.js';
import { isVerifier, verifyS256 } from './pkce.js';
import { SCOPES } from '../domain/scopes.js';
import { hashSecret, randomSecret } from '../base/secrets.js';
import { TOKEN_EXCHANGE_GRANT, tokenExchangeGrant } from './token-exchange.js';
import { refreshTokenGrant } from './refresh-grant.js';
import { checkTokenResource } from './resource-indicator.js';
import { connectionTokens, sendTokens } from './token-response.js';

/**
 * The token endpoint (RFC 6749 §3.2) at POST /oauth/token: the `authorization_code` grant (§4.1.3, RFC 7636 §4.5)
 * and the `refresh_token` grant (§6) with rotation on every use (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2). Public
 * clients only: the client is identified by `client_id`, never authenticated.
 */
export async function tokenRoutes(
  app: FastifyInstance,
  ctx: AppContext,
  registry: ClientRegistry,
): Promise<void> {
  // Under the OAuth scope's prefix, /oauth (auth/plugin.ts).
  app.post('/token', async (request, reply) => {
    const p = Params.fromBody(request.body);
    const grantType = p.require('grant_type');
    // RFC 8693: the one grant with client authentication (the internal agency MCP client), see token-exchange.ts.
    if (grantType === TOKEN_EXCHANGE_GRANT) return tokenExchangeGrant(ctx, request, p, reply);
    refuseClientCredentials(ctx, request, p);
    if (grantType === 'authorization_code') return authorizationCodeGrant(ctx, registry, p, reply);
    if (grantType === 'refresh_token') return sendTokens(reply, await refreshTokenGrant(ctx, p));
    throw new OAuthError('unsupported_grant_type', `grant_type ${grantType} is not supported`);
  });
}

async function authorizationCodeGrant(
  ctx: AppContext,
  registry: ClientRegistry,
  p: Params,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const code = p.require('code');
  const clientId = requireClientId(p);
  const verifier = p.get('code_verifier');
  const redirectUri = p.get('redirect_uri');
  if (verifier === undefined) throw new OAuthError('invalid_request', 'code_verifier is required (PKCE)');
  if (!isVerifier(verifier))
    throw new OAuthError('invalid_request', 'code_verifier is malformed (RFC 7636 §4.1)');
  const hash = hashSecret(code);
  const row = await ctx.db
    .selectFrom('authorization_codes')
    .selectAll()
    .where('hash', '=', hash)
    .executeTakeFirst();
  const invalid = (why: string) => new OAuthError('invalid_grant', why);
  if (!row) throw invalid('The authorization code is invalid');
  // RFC 6749 §4.1.3: issued to this client, for this redirect URI (identical when sent); RFC 7636 §4.6. Checked before
  // acting on a replay, so that only the holder of the code and its verifier can end the connection it produced.
  if (row.client_id !== clientId) throw invalid('The authorization code was issued to another client');
  if (!verifyS256(verifier, row.code_challenge))
    throw invalid('The code_verifier does not match the code_challenge');
  if (row.consumed_at !== null) {
    // RFC 6749 §4.1.2: a code used twice → revoke what it produced.
    await revokeForReplay(ctx, hash);
    throw invalid('The authorization code was already used; the connection it produced is revoked');
  }
  const now = ctx.clock.now();
  if (row.expires_at <= now) throw invalid('The authorization code expired');
  if (redirectUri !== undefined && redirectUri !== row.redirect_uri) {
    throw invalid('redirect_uri does not match the authorization request');
  }
  checkTokenResource(p, row.resource);
  // Single use by compare-and-set: of concurrent exchanges exactly one wins; a loser is a replay.
  const connectionId = await exchangeCode(ctx, hash, row.connection_id, now);
  if (connectionId === false) {
    await revokeForReplay(ctx, hash);
    throw invalid('The authorization code was already used; the connection it produced is revoked');
  }
  if (connectionId === undefined) throw invalid('The authorization was withdrawn before the code was used');
  const connection = await ctx.db
    .selectFrom('connections')
    .selectAll()
    .where('id', '=', connectionId)
    .executeTakeFirstOrThrow();
  await registry.markUsed(clientId);
  const scope = row.scope;
  const refreshToken = parseList(scope).includes(SCOPES.offline)
    ? await issueRefreshToken(ctx, connection.id, scope)
    : undefined;
  return sendTokens(reply, await connectionTokens(ctx, connection, scope, refreshToken));
}

/**
 * Consumes the code and lets its consent take effect (one connection per app, see `activateGrant`). Returns false
 * when another exchange consumed it first, undefined when its connection ended meanwhile, else the connection id.
 * Two first exchanges of one app racing meet the unique index on active connections: the loser retries and folds
 * into the winner's connection.
 */
async function exchangeCode(
  ctx: AppContext,
  hash: string,
  pendingId: string,
  now: number,
): Promise<string | false | undefined> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await ctx.db.transaction().execute(async (trx) => {
        const r = await trx
          .updateTable('authorization_codes')
          .set({ consumed_at: now })
          .where('hash', '=', hash)
          .where('consumed_at', 'is', null)
          .executeTakeFirst();
        if (r.numUpdatedRows !== 1n) return false;
        return activateGrant(trx, ctx.clock, pendingId);
      });
    } catch (e) {
      if (attempt > 0 || !isUniqueViolation(e)) throw e;
    }
  }
}

async function revokeForReplay(ctx: AppContext, codeHash: string): Promise<void> {
  // Read again: the code row follows its connection when its consent was folded into the app's existing one.
  const code = await ctx.db
    .selectFrom('authorization_codes')
    .select('connection_id')
    .where('hash', '=', codeHash)
    .executeTakeFirstOrThrow();
  if (await endConnection(ctx, code.connection_id, 'code_replay')) {
    ctx.log.warn({ connection_id: code.connection_id }, 'authorization code replayed; connection revoked');
  }
}

/** Stores the first refresh token of a new family under a connection and returns it. */
async function issueRefreshToken(ctx: AppContext, connectionId: string, scope: string): Promise<string> {
  const { token, family } = newRefreshToken();
  await storeRefreshToken(ctx.db, {
    hash: hashSecret(token),
    connectionId,
    parentHash: null,
    salt: randomSecret(16),
    scope,
    family,
    now: ctx.clock.now(),
  });
  return token;
}
