import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { PreparedSql, SyncSql } from '../../src/store/prepared.js';
import { AGENCY_SECRET, grant, projectOf } from '../agency-mcp/helpers.js';
import { connect, token } from '../auth/oauth-helpers.js';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { modernRequest } from '../helpers/mcp.js';
import { type PlanParameter, queryPlan } from '../helpers/plans.js';

/**
 * Every statement the service prepares itself (store/prepared.ts) on its hot paths — the session's liveness behind
 * `GET /me`, the refresh grant and its fallbacks, revocation of a pruned token, the token exchange's grant read, the
 * agency tools' reads and writes — recorded as the service runs them, and each held to finding its rows by key:
 *
 * - on PostgreSQL, under the generic plan a pooled connection may keep for its life (node-postgres names every one),
 *   made with every table it reads at production size and analysed: a sequential scan there is a full read of the
 *   table on every call, for as long as the connection lives (lever 36 fixed the agency's page of clients, whose
 *   generic plan walked every agency's clients);
 * - on SQLite, as the service plans them: without statistics (it never runs ANALYZE), where a SCAN reads a whole
 *   table or index.
 *
 * Recording rather than listing means a statement added to one of these paths is held to the same rule without
 * anyone remembering to add it here.
 */

interface Recorded {
  text: string;
  params: readonly unknown[];
}

let server: TestServer;
const recorded = new Map<string, Recorded>();

/** Wraps the store's prepared statements so that each distinct text is kept with the parameters it first ran with. */
function record(prepared: PreparedSql): void {
  const keep = (text: string, params: readonly unknown[]) => {
    if (!recorded.has(text)) recorded.set(text, { text, params: [...params] });
  };
  const { rows, changes } = prepared;
  prepared.rows = (text, params) => (keep(text, params), rows.call(prepared, text, params)) as never;
  prepared.changes = (text, params) => (keep(text, params), changes.call(prepared, text, params));
  if (prepared.engine === 'sqlite') {
    const { atomically } = prepared;
    prepared.atomically = <T>(fn: (tx: SyncSql) => T): Promise<T> =>
      atomically.call(prepared, (tx: SyncSql) =>
        fn({
          rows: (text, params) => (keep(text, params), tx.rows(text, params)),
          changes: (text, params) => (keep(text, params), tx.changes(text, params)),
        }),
      ) as Promise<T>;
  }
}

beforeAll(async () => {
  server = await startTestServer({ env: { AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET } });
  record(server.services.ctx.store.sql);

  // GET /me with a session token: the session's liveness.
  const { token: session } = await signIn(server);
  const me = await fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${session}` } });
  expect(me.status).toBe(200);

  // The refresh grant: the guarded rotation (PostgreSQL), a request with `scope` (the read, then the compare-and-set),
  // and revocation of a token whose row was pruned (found by its family).
  const { clientId, tokens } = await connect(server, {
    scope: 'agency:mcp:read agency:mcp:write offline_access',
  });
  const rotate = async (refreshToken: string, extra: Record<string, string> = {}) => {
    const { res, body } = await token(server, {
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: clientId,
      ...extra,
    });
    expect(res.status, JSON.stringify(body)).toBe(200);
    return body['refresh_token']!;
  };
  const second = await rotate(tokens['refresh_token']!);
  await rotate(second, { scope: 'agency:mcp:read' });
  const revoked = await fetch(`${server.url.auth}/oauth/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: tokens['refresh_token']!, client_id: clientId }).toString(),
  });
  expect(revoked.status).toBe(200);

  // The agency tools: the token exchange and the per-call grant check, the page of clients, a project read and a task
  // written into it.
  const agency = await grant(server);
  const project = await projectOf(server, agency);
  const call = async (name: string, args: Record<string, unknown>) => {
    const res = await modernRequest(
      `${server.url.agencyMcp}/mcp`,
      'tools/call',
      { name, arguments: args },
      { token: agency.token },
    );
    expect(res.status).toBe(200);
    expect(await res.text()).not.toContain('"isError":true');
  };
  await call('list_clients', {});
  await call('get_project', { project_id: project });
  await call('create_task', { project_id: project, title: 'Plan check' });
  await growTables(server);
});

afterAll(() => server?.close());

/**
 * Every table the recorded statements read, at a size where reading one row by its key is what PostgreSQL's
 * statistics call for: thousands of users, agencies, members, clients, projects, tasks, sessions and connections,
 * and refresh tokens in families of three (the current token, its parent, and a consumed one kept for reuse detection).
 */
async function growTables(s: TestServer): Promise<void> {
  const { db, store } = s.services.ctx;
  // SQLite plans without statistics: only PostgreSQL's plans depend on what the tables hold.
  if (store.engine !== 'postgres') return;
  const n = 3000;
  const statements = [
    sql`INSERT INTO users (id, username, image_url, password_hash, api_version, created_at)
      SELECT 'usr_bulk_' || g, 'bulk_' || g, NULL, 'x', NULL, 0 FROM generate_series(1, ${n}) g`,
    sql`INSERT INTO agencies (id, name, plan, agent_write_enabled, created_at)
      SELECT 'agy_bulk_' || g, 'Bulk ' || g, 'team', 1, 0 FROM generate_series(1, ${n}) g`,
    sql`INSERT INTO members (id, agency_id, user_id, role, status, created_at, removed_at)
      SELECT 'mem_bulk_' || g, 'agy_bulk_' || g, 'usr_bulk_' || g, 'owner', 'active', 0, NULL
      FROM generate_series(1, ${n}) g`,
    sql`INSERT INTO clients (id, agency_id, name, email, status, created_at, updated_at)
      SELECT 'cli_bulk_' || g, 'agy_bulk_' || (g % ${n} + 1), 'Client', NULL, 'active', 0, 0
      FROM generate_series(1, ${4 * n}) g`,
    sql`INSERT INTO projects (id, agency_id, client_id, name, status, due_on, created_at, updated_at)
      SELECT 'prj_bulk_' || g, 'agy_bulk_' || (g % ${n} + 1), 'cli_bulk_' || g, 'Project', 'active', NULL, 0, 0
      FROM generate_series(1, ${4 * n}) g`,
    sql`INSERT INTO tasks (id, agency_id, project_id, title, status, assignee_member_id, due_on, created_at, updated_at)
      SELECT 'tsk_bulk_' || g, 'agy_bulk_' || (g % ${n} + 1), 'prj_bulk_' || (g % ${4 * n} + 1), 'Task', 'todo',
        NULL, NULL, 0, 0
      FROM generate_series(1, ${8 * n}) g`,
    sql`INSERT INTO sessions (id, user_id, created_at, expires_at, revoked_at)
      SELECT 'ses_bulk_' || g, 'usr_bulk_' || (g % ${n} + 1), 0, 9e15, NULL FROM generate_series(1, ${4 * n}) g`,
    sql`INSERT INTO connections (id, user_id, agency_id, member_id, client_id, resource, scopes, ceiling, status,
        created_at, last_used_at, expires_at, revoked_at, revoke_reason)
      SELECT 'con_bulk_' || g, 'usr_bulk_' || (g % ${n} + 1), 'agy_bulk_' || (g % ${n} + 1),
        'mem_bulk_' || (g % ${n} + 1), 'dcr_bulk_' || g, 'https://agency.example/mcp', 'agency:mcp:read', '',
        'active', 0, NULL, 9e15, NULL, NULL
      FROM generate_series(1, ${4 * n}) g`,
    sql`INSERT INTO refresh_tokens (hash, connection_id, parent_hash, successor_salt, scope, issued_at, rotated_at,
        expires_at, family)
      SELECT 'rt_bulk_' || g, 'con_bulk_' || (g / 3 % ${4 * n} + 1), NULL, 's', 'agency:mcp:read', 0,
        CASE WHEN g % 3 = 0 THEN NULL ELSE 0 END, 9e15, 'fam_bulk_' || (g / 3)
      FROM generate_series(1, ${12 * n}) g`,
  ];
  for (const statement of statements) await statement.execute(db);
  await sql`ANALYZE`.execute(db);
}

/** A recorded parameter as the plan helper takes it: its PostgreSQL type and a literal of the value it ran with. */
function planParameter(value: unknown): PlanParameter {
  if (value === null || value === undefined) return ['text', 'NULL'];
  if (typeof value === 'number') return ['bigint', String(value)];
  return ['text', `'${String(value).replaceAll("'", "''")}'`];
}

it('records the statements of every hot path', () => {
  const texts = [...recorded.keys()].join('\n');
  for (const table of [
    'sessions',
    'refresh_tokens',
    'connections',
    'members',
    'clients',
    'projects',
    'tasks',
  ])
    expect(texts).toContain(table);
  // The rotation's own statements and the family lookup of a pruned token.
  expect(texts).toMatch(/UPDATE refresh_tokens/);
  expect(texts).toMatch(/WHERE rt\.family = \$1/);
  expect(texts).toMatch(/INSERT INTO tasks/);
});

it('finds every row by key: no sequential scan under a generic plan, no SCAN without statistics', async () => {
  const { store } = server.services.ctx;
  const plans: [string, string][] = [];
  for (const { text, params } of recorded.values())
    plans.push([text, await queryPlan(store, text, params.map(planParameter))]);
  expect(plans.length).toBeGreaterThanOrEqual(8);
  for (const [text, plan] of plans) {
    if (store.engine === 'postgres') expect(plan, text).not.toContain('Seq Scan');
    else expect(plan, text).not.toMatch(/\bSCAN\b/);
  }
});
