import { z } from 'zod';
import { toRfc3339 } from '../base/clock.js';
import { PERMISSIONS, ROLES } from '../domain/permissions.js';
import type {
  AgenciesTable,
  ClientsTable,
  MembersTable,
  NotesTable,
  ProjectsTable,
  TasksTable,
} from '../store/schema.js';

/**
 * The objects of the dashboard API in the REST conventions of docs/contract.md#rest-api: `object` and `id` first, snake_case, every
 * field present (null when empty), RFC 3339 times, lists in the `list` envelope. One zod schema per object documents
 * the API and is the `outputSchema` of the agency MCP tools that return it.
 */

const time = z.iso.datetime({ offset: true }).describe('RFC 3339 time');
const date = z.iso.date().describe('Calendar date, YYYY-MM-DD');

export const CLIENT_STATUSES = ['active', 'paused', 'archived'] as const;
export const PROJECT_STATUSES = ['planned', 'active', 'on_hold', 'completed', 'archived'] as const;
export const TASK_STATUSES = ['todo', 'in_progress', 'blocked', 'done'] as const;
export const NOTE_SUBJECTS = ['client', 'project', 'task'] as const;

export const AgencySchema = z.object({
  object: z.literal('agency'),
  id: z.string(),
  name: z.string(),
  plan: z.string(),
  agent_write_enabled: z.boolean().describe('Whether the account lets agents make changes'),
  created_at: time,
});

export const MemberSchema = z.object({
  object: z.literal('member'),
  id: z.string(),
  agency_id: z.string(),
  user_id: z.string(),
  username: z.string(),
  role: z.enum(ROLES),
  created_at: time,
});

export const ClientSchema = z.object({
  object: z.literal('client'),
  id: z.string(),
  agency_id: z.string(),
  name: z.string(),
  email: z.string().nullable(),
  status: z.string(),
  created_at: time,
  updated_at: time,
});

export const ProjectSchema = z.object({
  object: z.literal('project'),
  id: z.string(),
  agency_id: z.string(),
  client_id: z.string(),
  name: z.string(),
  status: z.string(),
  due_on: date.nullable(),
  created_at: time,
  updated_at: time,
});

export const TaskSchema = z.object({
  object: z.literal('task'),
  id: z.string(),
  agency_id: z.string(),
  project_id: z.string(),
  title: z.string(),
  status: z.string(),
  assignee_member_id: z.string().nullable(),
  due_on: date.nullable(),
  created_at: time,
  updated_at: time,
});

export const NoteSchema = z.object({
  object: z.literal('note'),
  id: z.string(),
  agency_id: z.string(),
  subject_type: z.enum(NOTE_SUBJECTS),
  subject_id: z.string(),
  author_member_id: z.string(),
  body: z.string(),
  created_at: time,
});

/** What the caller may do here now (docs/contract.md#connections); `id` is the connection, or the member for a web session. */
export const AccessSchema = z.object({
  object: z.literal('access'),
  id: z.string(),
  agency_id: z.string(),
  member_id: z.string(),
  role: z.enum(ROLES),
  permissions: z.array(z.enum(PERMISSIONS)),
});

/** docs/contract.md#rest-api list envelope; `next_cursor` is null exactly when `has_more` is false. */
export function listSchema<T extends z.ZodType>(item: T) {
  return z.object({
    object: z.literal('list'),
    data: z.array(item),
    has_more: z.boolean(),
    next_cursor: z
      .string()
      .nullable()
      .describe('Pass as `cursor` to get the next page; null on the last page'),
  });
}

export type Agency = z.infer<typeof AgencySchema>;
export type Member = z.infer<typeof MemberSchema>;
export type Client = z.infer<typeof ClientSchema>;
export type Project = z.infer<typeof ProjectSchema>;
export type Task = z.infer<typeof TaskSchema>;
export type Note = z.infer<typeof NoteSchema>;
export type Access = z.infer<typeof AccessSchema>;
export interface List<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

export const renderAgency = (r: AgenciesTable): Agency => ({
  object: 'agency',
  id: r.id,
  name: r.name,
  plan: r.plan,
  agent_write_enabled: r.agent_write_enabled === 1,
  created_at: toRfc3339(r.created_at),
});

export const renderMember = (
  r: Pick<MembersTable, 'id' | 'agency_id' | 'user_id' | 'role' | 'created_at'> & {
    username: string;
  },
): Member => ({
  object: 'member',
  id: r.id,
  agency_id: r.agency_id,
  user_id: r.user_id,
  username: r.username,
  role: r.role,
  created_at: toRfc3339(r.created_at),
});

export const renderClient = (r: ClientsTable): Client => ({
  object: 'client',
  id: r.id,
  agency_id: r.agency_id,
  name: r.name,
  email: r.email,
  status: r.status,
  created_at: toRfc3339(r.created_at),
  updated_at: toRfc3339(r.updated_at),
});

export const renderProject = (r: ProjectsTable): Project => ({
  object: 'project',
  id: r.id,
  agency_id: r.agency_id,
  client_id: r.client_id,
  name: r.name,
  status: r.status,
  due_on: r.due_on,
  created_at: toRfc3339(r.created_at),
  updated_at: toRfc3339(r.updated_at),
});

export const renderTask = (r: TasksTable): Task => ({
  object: 'task',
  id: r.id,
  agency_id: r.agency_id,
  project_id: r.project_id,
  title: r.title,
  status: r.status,
  assignee_member_id: r.assignee_member_id,
  due_on: r.due_on,
  created_at: toRfc3339(r.created_at),
  updated_at: toRfc3339(r.updated_at),
});

export const renderNote = (r: NotesTable): Note => ({
  object: 'note',
  id: r.id,
  agency_id: r.agency_id,
  subject_type: r.subject_type as Note['subject_type'],
  subject_id: r.subject_id,
  author_member_id: r.author_member_id,
  body: r.body,
  created_at: toRfc3339(r.created_at),
});
