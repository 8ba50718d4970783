import { type AppContext, urls } from '../context.js';
import type { SessionRow } from '../domain/sessions.js';
import { signJwt, TOKEN_TYPES } from './jwt.js';

/**
 * The first-party session token (DESIGN §4): a JWT naming the session in `sid`, valid at the first-party audiences —
 * the authorization server's own API, the REST API and the user MCP server — and nowhere else.
 */
export function issueSessionToken(ctx: AppContext, session: SessionRow): Promise<string> {
  const c = ctx.config;
  return signJwt(ctx.keys, ctx.clock, {
    typ: TOKEN_TYPES.session,
    issuer: urls.issuer(c),
    subject: session.user_id,
    audience: firstPartyAudiences(ctx),
    lifetimeSeconds: Math.max(1, Math.floor((session.expires_at - ctx.clock.now()) / 1000)),
    claims: { sid: session.id },
  });
}

/** The first-party resources a session token is good for: those of the surfaces this deployment has. */
function firstPartyAudiences(ctx: AppContext): string[] {
  const { auth, api, mcp } = ctx.config.urls;
  return [auth, api, mcp && `${mcp}/mcp`].filter((u): u is string => typeof u === 'string');
}
