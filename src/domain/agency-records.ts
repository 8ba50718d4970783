import type { PreparedSql } from '../store/prepared.js';
import type { ClientsTable, ProjectsTable, TasksTable } from '../store/schema.js';

/**
 * The statements behind the agency tools agents call in a loop (listing clients, creating tasks), prepared once
 * instead of built per call: building a query with Kysely cost about as much as running it (bench/agency-mcp.mjs).
 * Pages are keyset pages on id (docs/contract.md#rest-api); `after` '' starts at the first row, ids never being empty.
 */

/**
 * A keyset page of the agency's clients, by engine. On PostgreSQL, one range of the `(agency_id, id)` index: rows after
 * `(agency, after)` and not past the agency, which is `agency_id = $1 AND id > $2` (a row above `(agency, after)` whose
 * agency is not above the agency's is the agency's), but which only that index can answer. Asked as `agency_id = $1 AND
 * id > $2`, the plan PostgreSQL keeps for a named statement could walk the primary key in id order and filter on the
 * agency: with one agency of 200k clients beside a small one, 25.7 ms to find the small agency's page, against 0.06 ms
 * this way and 0.04 ms for a page deep in the large one (`EXPLAIN ANALYZE` under `plan_cache_mode =
 * force_generic_plan`). SQLite, which the service never ANALYZEs, plans without statistics and reads the plain form
 * from the same index (the equality on its first column is what it looks for); the range form cost it 11.1–11.9 µs
 * against 9.4–9.6 per page of two in a loop.
 */
export const LIST_CLIENTS = {
  sqlite: `SELECT id, agency_id, name, email, status, created_at, updated_at FROM clients
    WHERE agency_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
  postgres: `SELECT id, agency_id, name, email, status, created_at, updated_at FROM clients
    WHERE (agency_id, id) > ($1, $2) AND agency_id <= $1 ORDER BY agency_id, id LIMIT $3`,
} as const;

export function listClients(
  sql: PreparedSql,
  agencyId: string,
  after: string | undefined,
  take: number,
): Promise<ClientsTable[]> {
  return sql.rows<ClientsTable>(LIST_CLIENTS[sql.engine], [agencyId, after ?? '', take]);
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
