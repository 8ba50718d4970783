import { generateKeyPair, SignJWT } from 'jose';
import type { AppContext } from '../../src/context.js';
import { urls } from '../../src/config/urls.js';
import { toEpochSeconds } from '../../src/base/clock.js';
import { activateGrant, createPendingConnection } from '../../src/domain/connections.js';
import { signJwt, TOKEN_TYPES } from '../../src/tokens/jwt.js';

/**
 * An OAuth access token (RFC 9068) minted with the server's real signing key, as the AS would mint it: under a live
 * user-level connection (its `cid`) unless the test gives claims of its own.
 */
export async function mintAccessToken(
  ctx: AppContext,
  o: {
    userId: string;
    audience: string;
    scope: string;
    clientId?: string;
    lifetimeSeconds?: number;
    claims?: Record<string, unknown>;
  },
): Promise<string> {
  const clientId = o.clientId ?? 'test-client';
  const cid = o.claims && 'cid' in o.claims ? undefined : await liveConnection(ctx, o.userId, clientId, o);
  return signJwt(ctx.keys, ctx.clock, {
    typ: TOKEN_TYPES.access,
    issuer: urls.issuer(ctx.config),
    subject: o.userId,
    audience: o.audience,
    lifetimeSeconds: o.lifetimeSeconds ?? 3600,
    claims: { client_id: clientId, scope: o.scope, ...(cid ? { cid } : {}), ...o.claims },
  });
}

async function liveConnection(
  ctx: AppContext,
  userId: string,
  clientId: string,
  o: { audience: string; scope: string },
): Promise<string> {
  // A user that does not exist has no connections (they end with the user): the token names one that is gone.
  const user = await ctx.db.selectFrom('users').select('id').where('id', '=', userId).executeTakeFirst();
  if (!user) return 'con_gone';
  const pending = await createPendingConnection(ctx.db, ctx.clock, {
    userId,
    agencyId: null,
    memberId: null,
    clientId,
    resource: o.audience,
    scopes: o.scope.split(' '),
    ceiling: [],
    pendingUntil: ctx.clock.now() + 60_000,
  });
  return (await activateGrant(ctx.db, ctx.clock, pending.id))!;
}

/** A JWT signed with the server's real key but with header and claims under the test's control. */
export async function signWithServerKey(
  ctx: AppContext,
  header: Record<string, unknown>,
  claims: Record<string, unknown>,
): Promise<string> {
  const key = await ctx.keys.signingKey();
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, kid: key.kid, ...header })
    .sign(key.privateKey);
}

export function baseClaims(ctx: AppContext, userId: string, audience: string, sid: string) {
  const now = toEpochSeconds(ctx.clock.now());
  return {
    iss: urls.issuer(ctx.config),
    sub: userId,
    aud: audience,
    iat: now,
    nbf: now,
    exp: now + 600,
    jti: 'j1',
    sid,
  };
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** `alg: none` (RFC 7519 §6): an unsecured JWT with an empty signature. */
export function unsignedToken(claims: Record<string, unknown>, typ: string): string {
  return `${b64({ alg: 'none', typ })}.${b64(claims)}.`;
}

/** HS256 keyed with the server's public JWK: the classic algorithm-confusion forgery (RFC 8725 §2.1). */
export async function hs256WithPublicKey(ctx: AppContext, claims: Record<string, unknown>, typ: string) {
  const jwks = await ctx.keys.jwks();
  const jwk = jwks.keys[0]!;
  const secret = new TextEncoder().encode(JSON.stringify(jwk));
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: jwk.kid, typ }).sign(secret);
}

/** A well-formed token signed by a key the server has never published. */
export async function signedByUnknownKey(claims: Record<string, unknown>, typ: string): Promise<string> {
  const { privateKey } = await generateKeyPair('RS256');
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: 'not-a-known-kid', typ })
    .sign(privateKey);
}

export { TOKEN_TYPES };

/** A JWT's header, read without checking anything (tests look at what a token carries). */
export const headerOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString()) as Record<string, unknown>;

/** A JWT's claims, read without checking anything. */
export const claimsOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
