import type { Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundPort } from '../../src/config/config.js';
import { changeRole, removeMember } from '../../src/domain/agencies.js';
import { toEpochSeconds } from '../../src/base/clock.js';
import { revokeConnection } from '../../src/domain/connections.js';
import { inProcessDashboardApi } from '../../src/dashboard-api/plugin.js';
import { startTestServer, type TestServer } from '../helpers/harness.js';
import {
  connectClient,
  expectEachAnsweredAsBug,
  initializeMessage,
  jsonRpcOf,
  type McpVersion,
  modernRequest,
  post,
} from '../helpers/mcp.js';
import { mintAccessToken, signWithServerKey, TOKEN_TYPES } from '../helpers/tokens.js';
import { AGENCY_SECRET, demo, exchange, type Grant, grant, READ_TOOLS, WRITE_TOOLS } from './helpers.js';

let server: TestServer;
let endpoint: string;
let metadataUrl: string;
let challenge401: string;

beforeAll(async () => {
  server = await startTestServer({ env: { AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET } });
  endpoint = `${server.url.agencyMcp}/mcp`;
  metadataUrl = `${server.url.agencyMcp}/.well-known/oauth-protected-resource/mcp`;
  challenge401 = `Bearer resource_metadata="${metadataUrl}", scope="agency:mcp:read"`;
});
afterAll(() => server.close());

const ERAS: McpVersion[] = ['2026-07-28', '2025-11-25'];

const toolNames = async (client: Client) => (await client.listTools()).tools.map((t) => t.name);
const textOf = (r: Awaited<ReturnType<Client['callTool']>>) =>
  (r.content as { type: string; text: string }[]).map((c) => c.text).join('\n');

/** A tools/call over plain fetch on the 2026-07-28 wire; the HTTP status and the JSON-RPC message. */
async function rawCall(token: string, name: string, args: Record<string, unknown> = {}) {
  const res = await modernRequest(endpoint, 'tools/call', { name, arguments: args }, { token });
  return res;
}

describe('discovery (docs/contract.md#the-oauth-flow, RFC 9728)', () => {
  it.each(['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp'])(
    'serves the metadata at %s',
    async (path) => {
      const res = await fetch(`${server.url.agencyMcp}${path}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        resource: endpoint,
        authorization_servers: [server.url.auth],
        scopes_supported: ['mcp:read', 'mcp:write'],
      });
    },
  );
});

describe('discovery behind a proxy that mounts the hosts under a path (RFC 9728 §3.1)', () => {
  it("serves the metadata where the challenge's resource_metadata points, the mount's path included", async () => {
    // The proxy strips `/agency` and `/user`, and forwards the well-known paths outside the mounts as they are.
    const mounted = await startTestServer({
      env: {
        AGENCY_MCP_URL: 'http://127.0.0.1:4102/agency',
        MCP_URL: 'http://127.0.0.1:4101/user',
      },
    });
    try {
      for (const [surface, resource] of [
        ['agency-mcp', 'http://127.0.0.1:4102/agency/mcp'],
        ['mcp', 'http://127.0.0.1:4101/user/mcp'],
      ] as const) {
        const host = `http://127.0.0.1:${boundPort(mounted.config, surface)}`;
        const refused = await fetch(`${host}/mcp`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', host: new URL(resource).host },
          body: '{}',
        });
        expect(refused.status).toBe(401);
        const challenge = refused.headers.get('www-authenticate')!;
        const metadataUrl = new URL(/resource_metadata="([^"]+)"/.exec(challenge)![1]!);
        expect(metadataUrl.pathname).toBe(
          `/.well-known/oauth-protected-resource${new URL(resource).pathname}`,
        );
        const metadata = await fetch(`${host}${metadataUrl.pathname}`, {
          headers: { host: metadataUrl.host },
        });
        expect(metadata.status, metadataUrl.pathname).toBe(200);
        expect(await metadata.json()).toMatchObject({ resource });
      }
    } finally {
      await mounted.close();
    }
  });
});

describe('401 with exactly the docs/contract.md#tokens challenge', () => {
  const expect401 = async (token: string | undefined) => {
    const res = await post(endpoint, initializeMessage('2025-11-25'), token ? { token } : {});
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(challenge401);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body['request_id']).toEqual(expect.any(String));
    for (const version of ERAS)
      await expect(connectClient(endpoint, token ?? 'x.y.z', version)).rejects.toThrow();
  };

  it('no token', () => expect401(undefined));
  it('a malformed token', () => expect401('not-a-jwt'));

  it('an expired token', async () => {
    const g = await grant(server);
    const ctx = server.services.ctx;
    const old = await mintAccessToken(ctx, {
      userId: g.userId,
      audience: endpoint,
      scope: 'agency:mcp:read',
      lifetimeSeconds: -10,
      claims: { cid: g.connection.id, agency_id: g.agencyId, member_id: g.memberId },
    });
    await expect401(old);
  });

  it('a token from another issuer', async () => {
    const g = await grant(server);
    const now = toEpochSeconds(server.clock.now());
    const forged = await signWithServerKey(
      server.services.ctx,
      { typ: TOKEN_TYPES.access },
      {
        iss: 'https://other-issuer.example',
        sub: g.userId,
        aud: endpoint,
        iat: now,
        exp: now + 600,
        jti: 'j',
        client_id: 'c',
        scope: 'agency:mcp:read',
        cid: g.connection.id,
        agency_id: g.agencyId,
        member_id: g.memberId,
      },
    );
    await expect401(forged);
  });

  it('a token for another audience (the user MCP server)', async () => {
    const g = await grant(server, { resource: `${server.url.mcp}/mcp` });
    await expect401(g.token);
  });

  it('a token of a revoked connection', async () => {
    const g = await grant(server);
    const ctx = server.services.ctx;
    await revokeConnection(ctx.db, ctx.clock, g.connection.id, 'disconnected');
    ctx.connectionLiveness?.forget(g.connection.id);
    await expect401(g.token);
  });

  it('an access token not bound to an agency and a member', async () => {
    const g = await grant(server);
    const unbound = await mintAccessToken(server.services.ctx, {
      userId: g.userId,
      audience: endpoint,
      scope: 'agency:mcp:read',
    });
    await expect401(unbound);
  });

  it('a first-party session token and a dashboard API token', async () => {
    const session = await fetch(`${server.url.auth}/api/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'ada', password: 'ada-demo-password' }),
    });
    await expect401(((await session.json()) as { token: string }).token);
    const g = await grant(server);
    const { body } = await exchange(server, g.token);
    await expect401(body['access_token'] as string);
  });
});

describe('403 insufficient_scope for a write with a read-only token (docs/contract.md#the-oauth-flow)', () => {
  it('refuses before the tool runs, naming both scopes', async () => {
    const g = await grant(server, { scopes: ['agency:mcp:read'] });
    const res = await rawCall(g.token, 'create_client', { name: 'Nope' });
    expect(res.status).toBe(403);
    const header = res.headers.get('www-authenticate')!;
    expect(header).toMatch(/^Bearer /);
    expect(header).toContain('error="insufficient_scope"');
    expect(header).toContain('scope="agency:mcp:read agency:mcp:write"');
    expect(header).toContain(`resource_metadata="${metadataUrl}"`);
    const count = await server.services.ctx.db
      .selectFrom('clients')
      .select('id')
      .where('name', '=', 'Nope')
      .execute();
    expect(count).toEqual([]);
  });

  it('lets read tools through on the same token', async () => {
    const g = await grant(server, { scopes: ['agency:mcp:read'] });
    const res = await rawCall(g.token, 'get_agency');
    expect(res.status).toBe(200);
    const msg = (await jsonRpcOf(res)) as { result: { structuredContent: { name: string } } };
    expect(msg.result.structuredContent.name).toBe('Northwind Studio');
  });
});

describe.each(ERAS)('tools through a real SDK client on %s', (version) => {
  let g: Grant;
  let client: Client;
  beforeAll(async () => {
    g = await grant(server);
    client = await connectClient(endpoint, g.token, version);
  });
  afterAll(() => client.close());

  it('names the server 1.0.0 and lists every tool for an owner with write', async () => {
    expect(client.getServerVersion()).toMatchObject({ name: 'svc-agency-mcp', version: '1.0.0' });
    expect(await toolNames(client)).toEqual([...READ_TOOLS, ...WRITE_TOOLS]);
  });

  it('describes each tool with an output schema and annotations', async () => {
    const { tools } = await client.listTools();
    const list = tools.find((t) => t.name === 'list_clients')!;
    expect(list.annotations).toMatchObject({
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
    });
    expect(list.outputSchema?.['required']).toEqual(['object', 'data', 'has_more', 'next_cursor']);
    expect(Object.keys(list.inputSchema.properties ?? {})).toEqual(['limit', 'cursor']);
    const create = tools.find((t) => t.name === 'create_client')!;
    expect(create.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false });
  });

  it('pages list_clients with limit and cursor, with structured content and a short text', async () => {
    const first = await client.callTool({ name: 'list_clients', arguments: { limit: 1 } });
    const page1 = first.structuredContent as {
      data: { name: string }[];
      has_more: boolean;
      next_cursor: string;
    };
    expect(page1.data).toHaveLength(1);
    expect(page1.has_more).toBe(true);
    expect(textOf(first)).toContain(page1.data[0]!.name);
    const second = await client.callTool({
      name: 'list_clients',
      arguments: { limit: 100, cursor: page1.next_cursor },
    });
    const page2 = second.structuredContent as {
      data: { id: string }[];
      has_more: boolean;
      next_cursor: null;
    };
    expect(page2.has_more).toBe(false);
    expect(page2.next_cursor).toBeNull();
    expect(page2.data.length).toBeGreaterThanOrEqual(1);
  });

  it('creates, updates and notes through write tools', async () => {
    const created = await client.callTool({
      name: 'create_client',
      arguments: { name: `Client ${version}` },
    });
    expect(created.isError).toBeFalsy();
    const c = created.structuredContent as { id: string; email: null; status: string };
    expect(c).toMatchObject({ object: 'client', email: null, status: 'active' });
    const updated = await client.callTool({
      name: 'update_client',
      arguments: { client_id: c.id, email: 'a@b.example' },
    });
    expect(updated.structuredContent).toMatchObject({ id: c.id, email: 'a@b.example' });
    const note = await client.callTool({
      name: 'add_note',
      arguments: { subject_type: 'client', subject_id: c.id, body: 'Called them' },
    });
    expect(note.structuredContent).toMatchObject({ object: 'note', author_member_id: g.memberId });
  });

  it('gives what the write tools create ids in the order it was made (new keys at the end of their indexes)', async () => {
    const made = async (name: string, args: Record<string, unknown>) => {
      const r = await client.callTool({ name, arguments: args });
      expect(r.isError).toBeFalsy();
      return (r.structuredContent as { id: string }).id;
    };
    // Four of each: random ids would come out sorted one time in 24.
    const four = async (name: string, args: (i: number) => Record<string, unknown>) => {
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push(await made(name, args(i)));
      return ids;
    };
    const clients = await four('create_client', (i) => ({ name: `Ordered ${i}` }));
    const projects = await four('create_project', (i) => ({ client_id: clients[0], name: `P${i}` }));
    const tasks = await four('create_task', (i) => ({ project_id: projects[0], title: `T${i}` }));
    const notes = await four('add_note', (i) => ({
      subject_type: 'task',
      subject_id: tasks[0],
      body: `N${i}`,
    }));
    for (const ids of [clients, projects, tasks, notes]) {
      expect(ids).toEqual([...ids].sort());
      // Still ids of the documented shape: prefix, underscore, 22 letters and digits.
      for (const id of ids) expect(id).toMatch(/^(cli|prj|tsk|not)_[A-Za-z0-9]{22}$/);
    }
  });

  it('answers invalid arguments with a tool error naming the field', async () => {
    const bad = await client.callTool({ name: 'get_client', arguments: { client_id: 'nope' } });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toContain('client_id');
    const extra = await client.callTool({ name: 'list_clients', arguments: { limit: 5, colour: 'red' } });
    expect(extra.isError).toBe(true);
    expect(textOf(extra)).toContain('colour: unknown field (allowed: limit, cursor)');
    // Each unknown argument named by itself: two in one issue read as a nested path, `colour.size`.
    const two = await client.callTool({ name: 'list_clients', arguments: { colour: 'red', size: 3 } });
    expect(textOf(two)).toContain('colour: unknown field');
    expect(textOf(two)).toContain('size: unknown field');
    expect(textOf(two)).not.toContain('colour.size');
    // The type it takes, without zod's "Invalid input: " before it.
    const wrongType = await client.callTool({ name: 'list_clients', arguments: { limit: 'ten' } });
    expect(textOf(wrongType)).toContain('limit: expected number, received string');
    const missing = await client.callTool({
      name: 'get_client',
      arguments: { client_id: 'cli_doesnotexist' },
    });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toContain('client_id');
  });
});

// A bug in the call to the dashboard API: through the SDK it was a tool error (HTTP 200) carrying the error's own
// words, and nothing was logged; the fast path answered 500 and logged it. Now every path answers as the fast path did.
describe('a tool call that fails: 500 -32603 on every path, the error logged and never shown', () => {
  it('reads and a write, on the fast path and through the SDK, on both wires', async () => {
    const g = await grant(server, { scopes: ['agency:mcp:read', 'agency:mcp:write'] });
    const dashboardApi = inProcessDashboardApi(server.services.ctx)!;
    const realCall = dashboardApi.call.bind(dashboardApi);
    dashboardApi.call = () => Promise.reject(new TypeError('internal detail of the failure'));
    const legacy = (name: string, args: Record<string, unknown>) =>
      post(
        endpoint,
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
        { token: g.token, headers: { 'mcp-protocol-version': '2025-11-25' } },
      );
    const calls = {
      'list_clients on the fast path': () => rawCall(g.token, 'list_clients'),
      'list_clients through the SDK': () => rawCall(g.token, 'list_clients', { limit: 5 }),
      'create_client on the fast path': () => rawCall(g.token, 'create_client', { name: 'Never made' }),
      'list_clients, 2025-11-25': () => legacy('list_clients', { limit: 5 }),
    };
    try {
      await expectEachAnsweredAsBug(calls, server.logs, 'internal detail of the failure');
    } finally {
      dashboardApi.call = realCall;
    }
    expect((await rawCall(g.token, 'list_clients', { limit: 5 })).status).toBe(200);
  });
});

describe('tools/list shows only what the effective permissions allow (docs/contract.md#permissions)', () => {
  const listed = async (g: Grant) => {
    const client = await connectClient(endpoint, g.token, '2026-07-28');
    try {
      return await toolNames(client);
    } finally {
      await client.close();
    }
  };

  it('read scope only: read tools', async () => {
    expect(await listed(await grant(server, { scopes: ['agency:mcp:read'] }))).toEqual(READ_TOOLS);
  });

  it('a viewer with write scope: read tools (the role has no write)', async () => {
    expect(await listed(await grant(server, { username: 'linus' }))).toEqual(READ_TOOLS);
  });

  it('an agency that does not allow agent write: read tools', async () => {
    expect(await listed(await grant(server, { agency: 'Blue Harbor' }))).toEqual(READ_TOOLS);
  });

  it('a narrow ceiling: only the tools inside it', async () => {
    const g = await grant(server, { ceiling: ['agency:read', 'tasks:read', 'tasks:write'] });
    expect(await listed(g)).toEqual(['get_agency', 'list_tasks', 'create_task', 'update_task']);
  });

  it('a call outside the permissions is a tool error naming the missing permission', async () => {
    const g = await grant(server, { ceiling: ['agency:read', 'tasks:read'] });
    const client = await connectClient(endpoint, g.token, '2025-11-25');
    const r = await client.callTool({ name: 'list_clients', arguments: {} });
    expect(r.isError).toBe(true);
    expect(textOf(r)).toContain('clients:read');
    const w = await client.callTool({ name: 'create_task', arguments: { project_id: 'prj_x', title: 't' } });
    expect(textOf(w)).toContain('tasks:write');
    await client.close();
  });
});

describe('changes in the dashboard take effect on the next call (docs/contract.md#revocation)', () => {
  it('a disconnect: the next call is 401', async () => {
    const g = await grant(server);
    expect((await rawCall(g.token, 'get_agency')).status).toBe(200);
    const ctx = server.services.ctx;
    await revokeConnection(ctx.db, ctx.clock, g.connection.id, 'disconnected');
    ctx.connectionLiveness?.forget(g.connection.id);
    const res = await rawCall(g.token, 'get_agency');
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(challenge401);
  });

  it('a disconnect made by another instance: the dashboard API refuses at once, even with a cached exchange', async () => {
    const g = await grant(server);
    expect((await rawCall(g.token, 'get_agency')).status).toBe(200);
    const ctx = server.services.ctx;
    // No forget(): this instance's liveness cache still says live; only the dashboard API's own read sees it, and
    // the answer is the 401 the revoking instance gives, not a tool error.
    await revokeConnection(ctx.db, ctx.clock, g.connection.id, 'disconnected');
    const res = await rawCall(g.token, 'get_agency');
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('resource_metadata=');
    const list = await modernRequest(endpoint, 'tools/list', {}, { token: g.token });
    expect(list.status).toBe(401);
  });

  it('a role change to viewer removes the write tools and refuses writes', async () => {
    const g = await grant(server, { username: 'grace' });
    const client = await connectClient(endpoint, g.token, '2026-07-28');
    expect(await toolNames(client)).toContain('create_client');
    const ctx = server.services.ctx;
    const { member: owner } = await demo(server, 'ada');
    await changeRole(ctx, owner, g.memberId, 'viewer');
    expect(await toolNames(client)).toEqual(READ_TOOLS);
    const r = await client.callTool({ name: 'create_client', arguments: { name: 'After downgrade' } });
    expect(r.isError).toBe(true);
    expect(textOf(r)).toContain('clients:write');
    await client.close();
    await changeRole(ctx, owner, g.memberId, 'manager');
  });

  it('the agency turning agent write off refuses the next write of the same token, and on again allows it', async () => {
    const g = await grant(server, { username: 'grace' });
    const create = async (name: string) => {
      const res = await rawCall(g.token, 'create_client', { name });
      expect(res.status).toBe(200);
      return (await jsonRpcOf(res)) as { result: { isError?: boolean; content: { text: string }[] } };
    };
    expect((await create('Before the switch')).result.isError).toBeFalsy();
    const db = server.services.ctx.db;
    const agency = db.updateTable('agencies').where('id', '=', g.connection.agency_id!);
    await agency.set({ agent_write_enabled: 0 }).execute();
    const refused = (await create('While off')).result;
    expect(refused.isError).toBe(true);
    expect(refused.content[0]!.text).toContain('clients:write');
    await agency.set({ agent_write_enabled: 1 }).execute();
    expect((await create('On again')).result.isError).toBeFalsy();
  });

  it('removing the member ends the connection', async () => {
    const ctx = server.services.ctx;
    const { member: owner } = await demo(server, 'ada');
    const g = await grant(server, { username: 'linus' });
    expect((await rawCall(g.token, 'list_tasks')).status).toBe(200);
    await removeMember(ctx, owner, g.memberId);
    const res = await rawCall(g.token, 'list_tasks');
    expect(res.status).toBe(401);
  });
});

describe('the fast path answers canonical no-argument read calls as the SDK does', () => {
  it.each(ERAS)(
    'list_clients on %s: same result with no arguments (fast) and with limit 20 (SDK)',
    async (wire) => {
      const g = await grant(server);
      const call = async (args: Record<string, unknown>) => {
        const body = {
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: { name: 'list_clients', arguments: args },
        };
        const res =
          wire === '2026-07-28'
            ? await modernRequest(
                endpoint,
                'tools/call',
                { name: 'list_clients', arguments: args },
                { token: g.token },
              )
            : await post(endpoint, body, { token: g.token, headers: { 'mcp-protocol-version': wire } });
        expect(res.status).toBe(200);
        return { type: res.headers.get('content-type'), message: await jsonRpcOf(res) };
      };
      const fast = await call({});
      const sdk = await call({ limit: 20 });
      expect(fast.type).toBe(sdk.type);
      expect({ ...fast.message, id: 0 }).toEqual({ ...sdk.message, id: 0 });
    },
  );
});
