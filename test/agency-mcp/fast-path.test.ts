import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLE_PERMISSIONS } from '../../src/domain/permissions.js';
import { startTestServer, type TestServer } from '../helpers/harness.js';
import { type McpVersion, modernMeta } from '../helpers/mcp.js';
import { AGENCY_SECRET, grant } from './helpers.js';

/**
 * The agency server's fast path against the SDK, byte for byte: the same calls to a server with the fast path and to
 * one without (MCP_FAST_PATH=off). Ids and times differ between the two databases and are replaced before comparing.
 */

const ENV = { AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET };
let fast: TestServer;
let sdk: TestServer;
beforeAll(async () => {
  [fast, sdk] = await Promise.all([
    startTestServer({ env: ENV }),
    startTestServer({ env: { ...ENV, MCP_FAST_PATH: 'off' } }),
  ]);
});
afterAll(() => Promise.all([fast?.close(), sdk?.close()]));

const ANONYMOUS = [
  [/\b[a-z]{3}_[A-Za-z0-9]{22}\b/g, 'ID'],
  [/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, 'TIME'],
] as const;
const anonymous = (text: string) => ANONYMOUS.reduce((t, [re, by]) => t.replace(re, by), text);

/** The first project of the grant's agency (each server has its own demo ids). */
async function projectOf(server: TestServer, agencyId: string): Promise<string> {
  const row = await server.services.ctx.db
    .selectFrom('projects')
    .select('id')
    .where('agency_id', '=', agencyId)
    .orderBy('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

type Args = (ids: { project: string }) => Record<string, unknown>;

async function callTool(server: TestServer, wire: McpVersion, name: string, args: Args, ceiling?: string[]) {
  const g = await grant(server, ceiling ? { ceiling } : {});
  return callAs(server, g.token, wire, name, args({ project: await projectOf(server, g.agencyId) }));
}

/** One tools/call in the canonical shape of its wire; the status, content type and anonymised body. */
async function callAs(server: TestServer, token: string, wire: McpVersion, name: string, args: object) {
  const params = { name, arguments: args };
  const modern = wire === '2026-07-28';
  const res = await fetch(`${server.url.agencyMcp}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`,
      'mcp-protocol-version': wire,
      ...(modern ? { 'mcp-method': 'tools/call', 'mcp-name': name } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: modern ? { ...params, _meta: modernMeta() } : params,
    }),
  });
  return { status: res.status, type: res.headers.get('content-type'), body: anonymous(await res.text()) };
}

const WITHOUT_CLIENT_WRITE = ROLE_PERMISSIONS.owner.filter((p) => p !== 'clients:write');

describe('write tools: the fast path answers exactly what the SDK answers', () => {
  it.each([
    ['create_task', '2026-07-28', (ids) => ({ project_id: ids.project, title: 'Fast' })],
    ['create_task', '2025-11-25', (ids) => ({ project_id: ids.project, title: 'Fast', status: 'todo' })],
    ['create_client', '2026-07-28', () => ({ name: 'Fast client', email: null })],
    ['add_note', '2025-11-25', (ids) => ({ subject_type: 'project', subject_id: ids.project, body: 'n' })],
    // Refused by the dashboard API: the tool error naming the cause, from either path.
    ['create_task of an unknown project', '2026-07-28', () => ({ project_id: 'prj_unknown', title: 'x' })],
    ['update_task of an unknown task', '2025-11-25', () => ({ task_id: 'tsk_unknown', title: 'x' })],
    // Invalid arguments: left to the SDK on both.
    ['create_task without a title', '2026-07-28', (ids) => ({ project_id: ids.project })],
    [
      'create_task with an unknown field',
      '2026-07-28',
      (ids) => ({ project_id: ids.project, title: 't', x: 1 }),
    ],
  ] as [string, McpVersion, Args][])('%s on %s', async (label, wire, args) => {
    const name = label.split(' ')[0]!;
    const a = await callTool(fast, wire, name, args);
    const b = await callTool(sdk, wire, name, args);
    expect(a.status).toBe(200);
    expect(a).toEqual(b);
  });

  it('a write outside the effective permissions is the same tool error', async () => {
    const args = () => ({ name: 'Not allowed' });
    const a = await callTool(fast, '2026-07-28', 'create_client', args, WITHOUT_CLIENT_WRITE);
    const b = await callTool(sdk, '2026-07-28', 'create_client', args, WITHOUT_CLIENT_WRITE);
    expect(a.body).toContain('clients:write');
    expect(a).toEqual(b);
  });
});

describe('no-argument reads: the fast path answers exactly what the SDK answers', () => {
  // One server: a read with arguments (limit 20, the default) goes to the SDK and lists the same rows.
  it.each([
    ['list_clients', '2026-07-28'],
    ['list_clients', '2025-11-25'],
    ['get_agency', '2026-07-28'],
    ['list_tasks', '2025-11-25'],
  ] as [string, McpVersion][])('%s on %s', async (name, wire) => {
    const { token } = await grant(fast);
    const viaSdk =
      name === 'get_agency' ? await callAs(sdk, (await grant(sdk)).token, wire, name, {}) : undefined;
    const a = await callAs(fast, token, wire, name, {});
    const b = viaSdk ?? (await callAs(fast, token, wire, name, { limit: 20 }));
    expect(a.status).toBe(200);
    expect(a).toEqual(b);
  });
});
