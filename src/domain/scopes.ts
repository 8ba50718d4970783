/** The two kinds of protected resource (RFC 8707): the agency MCP server and the user resources. */
export type ResourceKind = 'agency' | 'user';

export const SCOPES = {
  agencyRead: 'agency:mcp:read',
  agencyWrite: 'agency:mcp:write',
  offline: 'offline_access',
  userRead: 'user:read',
} as const;

/** docs/contract.md#the-oauth-flow lists `mcp:read` / `mcp:write` in the protected-resource metadata; they are aliases (docs/contract.md#the-oauth-flow). */
export const ALIASES: Record<string, string> = {
  'mcp:read': SCOPES.agencyRead,
  'mcp:write': SCOPES.agencyWrite,
};

export const BY_KIND: Record<ResourceKind, readonly string[]> = {
  agency: [SCOPES.agencyRead, SCOPES.agencyWrite, SCOPES.offline],
  user: [SCOPES.userRead, SCOPES.offline],
};

/** Default when the request has no scope (RFC 6749 §3.3 lets the server choose): read access. */
export const DEFAULTS: Record<ResourceKind, readonly string[]> = {
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

export const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
