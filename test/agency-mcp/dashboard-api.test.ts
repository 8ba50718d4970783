import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeRole } from '../../src/domain/agencies.js';
import { revokeConnection } from '../../src/domain/connections.js';
import { startTestServer, type TestServer } from '../helpers/harness.js';
import { AGENCY_SECRET, demo, exchange, type Grant, grant } from './helpers.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ env: { AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET } });
});
afterAll(() => server.close());

async function dashboardToken(g: Grant): Promise<string> {
  return (await exchange(server, g.token)).body['access_token'] as string;
}

function api(token: string | undefined, path: string, init: RequestInit = {}) {
  return fetch(`${server.url.auth}/api/agencies${path}`, {
    ...init,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(init.body ? { 'content-type': 'application/json' } : {}),
    },
  });
}

const errorOf = async (res: Response) => ((await res.json()) as { error: Record<string, string> }).error;

describe('the dashboard API (docs/contract.md#rest-api, docs/contract.md#errors)', () => {
  it('accepts the dashboard API token and renders objects with every field', async () => {
    const g = await grant(server);
    const res = await api(await dashboardToken(g), `/${g.agencyId}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      object: 'agency',
      id: g.agencyId,
      name: 'Northwind Studio',
      plan: 'studio',
      agent_write_enabled: true,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
  });

  it('refuses an agent access token, and no token', async () => {
    const g = await grant(server);
    const agent = await api(g.token, `/${g.agencyId}/clients`);
    expect(agent.status).toBe(401);
    expect((await errorOf(agent)).code).toBe('invalid_token');
    const none = await api(undefined, `/${g.agencyId}/clients`);
    expect(none.status).toBe(401);
    expect((await errorOf(none)).code).toBe('missing_token');
  });

  it('pages lists in the list envelope', async () => {
    const g = await grant(server);
    const token = await dashboardToken(g);
    const first = (await (await api(token, `/${g.agencyId}/tasks?limit=2`)).json()) as Record<
      string,
      unknown
    >;
    expect(first).toMatchObject({ object: 'list', has_more: true });
    expect((first['data'] as unknown[]).length).toBe(2);
    const rest = (await (
      await api(token, `/${g.agencyId}/tasks?limit=100&cursor=${first['next_cursor']}`)
    ).json()) as Record<string, unknown>;
    expect(rest).toMatchObject({ has_more: false, next_cursor: null });
    const ids = [...(first['data'] as { id: string }[]), ...(rest['data'] as { id: string }[])].map(
      (t) => t.id,
    );
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('names the bad parameter', async () => {
    const g = await grant(server, { scopes: ['agency:mcp:read', 'agency:mcp:write'] });
    const token = await dashboardToken(g);
    for (const [path, param] of [
      ['/clients?limit=0', 'limit'],
      ['/clients?limit=abc', 'limit'],
      ['/clients?cursor=garbage', 'cursor'],
      ['/clients?colour=red', 'colour'],
      ['/clients/not-an-id', 'client_id'],
    ] as const) {
      const res = await api(token, `/${g.agencyId}${path}`);
      expect(res.status, path).toBe(400);
      expect(await errorOf(res), path).toMatchObject({ type: 'invalid_request_error', param });
    }
    const body = await api(token, `/${g.agencyId}/clients`, {
      method: 'POST',
      body: JSON.stringify({ email: 1 }),
    });
    expect(body.status).toBe(400);
    expect((await errorOf(body)).param).toBe('name');
    // A field the operation does not take is named with those it takes, the path's ids left out.
    const clientId = (
      (await (await api(token, `/${g.agencyId}/clients`)).json()) as { data: { id: string }[] }
    ).data[0]!.id;
    for (const [path, init, message] of [
      ['/clients?colour=red', {}, 'colour: unknown field (allowed: limit, cursor)'],
      [`/clients/${clientId}?colour=red`, {}, 'colour: unknown field (this operation takes none)'],
      [
        `/clients/${clientId}`,
        { method: 'PATCH', body: JSON.stringify({ nmae: 'Acme' }) },
        'nmae: unknown field (allowed: name, email, status)',
      ],
      [
        `/clients/${clientId}`,
        { method: 'PATCH', body: JSON.stringify({ name: 5 }) },
        'name: expected string, received number',
      ],
      // A bound in words, where zod wrote `Too big: expected number to be <=100` (base/issue-text.ts).
      ['/clients?limit=500', {}, 'limit: must be at most 100'],
      [
        `/clients/${clientId}`,
        { method: 'PATCH', body: JSON.stringify({ name: ' ' }) },
        'name: must not be empty',
      ],
    ] as const) {
      const res = await api(token, `/${g.agencyId}${path}`, init);
      expect(res.status, path).toBe(400);
      expect(await errorOf(res), path).toMatchObject({ code: 'invalid_request', message });
    }
    const notJson = await api(token, `/${g.agencyId}/clients`, { method: 'POST', body: '{' });
    expect((await errorOf(notJson)).code).toBe('invalid_json');
  });

  it('takes a due date as a calendar date, YYYY-MM-DD, and says so to a caller that sends another form', async () => {
    const g = await grant(server, { scopes: ['agency:mcp:read', 'agency:mcp:write'] });
    const token = await dashboardToken(g);
    const projectId = (
      (await (await api(token, `/${g.agencyId}/projects`)).json()) as { data: { id: string }[] }
    ).data[0]!.id;
    const setDue = (due_on: unknown) =>
      api(token, `/${g.agencyId}/projects/${projectId}`, {
        method: 'PATCH',
        body: JSON.stringify({ due_on }),
      });
    // What agents send for a date: a word, a timestamp, a day that does not exist, another order.
    for (const due of [
      'tomorrow',
      '2026-12-01T00:00:00Z',
      '2026-02-30',
      '2027-02-29',
      '01/12/2026',
      20261201,
    ]) {
      const res = await setDue(due);
      expect(res.status, String(due)).toBe(400);
      expect(await errorOf(res), String(due)).toMatchObject({
        code: 'invalid_request',
        param: 'due_on',
        message: 'due_on: must be a calendar date, YYYY-MM-DD (null clears it)',
      });
    }
    for (const due of ['2028-02-29', null]) {
      const res = await setDue(due);
      expect(res.status, String(due)).toBe(200);
      expect(((await res.json()) as { due_on: unknown }).due_on).toBe(due);
    }
  });

  it('answers 404 for another agency and for unknown objects', async () => {
    const g = await grant(server);
    const token = await dashboardToken(g);
    const { agency: other } = await demo(server, 'ada', 'Blue Harbor');
    const res = await api(token, `/${other.id}/clients`);
    expect(res.status).toBe(404);
    expect(await errorOf(res)).toMatchObject({ code: 'resource_not_found', param: 'agency_id' });
    const missing = await api(token, `/${g.agencyId}/projects/prj_unknown`);
    expect(await errorOf(missing)).toMatchObject({ code: 'resource_not_found', param: 'project_id' });
  });

  it("creates a task only in one of the agency's own projects, writing nothing otherwise", async () => {
    const ctx = server.services.ctx;
    const g = await grant(server, { scopes: ['agency:mcp:read', 'agency:mcp:write'] });
    const token = await dashboardToken(g);
    const foreign = await ctx.db
      .selectFrom('projects')
      .innerJoin('agencies', 'agencies.id', 'projects.agency_id')
      .select('projects.id')
      .where('agencies.name', '=', 'Blue Harbor')
      .executeTakeFirstOrThrow();
    const own = await ctx.db
      .selectFrom('projects')
      .select('id')
      .where('agency_id', '=', g.agencyId)
      .executeTakeFirstOrThrow();
    const count = async () =>
      Number(
        (
          await ctx.db
            .selectFrom('tasks')
            .select((e) => e.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await count();
    const create = (body: Record<string, unknown>) =>
      api(token, `/${g.agencyId}/tasks`, { method: 'POST', body: JSON.stringify(body) });
    for (const body of [
      { project_id: foreign.id, title: 'Not ours' },
      { project_id: 'prj_unknown', title: 'Nowhere' },
      // A missing project is named before the assignee (who is not a member here either).
      { project_id: foreign.id, title: 'Not ours', assignee_member_id: 'mem_unknown' },
    ]) {
      const res = await create(body);
      expect(res.status).toBe(404);
      expect(await errorOf(res)).toMatchObject({ code: 'resource_not_found', param: 'project_id' });
    }
    expect(await count()).toBe(before);
    const made = await create({ project_id: own.id, title: 'Ours' });
    expect(made.status).toBe(201);
    expect(await made.json()).toMatchObject({ object: 'task', project_id: own.id, title: 'Ours' });
    expect(await count()).toBe(before + 1);
  });

  it('refuses an operation outside the permissions with 403 naming the permission', async () => {
    const g = await grant(server, { scopes: ['agency:mcp:read'] });
    const res = await api(await dashboardToken(g), `/${g.agencyId}/clients`, {
      method: 'POST',
      body: JSON.stringify({ name: 'x' }),
    });
    expect(res.status).toBe(403);
    expect(await errorOf(res)).toMatchObject({
      type: 'permission_error',
      code: 'missing_permission',
      param: 'clients:write',
    });
  });

  it('re-checks the connection and the role on every call', async () => {
    const ctx = server.services.ctx;
    const g = await grant(server, { username: 'grace' });
    const token = await dashboardToken(g);
    const create = () =>
      api(token, `/${g.agencyId}/clients`, { method: 'POST', body: JSON.stringify({ name: 'Role check' }) });
    expect((await create()).status).toBe(201);
    const { member: owner } = await demo(server, 'ada');
    await changeRole(ctx, owner, g.memberId, 'viewer');
    expect((await create()).status).toBe(403);
    const access = (await (await api(token, `/${g.agencyId}/access`)).json()) as { permissions: string[] };
    expect(access.permissions).toEqual([
      'agency:read',
      'members:read',
      'clients:read',
      'projects:read',
      'tasks:read',
    ]);
    await changeRole(ctx, owner, g.memberId, 'manager');
    await revokeConnection(ctx.db, ctx.clock, g.connection.id, 'disconnected');
    const after = await api(token, `/${g.agencyId}`);
    expect(after.status).toBe(401);
    expect((await errorOf(after)).code).toBe('token_revoked');
  });

  it('refuses a dashboard token that expired after it was verified and cached', async () => {
    const g = await grant(server);
    const token = await dashboardToken(g);
    expect((await api(token, `/${g.agencyId}`)).status).toBe(200);
    server.clock.advance(301_000);
    const res = await api(token, `/${g.agencyId}`);
    expect(res.status).toBe(401);
    expect((await errorOf(res)).code).toBe('token_expired');
  });
});
