import { Buffer } from 'node:buffer';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { currentGrant } from '../domain/connections.js';
import { effectivePermissions } from '../domain/permissions.js';
import { signJwt, TOKEN_TYPES } from '../tokens/jwt.js';
import { type OAuthPrincipal, TokenError } from '../tokens/verifier.js';
import type { Params } from '../web/form.js';
import { NO_STORE, OAuthError } from '../http/oauth-errors.js';
import { safeEqual } from '../base/secrets.js';

/**
 * OAuth 2.0 Token Exchange (RFC 8693) at the token endpoint, for one caller only: the agency MCP server,
 * authenticated as the internal client with AGENCY_MCP_CLIENT_SECRET. It trades the access token an agent sent to
 * the agency MCP server (the subject token) for a 5-minute dashboard API token carrying the connection's effective
 * permissions now (docs/contract.md#permissions). The inbound token itself never reaches the dashboard API.
 */

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
/** RFC 8693 §3 token type identifiers. */
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
/** The internal client the agency MCP server authenticates as (never offered to anyone else). */
export const AGENCY_MCP_CLIENT_ID = 'svc-agency-mcp';
/** docs/contract.md#tokens: dashboard API tokens live 5 minutes. */
export const DASHBOARD_TOKEN_TTL_SECONDS = 300;

export interface TokenExchangeRequest {
  /** The Authorization header: RFC 6749 §2.3.1 `Basic` client credentials. */
  authorization: string | undefined;
  subjectToken: string | undefined;
  subjectTokenType: string | undefined;
  /** RFC 8693 §2.1 `audience` and/or `resource`: the dashboard API; absent = the dashboard API. */
  targets: string[];
  requestedTokenType: string | undefined;
}

/** RFC 8693 §2.2.1 */
export interface TokenExchangeResponse {
  access_token: string;
  issued_token_type: typeof ACCESS_TOKEN_TYPE;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
}

/** The grant as dispatched from POST /oauth/token (form already parsed). */
export async function tokenExchangeGrant(
  ctx: AppContext,
  request: FastifyRequest,
  p: Params,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const body = await exchangeToken(ctx, {
    authorization: request.headers.authorization,
    subjectToken: p.get('subject_token'),
    subjectTokenType: p.get('subject_token_type'),
    targets: [...p.all('audience'), ...p.all('resource')].filter((t) => t !== ''),
    requestedTokenType: p.get('requested_token_type'),
  });
  // RFC 6749 §5.1 (RFC 8693 §2.2.1): token responses are never cached.
  return reply.code(200).headers(NO_STORE).type('application/json; charset=utf-8').send(body);
}

/** The exchange itself; throws OAuthError (RFC 6749 §5.2 / RFC 8693 §2.2.2). */
export async function exchangeToken(
  ctx: AppContext,
  r: TokenExchangeRequest,
): Promise<TokenExchangeResponse> {
  authenticateInternalClient(ctx, r.authorization);
  const audience = urls.dashboardApi(ctx.config);
  checkRequest(r, audience);
  const subject = await verifySubject(ctx, r.subjectToken!);
  const grant = await liveGrant(ctx, subject);
  const permissions = effectivePermissions({
    ceiling: grant.ceiling.split(' '),
    role: grant.role,
    scopes: subject.scopes,
    agencyAllowsWrite: grant.agent_write_enabled === 1,
  });
  const scope = [...subject.scopes].join(' ');
  const token = await signJwt(ctx.keys, ctx.clock, {
    typ: TOKEN_TYPES.dashboard,
    issuer: urls.issuer(ctx.config),
    subject: subject.userId,
    audience,
    lifetimeSeconds: DASHBOARD_TOKEN_TTL_SECONDS,
    claims: {
      client_id: subject.clientId,
      scope,
      cid: subject.connectionId,
      agency_id: subject.agencyId,
      member_id: subject.memberId,
      perms: permissions.join(' '),
      // RFC 8693 §4.1: the party acting for the subject.
      act: { sub: AGENCY_MCP_CLIENT_ID },
    },
  });
  return {
    access_token: token,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: DASHBOARD_TOKEN_TTL_SECONDS,
    scope,
  };
}

/** RFC 6749 §2.3.1 HTTP Basic: form-urlencoded id and secret; the secret is compared in constant time. */
function authenticateInternalClient(ctx: AppContext, authorization: string | undefined): void {
  const refuse = () =>
    new OAuthError('invalid_client', 'Client authentication failed', 401, {
      'www-authenticate': 'Basic realm="token-exchange"',
    });
  const m = /^basic +([A-Za-z0-9+/]+=*) *$/i.exec(authorization ?? '');
  if (!m) throw refuse();
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) throw refuse();
  let id: string;
  let secret: string;
  try {
    id = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
    secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '));
  } catch {
    throw refuse();
  }
  // Every accepted secret is compared (each in constant time), whichever matches: the time does not say which.
  let secretOk = false;
  for (const accepted of ctx.config.agencyMcp.clientSecrets)
    secretOk = safeEqual(secret, accepted) || secretOk;
  if (id !== AGENCY_MCP_CLIENT_ID || !secretOk) throw refuse();
}

function checkRequest(r: TokenExchangeRequest, audience: string): void {
  if (r.subjectToken === undefined)
    throw new OAuthError('invalid_request', 'The subject_token parameter is missing');
  if (r.subjectTokenType !== ACCESS_TOKEN_TYPE) {
    throw new OAuthError('invalid_request', `subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  if (r.requestedTokenType !== undefined && r.requestedTokenType !== ACCESS_TOKEN_TYPE) {
    throw new OAuthError('invalid_request', `requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  // RFC 8693 §2.2.2: a target the server will not issue for → invalid_target.
  if (r.targets.some((t) => t !== audience)) {
    throw new OAuthError('invalid_target', `Tokens are issued only for the dashboard API, ${audience}`);
  }
}

type BoundPrincipal = OAuthPrincipal & { connectionId: string; agencyId: string; memberId: string };

/** RFC 8693 §2.2.2: an invalid or unacceptable subject token → invalid_request. */
async function verifySubject(ctx: AppContext, token: string): Promise<BoundPrincipal> {
  let p: OAuthPrincipal;
  try {
    const principal = await ctx.verifier.verify(token, urls.agencyMcpResource(ctx.config), ['oauth']);
    if (principal.kind !== 'oauth') throw new TokenError('invalid', 'not an access token');
    p = principal;
  } catch (e) {
    if (!(e instanceof TokenError)) throw e;
    throw new OAuthError('invalid_request', `The subject token is not valid: ${e.message}`);
  }
  if (!p.connectionId || !p.agencyId || !p.memberId) {
    throw new OAuthError('invalid_request', 'The subject token is not bound to one agency and one member');
  }
  return p as BoundPrincipal;
}

/** The connection, read now (not from a cache): revoked, expired, or its member removed → refused (docs/contract.md#revocation). */
async function liveGrant(ctx: AppContext, subject: BoundPrincipal) {
  const row = await currentGrant(ctx.store.sql, subject.connectionId);
  const now = ctx.clock.now();
  if (row?.status !== 'active' || row.expires_at <= now) {
    throw new OAuthError('invalid_request', 'The connection behind the subject token has ended');
  }
  if (row.member_status !== 'active' || row.member_id !== subject.memberId) {
    throw new OAuthError('invalid_request', 'The member behind the subject token is no longer active');
  }
  return row;
}
