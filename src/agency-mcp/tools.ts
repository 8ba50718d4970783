import type { ToolAnnotations } from '@modelcontextprotocol/server';
import { z } from 'zod';
import {
  AddNoteInput,
  CreateClientInput,
  CreateProjectInput,
  CreateTaskInput,
  ids,
  ListInput,
  ListProjectsInput,
  ListTasksInput,
  UpdateClientFields,
  UpdateProjectFields,
  UpdateTaskFields,
} from '../dashboard-api/inputs.js';
import type { OperationId } from '../dashboard-api/operations.js';
import {
  AgencySchema,
  ClientSchema,
  listSchema,
  MemberSchema,
  NoteSchema,
  ProjectSchema,
  TaskSchema,
} from '../dashboard-api/resources.js';
import { AGENCY_TOOL_PERMISSIONS, type AgencyToolName } from '../domain/agency-tools.js';
import { isWritePermission, type Permission } from '../domain/permissions.js';

/**
 * The agency MCP server's tools (docs/contract.md#agency-mcp-server) as data: what `tools/list` shows (name, title, description, input and
 * output schema, annotations), the permission each needs (docs/contract.md#permissions), and the dashboard API operation it runs. The
 * server card can publish this table as it is.
 */
export interface AgencyToolDefinition {
  name: AgencyToolName;
  title: string;
  description: string;
  inputSchema: z.ZodObject;
  outputSchema: z.ZodObject;
  annotations: ToolAnnotations;
  /**
   * The effective permission the tool needs (from AGENCY_TOOL_PERMISSIONS); without it the tool is not listed, and a
   * call is a tool error.
   */
  permission: Permission;
  /**
   * Whether its permission is a write permission: write tools need the `agency:mcp:write` scope
   * (docs/contract.md#tokens: 403 insufficient_scope without it).
   */
  write: boolean;
  operation: OperationId;
}

const READ: ToolAnnotations = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};
const CREATE: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: false,
};
/** An update overwrites the fields it names: destructive for those values, and the same call twice changes nothing more. */
const UPDATE: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: true,
  openWorldHint: false,
};

const PAGING =
  'Returns one page (limit, default 20, at most 100); pass next_cursor as cursor for the next page.';

const TOOLS: readonly Omit<AgencyToolDefinition, 'permission' | 'write'>[] = [
  {
    name: 'get_agency',
    title: 'Get the agency',
    description: 'The agency this connection acts in: name, plan and whether agents may make changes.',
    inputSchema: z.strictObject({}),
    outputSchema: AgencySchema,
    annotations: READ,
    operation: 'agency.get',
  },
  {
    name: 'list_members',
    title: 'List members',
    description: `The active members of the agency with their usernames and roles. ${PAGING}`,
    inputSchema: ListInput,
    outputSchema: listSchema(MemberSchema),
    annotations: READ,
    operation: 'members.list',
  },
  {
    name: 'get_member',
    title: 'Get a member',
    description: 'One active member of the agency by id (mem_...).',
    inputSchema: z.strictObject({ member_id: ids.member }),
    outputSchema: MemberSchema,
    annotations: READ,
    operation: 'members.get',
  },
  {
    name: 'list_clients',
    title: 'List clients',
    description: `The agency's clients. ${PAGING}`,
    inputSchema: ListInput,
    outputSchema: listSchema(ClientSchema),
    annotations: READ,
    operation: 'clients.list',
  },
  {
    name: 'get_client',
    title: 'Get a client',
    description: 'One client by id (cli_...).',
    inputSchema: z.strictObject({ client_id: ids.client }),
    outputSchema: ClientSchema,
    annotations: READ,
    operation: 'clients.get',
  },
  {
    name: 'list_projects',
    title: 'List projects',
    description: `The agency's projects, optionally of one client. ${PAGING}`,
    inputSchema: ListProjectsInput,
    outputSchema: listSchema(ProjectSchema),
    annotations: READ,
    operation: 'projects.list',
  },
  {
    name: 'get_project',
    title: 'Get a project',
    description: 'One project by id (prj_...).',
    inputSchema: z.strictObject({ project_id: ids.project }),
    outputSchema: ProjectSchema,
    annotations: READ,
    operation: 'projects.get',
  },
  {
    name: 'list_tasks',
    title: 'List tasks',
    description: `The agency's tasks, optionally filtered by project, status or assignee. ${PAGING}`,
    inputSchema: ListTasksInput,
    outputSchema: listSchema(TaskSchema),
    annotations: READ,
    operation: 'tasks.list',
  },
  {
    name: 'create_client',
    title: 'Create a client',
    description: 'Adds a client to the agency. Returns the new client.',
    inputSchema: CreateClientInput,
    outputSchema: ClientSchema,
    annotations: CREATE,
    operation: 'clients.create',
  },
  {
    name: 'update_client',
    title: 'Update a client',
    description:
      'Changes the given fields of a client (name, email, status); fields left out stay as they are.',
    inputSchema: UpdateClientFields.extend({ client_id: ids.client }),
    outputSchema: ClientSchema,
    annotations: UPDATE,
    operation: 'clients.update',
  },
  {
    name: 'create_project',
    title: 'Create a project',
    description: 'Adds a project for one of the agency clients. Returns the new project.',
    inputSchema: CreateProjectInput,
    outputSchema: ProjectSchema,
    annotations: CREATE,
    operation: 'projects.create',
  },
  {
    name: 'update_project',
    title: 'Update a project',
    description:
      'Changes the given fields of a project (name, status, due date); fields left out stay as they are.',
    inputSchema: UpdateProjectFields.extend({ project_id: ids.project }),
    outputSchema: ProjectSchema,
    annotations: UPDATE,
    operation: 'projects.update',
  },
  {
    name: 'create_task',
    title: 'Create a task',
    description: 'Adds a task to a project, optionally assigned to a member. Returns the new task.',
    inputSchema: CreateTaskInput,
    outputSchema: TaskSchema,
    annotations: CREATE,
    operation: 'tasks.create',
  },
  {
    name: 'update_task',
    title: 'Update a task',
    description:
      'Changes the given fields of a task (title, status, assignee, due date); fields left out stay.',
    inputSchema: UpdateTaskFields.extend({ task_id: ids.task }),
    outputSchema: TaskSchema,
    annotations: UPDATE,
    operation: 'tasks.update',
  },
  {
    name: 'add_note',
    title: 'Add a note',
    description: 'Adds a note to a client, project or task, authored by the member this connection acts for.',
    inputSchema: AddNoteInput,
    outputSchema: NoteSchema,
    annotations: CREATE,
    operation: 'notes.create',
  },
];

export const AGENCY_TOOLS: readonly AgencyToolDefinition[] = TOOLS.map((tool) => {
  const permission = AGENCY_TOOL_PERMISSIONS[tool.name];
  return { ...tool, permission, write: isWritePermission(permission) };
});

export const WRITE_TOOL_NAMES: ReadonlySet<string> = new Set(
  AGENCY_TOOLS.filter((t) => t.write).map((t) => t.name),
);
