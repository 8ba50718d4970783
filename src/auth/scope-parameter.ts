import { ALIASES, BY_KIND, DEFAULTS, type ResourceKind, SCOPE_TOKEN, SCOPES } from '../domain/scopes.js';
import { OAuthError } from '../http/oauth-errors.js';

/**
 * Parses a scope parameter (RFC 6749 §3.3: space-delimited, case-sensitive) into canonical names in a stable order;
 * unknown scopes or scopes of another resource → `invalid_scope`. Write implies read.
 */
export function parseScope(raw: string | undefined, kind: ResourceKind): string[] {
  if (raw === undefined) return [...DEFAULTS[kind]];
  const names = raw.split(' ').filter(Boolean);
  if (names.length === 0) return [...DEFAULTS[kind]];
  const out = new Set<string>();
  for (const name of names) {
    if (!SCOPE_TOKEN.test(name)) throw new OAuthError('invalid_scope', 'The scope parameter is malformed');
    const canonical = ALIASES[name] ?? name;
    if (!BY_KIND[kind].includes(canonical)) {
      throw new OAuthError('invalid_scope', `The scope ${name} is unknown or not valid for this resource`);
    }
    out.add(canonical);
  }
  if (out.has(SCOPES.agencyWrite)) out.add(SCOPES.agencyRead);
  if (out.size === 1 && out.has(SCOPES.offline)) for (const s of DEFAULTS[kind]) out.add(s);
  return BY_KIND[kind].filter((s) => out.has(s));
}

/**
 * The scope a refresh request asks for (RFC 6749 §6: never wider than the grant's), read as an authorization request's
 * is: aliases, write with its read, `offline_access` alone with the default. Clients send the scope they first asked
 * for with every refresh; read otherwise, `mcp:write` would give an access token without the read every call needs.
 */
export function narrowerScope(raw: string, granted: readonly string[], kind: ResourceKind): string[] {
  const asked = parseScope(raw, kind);
  if (asked.some((s) => !granted.includes(s))) {
    throw new OAuthError('invalid_scope', 'The requested scope exceeds the scope of the grant');
  }
  return asked;
}
