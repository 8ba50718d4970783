import { mintConnectionAccessToken } from '../../src/auth/access-token.js';
import { ACCESS_TOKEN_TYPE, AGENCY_MCP_CLIENT_ID } from '../../src/auth/token-exchange.js';
import { activateGrant, type ConnectionRow, createPendingConnection } from '../../src/domain/connections.js';
import { ROLE_PERMISSIONS } from '../../src/domain/permissions.js';
import { afterAll, beforeAll } from 'vitest';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';

export const AGENCY_SECRET = 'test-agency-mcp-secret-0123456789abcdef';

/** Ids of the demo data by name. */
export async function demo(server: TestServer, username = 'ada', agency = 'Northwind Studio') {
  const db = server.services.ctx.db;
  const user = await db
    .selectFrom('users')
    .selectAll()
    .where('username', '=', username)
    .executeTakeFirstOrThrow();
  const agencyRow = await db
    .selectFrom('agencies')
    .selectAll()
    .where('name', '=', agency)
    .executeTakeFirstOrThrow();
  const member = await db
    .selectFrom('members')
    .selectAll()
    .where('user_id', '=', user.id)
    .where('agency_id', '=', agencyRow.id)
    .executeTakeFirstOrThrow();
  return { user, agency: agencyRow, member };
}

let grants = 0;

export interface Grant {
  connection: ConnectionRow;
  token: string;
  memberId: string;
  agencyId: string;
  userId: string;
}

/**
 * An active connection as consent would create it, and an access token minted by the AS's own code for it: the
 * resource-server tests need a real grant without driving the pages (the full flow test drives them).
 */
export async function grant(
  server: TestServer,
  o: {
    username?: string;
    agency?: string;
    scopes?: string[];
    ceiling?: string[];
    resource?: string;
    clientId?: string;
  } = {},
): Promise<Grant> {
  const ctx = server.services.ctx;
  const { user, agency, member } = await demo(server, o.username, o.agency);
  const scopes = o.scopes ?? ['agency:mcp:read', 'agency:mcp:write'];
  const pending = await createPendingConnection(ctx.db, ctx.clock, {
    userId: user.id,
    agencyId: agency.id,
    memberId: member.id,
    // Each grant its own app unless told: one app has one connection, which its newest consent governs.
    clientId: o.clientId ?? `test-agent-${++grants}`,
    resource: o.resource ?? `${server.url.agencyMcp}/mcp`,
    scopes,
    ceiling: o.ceiling ?? [...ROLE_PERMISSIONS[member.role]],
    pendingUntil: ctx.clock.now() + 60_000,
  });
  const connectionId = await activateGrant(ctx.db, ctx.clock, pending.id);
  const connection = await ctx.db
    .selectFrom('connections')
    .selectAll()
    .where('id', '=', connectionId!)
    .executeTakeFirstOrThrow();
  const token = await mintConnectionAccessToken(ctx, connection, scopes.join(' '));
  return { connection, token, memberId: member.id, agencyId: agency.id, userId: user.id };
}

/** The id of one of the grant's agency's projects (the demo seed gives each agency some). */
export async function projectOf(server: TestServer, g: Pick<Grant, 'agencyId'>): Promise<string> {
  const row = await server.services.ctx.db
    .selectFrom('projects')
    .select('id')
    .where('agency_id', '=', g.agencyId)
    .executeTakeFirstOrThrow();
  return row.id;
}

/** A token exchange request as the agency MCP server sends it. */
export async function exchange(
  server: TestServer,
  subjectToken: string,
  o: { secret?: string; clientId?: string; extra?: Record<string, string>; omitAuth?: boolean } = {},
) {
  const credentials = Buffer.from(
    `${o.clientId ?? AGENCY_MCP_CLIENT_ID}:${o.secret ?? AGENCY_SECRET}`,
  ).toString('base64');
  const res = await fetch(`${server.url.auth}/oauth/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(o.omitAuth ? {} : { authorization: `Basic ${credentials}` }),
    },
    body: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: subjectToken,
      subject_token_type: ACCESS_TOKEN_TYPE,
      audience: `${server.url.auth}/api`,
      ...o.extra,
    }).toString(),
  });
  return { res, body: (await res.json()) as Record<string, unknown> };
}

/** The agency MCP tools of docs/contract.md#agency-mcp-server, written out so that a test fails when the server's set changes. */
export const READ_TOOLS = [
  'get_agency',
  'list_members',
  'get_member',
  'list_clients',
  'get_client',
  'list_projects',
  'get_project',
  'list_tasks',
];
export const WRITE_TOOLS = [
  'create_client',
  'update_client',
  'create_project',
  'update_project',
  'create_task',
  'update_task',
  'add_note',
];

/** A bearer token for each MCP host: a session token for the user server, an agency access token for the agency one. */
export async function mcpTokens(server: TestServer): Promise<{ mcp: string; agencyMcp: string }> {
  return { mcp: (await signIn(server)).token, agencyMcp: (await grant(server)).token };
}

/**
 * A server for the enclosing file or describe, and a bearer token for each of its MCP hosts (`mcpTokens`): started
 * before its tests, closed after them. Read `server` and `token` inside tests, once the hooks have run.
 */
export function serverWithMcpTokens(): { server: TestServer; token: { mcp: string; agencyMcp: string } } {
  const env = {} as { server: TestServer; token: { mcp: string; agencyMcp: string } };
  beforeAll(async () => {
    env.server = await startTestServer();
    env.token = await mcpTokens(env.server);
  });
  afterAll(() => env.server?.close());
  return env;
}
