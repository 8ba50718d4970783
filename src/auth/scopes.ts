import { OAuthError } from './oauth-errors.js';
import type { ResourceKind } from './resource-indicator.js';

export const SCOPES = {
  agencyRead: 'agency:mcp:read',
  agencyWrite: 'agency:mcp:write',
  offline: 'offline_access',
  userRead: 'user:read',
} as const;

/** SPEC §4.3 lists `mcp:read` / `mcp:write` in the protected-resource metadata; they are aliases (DESIGN §5). */
const ALIASES: Record<string, string> = { 'mcp:read': SCOPES.agencyRead, 'mcp:write': SCOPES.agencyWrite };

const BY_KIND: Record<ResourceKind, readonly string[]> = {
  agency: [SCOPES.agencyRead, SCOPES.agencyWrite, SCOPES.offline],
  user: [SCOPES.userRead, SCOPES.offline],
};

/** Default when the request has no scope (RFC 6749 §3.3 lets the server choose): read access. */
const DEFAULTS: Record<ResourceKind, readonly string[]> = {
  agency: [SCOPES.agencyRead],
  user: [SCOPES.userRead],
};

/** RFC 8414 §2 `scopes_supported`: only what can be granted; `user:read` while the user resources are open. */
export function scopesSupported(userResources: boolean): string[] {
  return [
    SCOPES.agencyRead,
    SCOPES.agencyWrite,
    SCOPES.offline,
    ...(userResources ? [SCOPES.userRead] : []),
    ...Object.keys(ALIASES),
  ];
}

/** Words the consent page shows for each scope. */
export const SCOPE_LABELS: Record<string, string> = {
  [SCOPES.agencyRead]: 'Read agency data you can see (clients, projects, tasks, members)',
  [SCOPES.agencyWrite]: 'Make changes in the agency on your behalf, within the permissions you tick below',
  [SCOPES.offline]: 'Stay connected when you are away (until you disconnect it, or 30 days unused)',
  [SCOPES.userRead]: 'Read your user profile (username and avatar)',
};

const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

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
