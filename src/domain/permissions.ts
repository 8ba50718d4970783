import { usedByTools } from './agency-tools.js';

/**
 * Roles and permissions (docs/contract.md#permissions): a fixed table in code, and the rule for what an agent may do at any moment.
 */

export const ROLES = ['owner', 'admin', 'manager', 'member', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export const READ_PERMISSIONS = [
  'agency:read',
  'members:read',
  'clients:read',
  'projects:read',
  'tasks:read',
] as const;
export const WRITE_PERMISSIONS = [
  'clients:write',
  'projects:write',
  'tasks:write',
  'notes:write',
  'members:manage',
  'settings:manage',
] as const;
export const PERMISSIONS = [...READ_PERMISSIONS, ...WRITE_PERMISSIONS] as const;
export type Permission = (typeof PERMISSIONS)[number];

const ALL: readonly Permission[] = PERMISSIONS;

export const ROLE_PERMISSIONS: Record<Role, readonly Permission[]> = {
  owner: ALL,
  admin: ALL,
  manager: [...READ_PERMISSIONS, 'clients:write', 'projects:write', 'tasks:write', 'notes:write'],
  member: [...READ_PERMISSIONS, 'tasks:write', 'notes:write'],
  viewer: [...READ_PERMISSIONS],
};

/** What each permission lets an agent do, in plain words (the consent page and the dashboard). */
export const PERMISSION_LABELS: Record<Permission, string> = {
  'agency:read': 'See the agency name and plan',
  'members:read': 'See the members of the agency',
  'clients:read': 'See clients',
  'projects:read': 'See projects',
  'tasks:read': 'See tasks',
  'clients:write': 'Create and change clients',
  'projects:write': 'Create and change projects',
  'tasks:write': 'Create and change tasks',
  'notes:write': 'Add notes',
  'members:manage': 'Manage members',
  'settings:manage': 'Change agency settings',
};

export const isRole = (v: unknown): v is Role =>
  typeof v === 'string' && (ROLES as readonly string[]).includes(v);
export const isPermission = (v: unknown): v is Permission =>
  typeof v === 'string' && (PERMISSIONS as readonly string[]).includes(v);
export const isWritePermission = (p: Permission): boolean =>
  (WRITE_PERMISSIONS as readonly string[]).includes(p);

export function rolePermissions(role: Role): readonly Permission[] {
  return ROLE_PERMISSIONS[role];
}

/** Whether `role` may hold `permission`. */
export function roleAllows(role: Role, permission: Permission): boolean {
  return ROLE_PERMISSIONS[role].includes(permission);
}

/**
 * The permissions the consent page offers as the ceiling, all ticked: the member's own that some agency MCP tool uses
 * (domain/agency-tools.ts), and write ones only when the token asks for write and the agency allows agents to write
 * (docs/contract.md#the-oauth-flow). Nothing else: one click on Allow never grants what no tool can use.
 */
export function offerablePermissions(o: {
  role: Role;
  wantsWrite: boolean;
  agencyAllowsWrite: boolean;
}): Permission[] {
  const writeOk = o.wantsWrite && o.agencyAllowsWrite;
  return ROLE_PERMISSIONS[o.role].filter((p) => usedByTools(p) && (!isWritePermission(p) || writeOk));
}

/** Whether any write permission a tool uses can be offered to this role (decides whether `agency:mcp:write` is granted). */
export function roleHasWrite(role: Role): boolean {
  return ROLE_PERMISSIONS[role].some((p) => isWritePermission(p) && usedByTools(p));
}

/**
 * docs/contract.md#permissions: effective permissions = connection ceiling ∩ the member's current role permissions ∩ (write permissions
 * only if the token has `agency:mcp:write` and the agency allows agent write).
 */
export function effectivePermissions(o: {
  ceiling: Iterable<string>;
  role: Role;
  scopes: ReadonlySet<string>;
  agencyAllowsWrite: boolean;
}): Permission[] {
  const writeOk = o.scopes.has('agency:mcp:write') && o.agencyAllowsWrite;
  const ceiling = new Set(o.ceiling);
  return ROLE_PERMISSIONS[o.role].filter((p) => ceiling.has(p) && (!isWritePermission(p) || writeOk));
}

/** A ceiling narrowed to what a (new) role allows, in table order. */
export function narrowCeiling(ceiling: Iterable<string>, role: Role): Permission[] {
  const c = new Set(ceiling);
  return ROLE_PERMISSIONS[role].filter((p) => c.has(p));
}

export const parseList = (s: string): string[] => s.split(' ').filter(Boolean);
