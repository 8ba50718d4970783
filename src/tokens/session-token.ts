import type { Clock } from '../base/clock.js';
import { type Config, knownUrl } from '../config/config.js';
import { urls } from '../config/urls.js';
import { type SessionRow, sessionKindOf } from '../domain/sessions.js';
import { signJwt, TOKEN_TYPES } from './jwt.js';
import type { SigningKeys } from './signing-keys.js';

/** What issuing a session token needs: the public URLs (audiences), the signing keys and the clock. */
export interface SessionTokenDeps {
  config: Config;
  keys: SigningKeys;
  clock: Clock;
}

/**
 * A session token: a JWT naming the session in `sid`. An API session's token is valid at the REST API, the user MCP
 * server and the session API (to end itself), never at the authorization server's pages; a browser session's token
 * (the cookie) only at the authorization server's pages (docs/security.md#credentials).
 */
export function issueSessionToken(ctx: SessionTokenDeps, session: SessionRow): Promise<string> {
  const c = ctx.config;
  return signJwt(ctx.keys, ctx.clock, {
    typ: TOKEN_TYPES.session,
    issuer: urls.issuer(c),
    subject: session.user_id,
    audience: sessionKindOf(session.id) === 'browser' ? [urls.issuer(c)] : apiSessionAudiences(ctx),
    lifetimeSeconds: Math.max(1, Math.floor((session.expires_at - ctx.clock.now()) / 1000)),
    claims: { sid: session.id },
  });
}

/** The first-party resources an API session token is good for: those of the surfaces this deployment has. */
function apiSessionAudiences(ctx: { config: Config }): string[] {
  const c = ctx.config;
  const audiences = [urls.sessionApi(c)];
  if (knownUrl(c, 'api')) audiences.push(urls.api(c));
  if (knownUrl(c, 'mcp')) audiences.push(urls.mcpResource(c));
  return audiences;
}
