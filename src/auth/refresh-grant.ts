import type { AppContext } from '../context.js';
import { requireClientId } from './client-authentication.js';
import { endConnection } from '../domain/connections.js';
import { pruneExpiredHourly } from '../domain/pruning.js';
import { parseList } from '../domain/permissions.js';
import {
  findAndRotate,
  findFamilyConnection,
  findSuccessor,
  type RefreshGrant,
  type Rotation,
  type RotationGuard,
  type RotationPlan,
} from '../domain/refresh-tokens.js';
import { hashSecret, randomSecret } from '../base/secrets.js';
import { SCOPES } from '../domain/scopes.js';
import { OAuthError } from '../http/oauth-errors.js';
import type { Params } from '../web/form.js';
import { familyOf, successorOf } from './refresh-token.js';
import { checkTokenResource, requestedTokenResource } from './resource-indicator.js';
import { narrowerScope } from './scope-parameter.js';
import { connectionTokens, type TokenResponse } from './token-response.js';

/**
 * The refresh_token grant (RFC 6749 §6) with rotation on every use (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2): the token
 * response, or an OAuthError. Called by the token route and by the token fast path (token-fast-path.ts) alike.
 */
export async function refreshTokenGrant(ctx: AppContext, p: Params): Promise<TokenResponse> {
  await pruneExpiredHourly(ctx.db, ctx.clock);
  const token = p.require('refresh_token');
  const clientId = requireClientId(p);
  const requestedScope = p.get('scope');
  const hash = hashSecret(token);
  const now = ctx.clock.now();
  // The successor's salt is chosen now and stored on the consumed row (domain/refresh-tokens.ts): the whole rotation
  // is known before the row is read, and PostgreSQL reads, checks and writes it in one statement.
  const salt = randomSecret(16);
  const successor = successorOf(token, salt);
  const rotation: Rotation = {
    hash,
    salt,
    successor: { hash: hashSecret(successor.token), family: successor.family, salt: randomSecret(16) },
    now,
  };
  const { answer, won } = await findAndRotate(
    ctx.store.sql,
    rotation,
    rotationGuard(p, clientId, requestedScope),
    (row) => planRotation(p, { clientId, requestedScope, now, successor: successor.token }, row),
  );
  if (answer.kind === 'unknown') return refuseUnknown(ctx, token, clientId);
  const { row } = answer;
  if (answer.kind === 'rotate' && won) {
    ctx.metrics.refresh('rotated');
    return connectionTokens(ctx, row, answer.scope, answer.successor);
  }
  // Rotated before, or by a concurrent request that won the compare-and-set just now (findAndRotate then plans the
  // row as that rotation left it, with the salt its successor was derived with).
  const rotatedAt = answer.kind === 'rotate' ? now : answer.rotatedAt;
  const graceMs = ctx.config.oauth.refreshReuseGraceSeconds * 1000;
  if (graceMs > 0 && now - rotatedAt <= graceMs) {
    // Within the grace window the same successor, if it is the immediately previous token's: its successor must
    // not have been rotated itself.
    const replayed = successorOf(token, row.successor_salt).token;
    const next = await findSuccessor(ctx.db, hashSecret(replayed), hash);
    const familyScope = next && next.rotated_at === null ? narrowed(row, next.scope) : [];
    if (familyScope.length > 0) {
      refuseWithoutOffline(familyScope);
      const scope = accessScope(requestedScope, familyScope, row);
      ctx.metrics.refresh('grace_replay');
      return connectionTokens(ctx, row, scope, replayed);
    }
  }
  return revokeForReuse(ctx, row.id);
}

interface Presented {
  clientId: string;
  requestedScope: string | undefined;
  now: number;
  /** The successor a rotation gives out. */
  successor: string;
}

/** What the grant makes of the presented token's row, before any write (the checks of RFC 6749 §6 and §5.2). */
type Planned =
  | { kind: 'unknown' }
  | { kind: 'reused'; row: RefreshGrant; rotatedAt: number }
  | { kind: 'rotate'; row: RefreshGrant; scope: string; successor: string };

/**
 * The checks of a presented refresh token against its row, in order, and the rotation they allow; throws the
 * OAuthError of the first that fails. Synchronous: on the embedded database it runs inside the rotation's
 * transaction (findAndRotate). On PostgreSQL, rotationGuard's part of them is made in the rotation's statement too.
 */
function planRotation(p: Params, t: Presented, row: RefreshGrant | undefined): RotationPlan<Planned> {
  const invalid = (why: string) => new OAuthError('invalid_grant', why);
  if (!row) return { rotate: false, answer: { kind: 'unknown' } };
  // RFC 6749 §6: the refresh token is bound to the client it was issued to.
  if (row.client_id !== t.clientId) throw invalid('The refresh token was issued to another client');
  if (row.status !== 'active' || row.connection_expires_at <= t.now)
    throw invalid('The connection has ended');
  checkTokenResource(p, row.resource);
  if (row.rotated_at !== null)
    return { rotate: false, answer: { kind: 'reused', row, rotatedAt: row.rotated_at } };
  if (row.expires_at <= t.now) throw invalid('The refresh token expired');
  const familyScope = narrowed(row, row.scope);
  if (familyScope.length === 0)
    throw invalid('The connection no longer grants the scope of this refresh token');
  refuseWithoutOffline(familyScope);
  const scope = accessScope(t.requestedScope, familyScope, row);
  // Rotation (docs/contract.md#the-oauth-flow): one compare-and-set on `rotated_at IS NULL`; the winner stores the
  // successor and slides the connection's expiry, all committed before the answer. RFC 6749 §6: the successor keeps
  // the scope originally granted; only the access token is narrowed.
  return { rotate: true, answer: { kind: 'rotate', row, scope, successor: t.successor } };
}

/**
 * A refresh token is the grant of `offline_access`: once the connection's newest consent no longer holds it ("Stay
 * connected" unticked on a re-authorization, whose page says that what is allowed replaces what was allowed before),
 * the tokens issued under an earlier consent stop rotating. Nothing is revoked: the app's access tokens run out, and
 * a consent that allows it again lets them rotate.
 */
function refuseWithoutOffline(familyScope: string[]): void {
  if (!familyScope.includes(SCOPES.offline)) {
    throw new OAuthError(
      'invalid_grant',
      'The connection no longer allows staying connected (offline_access); authorize again',
    );
  }
}

/**
 * The access token's scope (RFC 6749 §6): the family's, or the narrower one the request asks for, never a wider one.
 * A connection names an agency exactly when its resource is the agency MCP server (authorize.ts).
 */
function accessScope(requestedScope: string | undefined, familyScope: string[], row: RefreshGrant): string {
  if (requestedScope === undefined) return familyScope.join(' ');
  return narrowerScope(requestedScope, familyScope, row.agency_id === null ? 'user' : 'agency').join(' ');
}

/**
 * The part of planRotation's checks the rotation's statement makes on PostgreSQL (RotationGuard), or undefined when
 * the request asks for what only planRotation checks: a narrower scope, or a resource it refuses as malformed.
 */
function rotationGuard(
  p: Params,
  clientId: string,
  requestedScope: string | undefined,
): RotationGuard | undefined {
  if (requestedScope !== undefined) return undefined;
  const resource = requestedTokenResource(p);
  return resource === undefined ? undefined : { clientId, resource };
}

/**
 * One connection per app: its newest consent governs every token family under it, so a family issued under a wider
 * earlier consent is narrowed to the connection's scopes now.
 */
function narrowed(row: RefreshGrant, scope: string): string[] {
  const current = new Set(parseList(row.connection_scopes));
  return parseList(scope).filter((s) => current.has(s));
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
