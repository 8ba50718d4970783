import { type Config, type Surface, urlOf } from './config.js';

/**
 * One URL of a configuration, computed once: a surface's URL never changes once known (configured, or published once
 * when the surface listens: config.ts), and hot paths ask for them on every request (a token's audience and issuer).
 * Asked each time, it was a WeakMap probe and, for a resource, a new string that the audience comparison then had to
 * flatten (perf: ~0.6 % of a fast `GET /me`). One configuration per process is the rule, so the last one is kept: a
 * pointer comparison. A URL not known yet throws, as `urlOf` does, and is asked again next time.
 */
function once(url: (c: Config) => string): (c: Config) => string {
  let config: Config | undefined;
  let value = '';
  return (c) => {
    if (c !== config) {
      value = url(c);
      config = c;
    }
    return value;
  };
}

/** Public URLs of the surfaces and of the resources they protect (RFC 8707 resource indicators). */
export const urls = {
  issuer: once((c) => urlOf(c, 'auth')),
  api: once((c) => urlOf(c, 'api')),
  mcpResource: once((c) => `${urlOf(c, 'mcp')}/mcp`),
  agencyMcpResource: once((c) => `${urlOf(c, 'agency-mcp')}/mcp`),
  /** The dashboard API (served by the auth surface): the `aud` of the tokens the token exchange mints for it. */
  dashboardApi: once((c) => `${urlOf(c, 'auth')}/api`),
  /** The session API (served by the auth surface): where an API session token may end its own session. */
  sessionApi: once((c) => `${urlOf(c, 'auth')}/api/sessions`),
  of: (c: Config, s: Surface) => urlOf(c, s),
};

/**
 * The path of a surface's configured public URL (`/agency` for `https://example.com/agency`), or '': the prefix a
 * proxy in front strips before forwarding, and that the URLs the surface advertises carry.
 */
export function publicPath(c: Config, s: Surface): string {
  const url = c.urls[s];
  return url === undefined ? '' : new URL(url).pathname.replace(/\/$/, '');
}
