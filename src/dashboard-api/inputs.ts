import { z } from 'zod';
import { CLIENT_STATUSES, NOTE_SUBJECTS, PROJECT_STATUSES, TASK_STATUSES } from './resources.js';

/**
 * Inputs of the dashboard API operations, one zod schema each, shared with the agency MCP tools (their
 * `inputSchema`). Strict objects: an unknown field is an error naming it, never silently dropped.
 */

const idOf = (prefix: string, what: string) =>
  z
    .string()
    .regex(new RegExp(`^${prefix}_[A-Za-z0-9]{1,64}$`), `must be a ${what} id (${prefix}_...)`)
    .describe(`The ${what} id (${prefix}_...)`);

export const ids = {
  member: idOf('mem', 'member'),
  client: idOf('cli', 'client'),
  project: idOf('prj', 'project'),
  task: idOf('tsk', 'task'),
};

const name = z.string().trim().min(1).max(200);
const email = z.email().max(320).nullable();
// Agents send a word ("tomorrow"), a timestamp or another order for a date: the answer names the one form taken.
const dueOn = z.iso
  .date({ error: 'must be a calendar date, YYYY-MM-DD (null clears it)' })
  .nullable()
  .describe('Due date, YYYY-MM-DD; null clears it');

/** Pagination (docs/contract.md#rest-api): a page size and the opaque cursor of the previous page. */
export const page = {
  limit: z.number().int().min(1).max(100).optional().describe('Items per page, 1..100 (default 20)'),
  cursor: z.string().min(1).max(200).optional().describe('`next_cursor` of the previous page'),
};
export const DEFAULT_PAGE_SIZE = 20;

export const ListInput = z.strictObject({ ...page });
export const ListProjectsInput = z.strictObject({
  ...page,
  client_id: ids.client.optional().describe('Only the projects of this client'),
});
export const ListTasksInput = z.strictObject({
  ...page,
  project_id: ids.project.optional().describe('Only the tasks of this project'),
  status: z.enum(TASK_STATUSES).optional().describe('Only tasks in this status'),
  assignee_member_id: ids.member.optional().describe('Only tasks assigned to this member'),
});

export const CreateClientInput = z.strictObject({
  name: name.describe('Client name'),
  email: email.optional().describe('Contact email'),
  status: z.enum(CLIENT_STATUSES).optional().describe('Defaults to active'),
});
export const UpdateClientFields = z.strictObject({
  name: name.optional(),
  email: email.optional(),
  status: z.enum(CLIENT_STATUSES).optional(),
});

export const CreateProjectInput = z.strictObject({
  client_id: ids.client.describe('The client the project is for'),
  name: name.describe('Project name'),
  status: z.enum(PROJECT_STATUSES).optional().describe('Defaults to active'),
  due_on: dueOn.optional(),
});
export const UpdateProjectFields = z.strictObject({
  name: name.optional(),
  status: z.enum(PROJECT_STATUSES).optional(),
  due_on: dueOn.optional(),
});

export const CreateTaskInput = z.strictObject({
  project_id: ids.project.describe('The project the task belongs to'),
  title: name.describe('Task title'),
  status: z.enum(TASK_STATUSES).optional().describe('Defaults to todo'),
  assignee_member_id: ids.member.nullable().optional().describe('Member to assign; null for nobody'),
  due_on: dueOn.optional(),
});
export const UpdateTaskFields = z.strictObject({
  title: name.optional(),
  status: z.enum(TASK_STATUSES).optional(),
  assignee_member_id: ids.member.nullable().optional(),
  due_on: dueOn.optional(),
});

export const AddNoteInput = z.strictObject({
  subject_type: z.enum(NOTE_SUBJECTS).describe('What the note is about'),
  subject_id: z.string().min(1).max(100).describe('The id of that client, project or task'),
  body: z.string().trim().min(1).max(5000).describe('The note text'),
});
