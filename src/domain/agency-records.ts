import type { PreparedSql } from '../store/prepared.js';
import type { ClientsTable, ProjectsTable, TasksTable } from '../store/schema.js';

/**
 * The statements behind the agency tools agents call in a loop (listing clients, creating tasks), prepared once
 * instead of built per call: building a query with Kysely cost about as much as running it (bench/agency-mcp.mjs).
 * Pages are keyset pages on id (docs/contract.md#rest-api); `after` '' starts at the first row, ids never being empty.
 */

const LIST_CLIENTS = `SELECT id, agency_id, name, email, status, created_at, updated_at FROM clients
  WHERE agency_id = $1 AND id > $2 ORDER BY id LIMIT $3`;

export function listClients(
  sql: PreparedSql,
  agencyId: string,
  after: string | undefined,
  take: number,
): Promise<ClientsTable[]> {
  return sql.rows<ClientsTable>(LIST_CLIENTS, [agencyId, after ?? '', take]);
}

const FIND_PROJECT = `SELECT id, agency_id, client_id, name, status, due_on, created_at, updated_at FROM projects
  WHERE agency_id = $1 AND id = $2`;

export async function findProject(
  sql: PreparedSql,
  agencyId: string,
  id: string,
): Promise<ProjectsTable | undefined> {
  return (await sql.rows<ProjectsTable>(FIND_PROJECT, [agencyId, id]))[0];
}

const INSERT_TASK = `INSERT INTO tasks
  (id, agency_id, project_id, title, status, assignee_member_id, due_on, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`;

export async function insertTask(sql: PreparedSql, t: TasksTable): Promise<void> {
  const params = [t.id, t.agency_id, t.project_id, t.title, t.status, t.assignee_member_id, t.due_on];
  await sql.changes(INSERT_TASK, [...params, t.created_at, t.updated_at]);
}
