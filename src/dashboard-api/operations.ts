import { Buffer } from 'node:buffer';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { findAgency } from '../domain/agencies.js';
import { findProject, insertTaskInProject, listClients } from '../domain/agency-records.js';
import { newOrderedId } from '../base/ids.js';
import { issueText, unknownFieldText } from '../base/issue-text.js';
import type { Permission } from '../domain/permissions.js';
import { ApiError } from '../http/errors.js';
import { assertPermission, type CallerAccess } from './access.js';
import {
  AddNoteInput,
  CreateClientInput,
  CreateProjectInput,
  CreateTaskInput,
  DEFAULT_PAGE_SIZE,
  ids,
  ListInput,
  ListProjectsInput,
  ListTasksInput,
  UpdateClientFields,
  UpdateProjectFields,
  UpdateTaskFields,
} from './inputs.js';
import {
  type List,
  renderAgency,
  renderClient,
  renderMember,
  renderNote,
  renderProject,
  renderTask,
} from './resources.js';

/**
 * The dashboard API's operations, independent of HTTP: each names its method and path under
 * `/api/agencies/{agency_id}`, the permission it needs (docs/contract.md#permissions), its input schema (path ids, query or body
 * fields in one object) and what it does. The Fastify routes and the agency MCP server's in-process gateway run the
 * same table, so both see the same checks and the same objects.
 */
export interface Operation {
  method: 'GET' | 'POST' | 'PATCH';
  /** Below `/api/agencies/:agency_id`; `:name` segments are ids merged into the input. */
  path: string;
  permission: Permission | undefined;
  input: z.ZodType<Record<string, unknown>>;
  status?: 200 | 201;
  run(ctx: AppContext, access: CallerAccess, input: Record<string, unknown>): Promise<object>;
}

const NO_INPUT = z.strictObject({});

/** Runs an operation for a caller: permission, then input, then the work (docs/contract.md#errors errors name the cause). */
export async function invoke(
  ctx: AppContext,
  op: Operation,
  access: CallerAccess,
  raw: Record<string, unknown>,
): Promise<object> {
  if (op.permission) assertPermission(access, op.permission);
  return op.run(ctx, access, parseInput(op, raw));
}

/**
 * zod → `invalid_request` naming the first bad field in `param` and in the message. A field the operation does not
 * take is named with the ones it does, as a caller reads it: the query's or the body's, not the path's ids.
 */
function parseInput(op: Operation, raw: unknown): Record<string, unknown> {
  const parsed = op.input.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const unknownKey = issue.code === 'unrecognized_keys' ? issue.keys[0] : undefined;
  const param = unknownKey ?? (issue.path.length ? issue.path.map(String).join('.') : undefined);
  const message = unknownKey
    ? `${unknownKey}: ${unknownField(op)}`
    : param
      ? `${param}: ${issueText(issue.message)}`
      : issueText(issue.message);
  throw new ApiError('invalid_request', message, param ? { param } : {});
}

/** "unknown field" with the fields `op` takes besides its path's ids (they come from the path, whatever is sent). */
function unknownField(op: Operation): string {
  const fromPath = new Set(Array.from(op.path.matchAll(/:(\w+)/g), (m) => m[1]));
  const fields = op.input instanceof z.ZodObject ? Object.keys(op.input.shape) : [];
  return unknownFieldText(
    fields.filter((field) => !fromPath.has(field)),
    'this operation takes none',
  );
}

const notFound = (what: string, id: unknown, param: string) =>
  new ApiError('resource_not_found', `No ${what} ${String(id)} in this agency`, { param });

// --- pagination (docs/contract.md#rest-api list envelope; keyset on id, so pages stay stable while rows are added) ---

const encodeCursor = (lastId: string) => Buffer.from(JSON.stringify({ after: lastId })).toString('base64url');

function decodeCursor(cursor: unknown): string | undefined {
  if (cursor === undefined) return undefined;
  try {
    const { after } = JSON.parse(Buffer.from(String(cursor), 'base64url').toString('utf8')) as {
      after?: unknown;
    };
    if (typeof after === 'string' && /^[a-z]{3}_[A-Za-z0-9]{1,64}$/.test(after)) return after;
  } catch {
    // Not base64url JSON: the same answer as any other foreign cursor, below.
  }
  throw new ApiError('invalid_request', 'cursor: not a cursor this API returned', { param: 'cursor' });
}

async function pageOf<R extends { id: string }, T>(
  input: Record<string, unknown>,
  fetchRows: (after: string | undefined, take: number) => Promise<R[]>,
  render: (row: R) => T,
): Promise<List<T>> {
  const limit = (input['limit'] as number | undefined) ?? DEFAULT_PAGE_SIZE;
  const rows = await fetchRows(decodeCursor(input['cursor']), limit + 1);
  const hasMore = rows.length > limit;
  const data = rows.slice(0, limit);
  return {
    object: 'list',
    data: data.map(render),
    has_more: hasMore,
    next_cursor: hasMore ? encodeCursor(data[data.length - 1]!.id) : null,
  };
}

// --- lookups scoped to the caller's agency ---

const clientRow = (ctx: AppContext, agencyId: string, id: unknown) =>
  ctx.db
    .selectFrom('clients')
    .selectAll()
    .where('agency_id', '=', agencyId)
    .where('id', '=', String(id))
    .executeTakeFirst();
const projectRow = (ctx: AppContext, agencyId: string, id: unknown) =>
  findProject(ctx.store.sql, agencyId, String(id));
const taskRow = (ctx: AppContext, agencyId: string, id: unknown) =>
  ctx.db
    .selectFrom('tasks')
    .selectAll()
    .where('agency_id', '=', agencyId)
    .where('id', '=', String(id))
    .executeTakeFirst();

function membersQuery(ctx: AppContext, agencyId: string) {
  return ctx.db
    .selectFrom('members')
    .innerJoin('users', 'users.id', 'members.user_id')
    .select([
      'members.id',
      'members.agency_id',
      'members.user_id',
      'members.role',
      'members.created_at',
      'users.username',
    ])
    .where('members.agency_id', '=', agencyId)
    .where('members.status', '=', 'active');
}

async function assertAssignable(ctx: AppContext, agencyId: string, memberId: unknown): Promise<void> {
  if (memberId === undefined || memberId === null) return;
  const found = await membersQuery(ctx, agencyId)
    .where('members.id', '=', String(memberId))
    .executeTakeFirst();
  if (!found) {
    throw new ApiError('invalid_request', `assignee_member_id: no active member ${String(memberId)} here`, {
      param: 'assignee_member_id',
    });
  }
}

/** The fields an update sets; at least one (an empty PATCH is a client mistake worth naming). */
function changes(input: Record<string, unknown>, idField: string): Record<string, unknown> {
  const set = Object.fromEntries(Object.entries(input).filter(([k, v]) => k !== idField && v !== undefined));
  if (Object.keys(set).length === 0) {
    throw new ApiError('invalid_request', 'Send at least one field to change');
  }
  return set;
}

// --- the table ---

export const OPERATIONS = {
  'agency.get': {
    method: 'GET',
    path: '',
    permission: 'agency:read',
    input: NO_INPUT,
    async run(ctx, access) {
      const row = await findAgency(ctx.db, access.agencyId);
      if (!row) throw notFound('agency', access.agencyId, 'agency_id');
      return renderAgency(row);
    },
  },
  'access.get': {
    method: 'GET',
    path: '/access',
    permission: undefined,
    input: NO_INPUT,
    async run(_ctx, access) {
      return {
        object: 'access',
        id: access.connectionId ?? access.memberId,
        agency_id: access.agencyId,
        member_id: access.memberId,
        role: access.role,
        permissions: [...access.permissions],
      };
    },
  },
  'members.list': {
    method: 'GET',
    path: '/members',
    permission: 'members:read',
    input: ListInput,
    run: (ctx, access, input) =>
      pageOf(
        input,
        (after, take) => {
          let q = membersQuery(ctx, access.agencyId);
          if (after) q = q.where('members.id', '>', after);
          return q.orderBy('members.id').limit(take).execute();
        },
        renderMember,
      ),
  },
  'members.get': {
    method: 'GET',
    path: '/members/:member_id',
    permission: 'members:read',
    input: z.strictObject({ member_id: ids.member }),
    async run(ctx, access, input) {
      const row = await membersQuery(ctx, access.agencyId)
        .where('members.id', '=', String(input['member_id']))
        .executeTakeFirst();
      if (!row) throw notFound('member', input['member_id'], 'member_id');
      return renderMember(row);
    },
  },
  'clients.list': {
    method: 'GET',
    path: '/clients',
    permission: 'clients:read',
    input: ListInput,
    run: (ctx, access, input) =>
      pageOf(input, (after, take) => listClients(ctx.store.sql, access.agencyId, after, take), renderClient),
  },
  'clients.get': {
    method: 'GET',
    path: '/clients/:client_id',
    permission: 'clients:read',
    input: z.strictObject({ client_id: ids.client }),
    async run(ctx, access, input) {
      const row = await clientRow(ctx, access.agencyId, input['client_id']);
      if (!row) throw notFound('client', input['client_id'], 'client_id');
      return renderClient(row);
    },
  },
  'clients.create': {
    method: 'POST',
    path: '/clients',
    permission: 'clients:write',
    input: CreateClientInput,
    status: 201,
    async run(ctx, access, input) {
      const now = ctx.clock.now();
      const row = {
        id: newOrderedId('cli', now),
        agency_id: access.agencyId,
        name: String(input['name']),
        email: (input['email'] as string | null | undefined) ?? null,
        status: (input['status'] as string | undefined) ?? 'active',
        created_at: now,
        updated_at: now,
      };
      await ctx.db.insertInto('clients').values(row).execute();
      return renderClient(row);
    },
  },
  'clients.update': {
    method: 'PATCH',
    path: '/clients/:client_id',
    permission: 'clients:write',
    input: UpdateClientFields.extend({ client_id: ids.client }),
    async run(ctx, access, input) {
      const set = changes(input, 'client_id');
      if (!(await clientRow(ctx, access.agencyId, input['client_id'])))
        throw notFound('client', input['client_id'], 'client_id');
      await ctx.db
        .updateTable('clients')
        .set({ ...set, updated_at: ctx.clock.now() })
        .where('agency_id', '=', access.agencyId)
        .where('id', '=', String(input['client_id']))
        .execute();
      return renderClient((await clientRow(ctx, access.agencyId, input['client_id']))!);
    },
  },
  'projects.list': {
    method: 'GET',
    path: '/projects',
    permission: 'projects:read',
    input: ListProjectsInput,
    run: (ctx, access, input) =>
      pageOf(
        input,
        (after, take) => {
          let q = ctx.db.selectFrom('projects').selectAll().where('agency_id', '=', access.agencyId);
          if (input['client_id']) q = q.where('client_id', '=', String(input['client_id']));
          if (after) q = q.where('id', '>', after);
          return q.orderBy('id').limit(take).execute();
        },
        renderProject,
      ),
  },
  'projects.get': {
    method: 'GET',
    path: '/projects/:project_id',
    permission: 'projects:read',
    input: z.strictObject({ project_id: ids.project }),
    async run(ctx, access, input) {
      const row = await projectRow(ctx, access.agencyId, input['project_id']);
      if (!row) throw notFound('project', input['project_id'], 'project_id');
      return renderProject(row);
    },
  },
  'projects.create': {
    method: 'POST',
    path: '/projects',
    permission: 'projects:write',
    input: CreateProjectInput,
    status: 201,
    async run(ctx, access, input) {
      if (!(await clientRow(ctx, access.agencyId, input['client_id'])))
        throw notFound('client', input['client_id'], 'client_id');
      const now = ctx.clock.now();
      const row = {
        id: newOrderedId('prj', now),
        agency_id: access.agencyId,
        client_id: String(input['client_id']),
        name: String(input['name']),
        status: (input['status'] as string | undefined) ?? 'active',
        due_on: (input['due_on'] as string | null | undefined) ?? null,
        created_at: now,
        updated_at: now,
      };
      await ctx.db.insertInto('projects').values(row).execute();
      return renderProject(row);
    },
  },
  'projects.update': {
    method: 'PATCH',
    path: '/projects/:project_id',
    permission: 'projects:write',
    input: UpdateProjectFields.extend({ project_id: ids.project }),
    async run(ctx, access, input) {
      const set = changes(input, 'project_id');
      if (!(await projectRow(ctx, access.agencyId, input['project_id'])))
        throw notFound('project', input['project_id'], 'project_id');
      await ctx.db
        .updateTable('projects')
        .set({ ...set, updated_at: ctx.clock.now() })
        .where('agency_id', '=', access.agencyId)
        .where('id', '=', String(input['project_id']))
        .execute();
      return renderProject((await projectRow(ctx, access.agencyId, input['project_id']))!);
    },
  },
  'tasks.list': {
    method: 'GET',
    path: '/tasks',
    permission: 'tasks:read',
    input: ListTasksInput,
    run: (ctx, access, input) =>
      pageOf(
        input,
        (after, take) => {
          let q = ctx.db.selectFrom('tasks').selectAll().where('agency_id', '=', access.agencyId);
          if (input['project_id']) q = q.where('project_id', '=', String(input['project_id']));
          if (input['status']) q = q.where('status', '=', String(input['status']));
          if (input['assignee_member_id'])
            q = q.where('assignee_member_id', '=', String(input['assignee_member_id']));
          if (after) q = q.where('id', '>', after);
          return q.orderBy('id').limit(take).execute();
        },
        renderTask,
      ),
  },
  'tasks.get': {
    method: 'GET',
    path: '/tasks/:task_id',
    permission: 'tasks:read',
    input: z.strictObject({ task_id: ids.task }),
    async run(ctx, access, input) {
      const row = await taskRow(ctx, access.agencyId, input['task_id']);
      if (!row) throw notFound('task', input['task_id'], 'task_id');
      return renderTask(row);
    },
  },
  'tasks.create': {
    method: 'POST',
    path: '/tasks',
    permission: 'tasks:write',
    input: CreateTaskInput,
    status: 201,
    async run(ctx, access, input) {
      // A missing project is reported before a bad assignee, so the project is read first when there is one to check.
      const assignee = input['assignee_member_id'];
      if (assignee !== undefined && assignee !== null) {
        if (!(await projectRow(ctx, access.agencyId, input['project_id'])))
          throw notFound('project', input['project_id'], 'project_id');
        await assertAssignable(ctx, access.agencyId, assignee);
      }
      const now = ctx.clock.now();
      const row = {
        id: newOrderedId('tsk', now),
        agency_id: access.agencyId,
        project_id: String(input['project_id']),
        title: String(input['title']),
        status: (input['status'] as string | undefined) ?? 'todo',
        assignee_member_id: (assignee as string | null | undefined) ?? null,
        due_on: (input['due_on'] as string | null | undefined) ?? null,
        created_at: now,
        updated_at: now,
      };
      if (!(await insertTaskInProject(ctx.store.sql, row)))
        throw notFound('project', input['project_id'], 'project_id');
      return renderTask(row);
    },
  },
  'tasks.update': {
    method: 'PATCH',
    path: '/tasks/:task_id',
    permission: 'tasks:write',
    input: UpdateTaskFields.extend({ task_id: ids.task }),
    async run(ctx, access, input) {
      const set = changes(input, 'task_id');
      if (!(await taskRow(ctx, access.agencyId, input['task_id'])))
        throw notFound('task', input['task_id'], 'task_id');
      await assertAssignable(ctx, access.agencyId, input['assignee_member_id']);
      await ctx.db
        .updateTable('tasks')
        .set({ ...set, updated_at: ctx.clock.now() })
        .where('agency_id', '=', access.agencyId)
        .where('id', '=', String(input['task_id']))
        .execute();
      return renderTask((await taskRow(ctx, access.agencyId, input['task_id']))!);
    },
  },
  'notes.create': {
    method: 'POST',
    path: '/notes',
    permission: 'notes:write',
    input: AddNoteInput,
    status: 201,
    async run(ctx, access, input) {
      const subjectType = input['subject_type'] as 'client' | 'project' | 'task';
      const find = { client: clientRow, project: projectRow, task: taskRow }[subjectType];
      if (!(await find(ctx, access.agencyId, input['subject_id'])))
        throw notFound(subjectType, input['subject_id'], 'subject_id');
      const now = ctx.clock.now();
      const row = {
        id: newOrderedId('not', now),
        agency_id: access.agencyId,
        subject_type: subjectType,
        subject_id: String(input['subject_id']),
        author_member_id: access.memberId,
        body: String(input['body']),
        created_at: now,
      };
      await ctx.db.insertInto('notes').values(row).execute();
      return renderNote(row);
    },
  },
} satisfies Record<string, Operation>;

export type OperationId = keyof typeof OPERATIONS;
