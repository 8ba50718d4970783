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

/**
 * A task is inserted only when its project is the agency's: the check and the write are one statement, so no read
 * transaction comes before the write and nothing can remove the project in between (a deleted project's tasks go with
 * it, ON DELETE CASCADE). On the embedded database the insert joins the group commit of its event-loop turn
 * (store/prepared.ts): concurrent calls share one durable commit. The casts give PostgreSQL the parameters' types,
 * which an INSERT ... SELECT does not infer.
 */
const INSERT_TASK_IN_PROJECT = `INSERT INTO tasks
  (id, agency_id, project_id, title, status, assignee_member_id, due_on, created_at, updated_at)
  SELECT CAST($1 AS TEXT), agency_id, id, CAST($2 AS TEXT), CAST($3 AS TEXT), CAST($4 AS TEXT), CAST($5 AS TEXT),
    CAST($6 AS BIGINT), CAST($7 AS BIGINT)
  FROM projects WHERE agency_id = $8 AND id = $9`;

/** Inserts `t` unless its project is not the agency's (then false, and nothing is written). */
export async function insertTaskInProject(sql: PreparedSql, t: TasksTable): Promise<boolean> {
  const params = [
    t.id,
    t.title,
    t.status,
    t.assignee_member_id,
    t.due_on,
    t.created_at,
    t.updated_at,
    t.agency_id,
    t.project_id,
  ];
  const changed =
    sql.engine === 'sqlite'
      ? await sql.atomically((tx) => tx.changes(INSERT_TASK_IN_PROJECT, params))
      : await sql.changes(INSERT_TASK_IN_PROJECT, params);
  return changed === 1;
}
