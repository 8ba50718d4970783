import type { AppContext } from '../context.js';
import { type ConnectionRow, endConnection, pruneExpiredGrantsHourly } from '../domain/connections.js';
import { parseList } from '../domain/permissions.js';
import {
  findFamilyConnection,
  findRefreshGrant,
  findSuccessor,
  rotateRefreshToken,
} from '../domain/refresh-tokens.js';
import { SCOPES } from '../domain/scopes.js';
import { hashSecret, randomSecret } from '../base/secrets.js';
import { OAuthError } from '../http/oauth-errors.js';
import type { Params } from '../web/form.js';
import { familyOf, successorOf } from './refresh-token.js';
import { checkTokenResource } from './resource-indicator.js';
import { connectionTokens, type TokenResponse } from './token-response.js';

/**
 * The refresh_token grant (RFC 6749 §6) with rotation on every use (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2): the token
 * response, or an OAuthError. Called by the token route and by the token fast path (token-fast-path.ts) alike.
 */
export async function refreshTokenGrant(ctx: AppContext, p: Params): Promise<TokenResponse> {
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
  checkTokenResource(p, row.resource);
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
  return connectionTokens(ctx, connection, scope, successor.token);

  /** A rotated token presented again: within the grace window the same successor, else the connection ends. */
  async function reuse(rotatedAt: number): Promise<TokenResponse> {
    if (graceMs > 0 && now - rotatedAt <= graceMs) {
      const successor = successorOf(token, row!.successor_salt).token;
      const next = await findSuccessor(ctx.db, hashSecret(successor), hash);
      // Only the immediately previous token: its successor must not have been rotated itself.
      if (next && next.rotated_at === null && narrowed(next.scope).length > 0) {
        const scope = narrowed(next.scope).join(' ');
        ctx.metrics.refresh('grace_replay');
        return connectionTokens(ctx, connection, scope, successor);
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
