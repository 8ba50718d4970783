import type { FastifyInstance, FastifyReply } from 'fastify';
import type { AppContext } from '../context.js';
import {
  activateGrant,
  type ConnectionRow,
  endConnection,
  isUniqueViolation,
  pruneExpiredGrantsHourly,
} from '../domain/connections.js';
import { parseList } from '../domain/permissions.js';
import {
  findFamilyConnection,
  findRefreshGrant,
  findSuccessor,
  rotateRefreshToken,
  storeRefreshToken,
} from '../domain/refresh-tokens.js';
import { familyOf, newRefreshToken, successorOf } from './refresh-token.js';
import { ACCESS_TOKEN_TTL_SECONDS, mintConnectionAccessToken } from './access-token.js';
import type { ClientRegistry } from './clients/registry.js';
import { refuseClientCredentials } from './client-authentication.js';
import { Params } from '../web/form.js';
import { OAuthError } from '../http/oauth-errors.js';
import { isVerifier, verifyS256 } from './pkce.js';
import { canonicalResource } from './resource-indicator.js';
import { SCOPES } from '../domain/scopes.js';
import { hashSecret, randomSecret } from '../base/secrets.js';
import { TOKEN_EXCHANGE_GRANT, tokenExchangeGrant } from './token-exchange.js';

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
  app.post('/oauth/token', async (request, reply) => {
    const p = Params.fromBody(request.body);
    const grantType = p.require('grant_type');
    // RFC 8693: the one grant with client authentication (the internal agency MCP client), see token-exchange.ts.
    if (grantType === TOKEN_EXCHANGE_GRANT) return tokenExchangeGrant(ctx, request, p, reply);
    refuseClientCredentials(ctx, request, p);
    if (grantType === 'authorization_code') return authorizationCodeGrant(ctx, registry, p, reply);
    if (grantType === 'refresh_token') return refreshTokenGrant(ctx, p, reply);
    throw new OAuthError('unsupported_grant_type', `grant_type ${grantType} is not supported`);
  });
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
}

function sendTokens(reply: FastifyReply, body: TokenResponse): FastifyReply {
  // RFC 6749 §5.1: no-store on every response carrying tokens.
  return reply
    .code(200)
    .headers({ 'cache-control': 'no-store', pragma: 'no-cache' })
    .type('application/json; charset=utf-8')
    .send(body);
}

/** Checks an optional `resource` at the token endpoint: it may be omitted; when sent it must match (docs/contract.md#the-oauth-flow). */
function checkResource(p: Params, expected: string): void {
  const all = p.all('resource').filter((r) => r !== '');
  if (all.length === 0) return;
  if (all.length > 1 || canonicalResource(all[0]!) !== canonicalResource(expected)) {
    throw new OAuthError('invalid_target', 'The resource does not match the one this grant was made for');
  }
}

async function authorizationCodeGrant(
  ctx: AppContext,
  registry: ClientRegistry,
  p: Params,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const code = p.require('code');
  const clientId = p.require('client_id');
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
  checkResource(p, row.resource);
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
  const body: TokenResponse = {
    access_token: await mintConnectionAccessToken(ctx, connection, scope),
    token_type: 'Bearer',
    expires_in: ACCESS_TOKEN_TTL_SECONDS,
    scope,
  };
  if (parseList(scope).includes(SCOPES.offline)) {
    body.refresh_token = await issueRefreshToken(ctx, connection.id, scope);
  }
  return sendTokens(reply, body);
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

async function refreshTokenGrant(ctx: AppContext, p: Params, reply: FastifyReply): Promise<FastifyReply> {
  await pruneExpiredGrantsHourly(ctx.db, ctx.clock);
  const token = p.require('refresh_token');
  const clientId = p.require('client_id');
  const requestedScope = p.get('scope');
  const hash = hashSecret(token);
  const row = await findRefreshGrant(ctx.store.sql, hash);
  const invalid = (why: string) => new OAuthError('invalid_grant', why);
  if (!row) return refuseUnknown(ctx, token, clientId);
  // RFC 6749 §6: the refresh token is bound to the client it was issued to.
  if (row.client_id !== clientId) throw invalid('The refresh token was issued to another client');
  const now = ctx.clock.now();
  if (row.status !== 'active' || row.connection_expires_at <= now) throw invalid('The connection has ended');
  checkResource(p, row.resource);
  const connection: Pick<
    ConnectionRow,
    'id' | 'user_id' | 'client_id' | 'resource' | 'agency_id' | 'member_id'
  > = row;
  const graceMs = ctx.config.oauth.refreshReuseGraceSeconds * 1000;

  // One connection per app: its newest consent governs every token family under it, so a family issued under a
  // wider earlier consent is narrowed to the connection's scopes now.
  const current = new Set(parseList(row.connection_scopes));
  const narrowed = (scope: string) => parseList(scope).filter((s) => current.has(s));
  if (row.rotated_at !== null) return reuse(row.rotated_at);
  if (row.expires_at <= now) throw invalid('The refresh token expired');
  const familyScope = narrowed(row.scope);
  if (familyScope.length === 0)
    throw invalid('The connection no longer grants the scope of this refresh token');
  // RFC 6749 §6: a narrower scope may be requested, never a wider one.
  let scope = familyScope.join(' ');
  if (requestedScope !== undefined) {
    const granted = new Set(familyScope);
    const asked = parseList(requestedScope).map((s) =>
      s === 'mcp:read' ? SCOPES.agencyRead : s === 'mcp:write' ? SCOPES.agencyWrite : s,
    );
    if (asked.length === 0 || asked.some((s) => !granted.has(s))) {
      throw new OAuthError('invalid_scope', 'The requested scope exceeds the scope of the grant');
    }
    scope = [...new Set(asked)].join(' ');
  }
  const successor = successorOf(token, row.successor_salt);
  // Rotation (docs/contract.md#the-oauth-flow): one compare-and-set on `rotated_at IS NULL`; the winner stores the
  // successor and slides the connection's expiry, all committed before the answer.
  const won = await rotateRefreshToken(ctx.store.sql, {
    hash,
    parentHash: row.parent_hash,
    connectionId: row.id,
    // RFC 6749 §6: the refresh token keeps the scope originally granted; only the access token is narrowed.
    successor: {
      hash: hashSecret(successor.token),
      salt: randomSecret(16),
      scope: row.scope,
      family: successor.family,
    },
    now,
  });
  if (!won) return reuse(now);
  ctx.metrics.refresh('rotated');
  return sendTokens(reply, {
    access_token: await mintConnectionAccessToken(ctx, connection, scope),
    token_type: 'Bearer',
    expires_in: ACCESS_TOKEN_TTL_SECONDS,
    scope,
    refresh_token: successor.token,
  });

  /** A rotated token presented again: within the grace window the same successor, else the connection ends. */
  async function reuse(rotatedAt: number): Promise<FastifyReply> {
    if (graceMs > 0 && now - rotatedAt <= graceMs) {
      const successor = successorOf(token, row!.successor_salt).token;
      const next = await findSuccessor(ctx.db, hashSecret(successor), hash);
      // Only the immediately previous token: its successor must not have been rotated itself.
      if (next && next.rotated_at === null && narrowed(next.scope).length > 0) {
        const scope = narrowed(next.scope).join(' ');
        ctx.metrics.refresh('grace_replay');
        return sendTokens(reply, {
          access_token: await mintConnectionAccessToken(ctx, connection, scope),
          token_type: 'Bearer',
          expires_in: ACCESS_TOKEN_TTL_SECONDS,
          scope,
          refresh_token: successor,
        });
      }
    }
    return revokeForReuse(ctx, row!.id);
  }
}

/**
 * docs/contract.md#tokens, RFC 9700 §4.14.2: a rotated refresh token presented again ends the whole connection —
 * whether its row is still there or was pruned after the rotation — and is counted and logged alike.
 */
async function revokeForReuse(ctx: AppContext, connectionId: string): Promise<never> {
  ctx.metrics.refresh('reuse_detected');
  if (await endConnection(ctx, connectionId, 'refresh_reuse')) {
    ctx.log.warn({ connection_id: connectionId }, 'refresh token reused; connection revoked');
  }
  throw new OAuthError('invalid_grant', 'The refresh token was already used; the connection is revoked');
}

/**
 * A token with no row: unknown, or a token of a family whose row was pruned after its rotation — then it was used
 * already, and presenting it again is reuse (docs/contract.md#tokens), unless another client presents it (RFC 6749 §6).
 */
async function refuseUnknown(ctx: AppContext, token: string, clientId: string): Promise<never> {
  const family = familyOf(token);
  const owner = family === undefined ? undefined : await findFamilyConnection(ctx.store.sql, family);
  if (!owner || owner.client_id !== clientId)
    throw new OAuthError('invalid_grant', 'The refresh token is invalid');
  if (owner.status !== 'active' || owner.expires_at <= ctx.clock.now())
    throw new OAuthError('invalid_grant', 'The connection has ended');
  return revokeForReuse(ctx, owner.id);
}
