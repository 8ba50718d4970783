import type { Permission } from './permissions.js';

/**
 * The tools of the agency MCP server and the permission each needs (docs/contract.md#permissions). The tools are
 * defined against this table (agency-mcp/tools.ts), and the consent page reads it to offer only the permissions some
 * tool can use: a permission no tool uses would grant nothing today and something unknown tomorrow.
 */
export const AGENCY_TOOL_PERMISSIONS = {
  get_agency: 'agency:read',
  list_members: 'members:read',
  get_member: 'members:read',
  list_clients: 'clients:read',
  get_client: 'clients:read',
  list_projects: 'projects:read',
  get_project: 'projects:read',
  list_tasks: 'tasks:read',
  create_client: 'clients:write',
  update_client: 'clients:write',
  create_project: 'projects:write',
  update_project: 'projects:write',
  create_task: 'tasks:write',
  update_task: 'tasks:write',
  add_note: 'notes:write',
} as const satisfies Record<string, Permission>;

export type AgencyToolName = keyof typeof AGENCY_TOOL_PERMISSIONS;

const USED: ReadonlySet<Permission> = new Set(Object.values(AGENCY_TOOL_PERMISSIONS));

/** Whether some tool of the agency MCP server uses this permission. */
export const usedByTools = (permission: Permission): boolean => USED.has(permission);
