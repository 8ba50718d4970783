import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endConnection, narrowMemberConnections } from '../../src/domain/connections.js';
import { effectivePermissions, parseList } from '../../src/domain/permissions.js';
import {
  agencyIds,
  authorize,
  Browser,
  connect,
  connectionStatus,
  hidden,
  pkce,
  register,
  token,
} from '../auth/oauth-helpers.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { textOf } from '../helpers/page-text.js';
import { auditTypesOf } from '../helpers/rows.js';

/** The member dashboard: connected apps, members (role change narrows, removal ends), settings, audit events. */

const AGENCY_MCP_URL = 'http://127.0.0.1:4102';
const RESOURCE = `${AGENCY_MCP_URL}/mcp`;
const REDIRECT = 'http://127.0.0.1:9999/callback';
let server: TestServer;
let clientId: string;
let northwind: string;
const browsers: Record<string, Browser> = {};

beforeAll(async () => {
  server = await startTestServer({ env: { AGENCY_MCP_URL } });
  clientId = (
    await register(server, {
      // The client shows it controls planner.example (a redirect URI there), so its client_uri is kept.
      redirect_uris: [REDIRECT, 'https://planner.example/callback'],
      client_name: 'Planner Bot',
      client_uri: 'https://planner.example',
    })
  ).body['client_id'] as string;
  northwind = (await agencyIds(server))['Northwind Studio']!;
  for (const u of ['ada', 'grace', 'linus']) {
    browsers[u] = new Browser(server.url.auth);
    await browsers[u].signIn(u);
  }
});
afterAll(() => server.close());

/** A member page as `who` sees it: Connected apps by default, or an agency page of Northwind (members, settings, history). */
const view = async (who: string, tab?: 'members' | 'settings' | 'history') => {
  const res = await browsers[who]!.get(tab ? `/dashboard/agencies/${northwind}/${tab}` : '/dashboard');
  expect(res.status).toBe(200);
  return res.text();
};
const dashboard = (who: string) => view(who);
/** `who` allows this file's client (read access) and the code comes back, never to be exchanged. */
async function consentWithoutExchange(who: string): Promise<void> {
  const o = { clientId, redirectUri: REDIRECT, scope: 'agency:mcp:read', username: who };
  const back = await authorize(server, browsers[who]!, o, pkce().challenge);
  expect(back.searchParams.get('code')).toBeTruthy();
}

/** The consent page `who` is shown for this file's client in Northwind (through the agency choice when offered). */
async function consentPage(who: string, scope: string): Promise<string> {
  const b = browsers[who]!;
  const q = {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: pkce().challenge,
    code_challenge_method: 'S256',
    resource: RESOURCE,
    scope,
  };
  let html = await (await b.get(`/oauth2/auth?${new URLSearchParams(q)}`)).text();
  if (html.includes('type="radio"')) {
    const choice = new URLSearchParams({ request: hidden(html, 'request'), agency_id: northwind });
    html = await (await b.get(`/oauth2/auth/consent?${choice}`)).text();
  }
  return html;
}
const live = (accessToken: string) =>
  server.services.ctx.verifier.verify(accessToken, RESOURCE, ['oauth']).then(
    () => true,
    () => false,
  );
const connectAs = (who: string, scope = 'agency:mcp:read agency:mcp:write offline_access') =>
  connect(server, { clientId, redirectUri: REDIRECT, browser: browsers[who]!, scope });

/** The connection behind these tokens has ended: its row says why, its access token is refused, its refresh too. */
async function expectEnded(tokens: Record<string, string>, reason: string) {
  expect((await connectionStatus(server, tokens['access_token']!)).revoke_reason).toBe(reason);
  expect(await live(tokens['access_token']!)).toBe(false);
  const refresh = await token(server, {
    grant_type: 'refresh_token',
    refresh_token: tokens['refresh_token']!,
    client_id: clientId,
  });
  expect(refresh.body['error']).toBe('invalid_grant');
}

describe(`dashboard (${ENGINE})`, () => {
  it('sends a visitor without a session to the sign-in page', async () => {
    const res = await new Browser(server.url.auth).get('/dashboard');
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/sign-in?next=%2Fdashboard');
  });

  it('pages are plain HTML: no scripts, CSP with frame-ancestors none, labelled controls', async () => {
    const res = await browsers['ada']!.get('/dashboard');
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("default-src 'none'");
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    const page = await res.text();
    expect(page).not.toMatch(/<script/i);
    for (const [, id] of page.matchAll(/<select id="([^"]+)"/g)) expect(page).toContain(`for="${id}"`);
  });

  it('Connected apps lists the connection (client, host, what it may do, scopes, ceiling, created, last used); Disconnect ends it', async () => {
    const { tokens } = await connectAs('ada');
    expect(await live(tokens['access_token']!)).toBe(true);
    let page = await dashboard('ada');
    expect(page).toContain('Planner Bot');
    expect(page).toContain('planner.example');
    expect(page).toContain('Not verified');
    expect(page).toMatch(/It may: [^<]*create and change clients/);
    expect(page).toMatch(/Connected <time datetime="[^"]+"[^>]*>just now<\/time>/);
    expect(page).toContain('agency:mcp:write');
    expect(page).toContain('clients:write');
    const cid = (await connectionStatus(server, tokens['access_token']!)).id;
    const res = await browsers['ada']!.post(`/dashboard/connections/${cid}/disconnect`, {
      csrf: browsers['ada']!.csrf,
    });
    expect(res.status).toBe(303);
    await expectEnded(tokens, 'disconnected');
    page = textOf(await view('ada', 'history'));
    expect(page).toContain('Planner Bot was disconnected by ada');
    expect(page).toContain('ada connected Planner Bot to read and make changes');
  });

  it("a member cannot disconnect someone else's connection", async () => {
    const { tokens } = await connectAs('grace');
    const cid = (await connectionStatus(server, tokens['access_token']!)).id;
    const res = await browsers['linus']!.post(`/dashboard/connections/${cid}/disconnect`, {
      csrf: browsers['linus']!.csrf,
    });
    expect(res.status).toBe(404);
    expect(await live(tokens['access_token']!)).toBe(true);
  });

  it('Disconnect asks first: a page names the app and what it loses, and only its form disconnects', async () => {
    const { tokens } = await connectAs('grace');
    const cid = (await connectionStatus(server, tokens['access_token']!)).id;
    const apps = await view('grace');
    expect(apps).toContain(`<form method="get" action="/dashboard/connections/${cid}/disconnect">`);
    const ask = await browsers['grace']!.get(`/dashboard/connections/${cid}/disconnect`);
    expect(ask.status).toBe(200);
    const page = await ask.text();
    expect(textOf(page)).toContain('Disconnect Planner Bot?');
    expect(textOf(page)).toContain('Planner Bot will lose access to Northwind Studio at once.');
    expect(page).toMatch(new RegExp(`<form method="post" action="/dashboard/connections/${cid}/disconnect"`));
    expect(await live(tokens['access_token']!)).toBe(true);
    // Someone else's connection, or one already ended, is not asked about.
    expect((await browsers['linus']!.get(`/dashboard/connections/${cid}/disconnect`)).status).toBe(404);
    await browsers['grace']!.post(`/dashboard/connections/${cid}/disconnect`, {
      csrf: browsers['grace']!.csrf,
    });
    expect((await browsers['grace']!.get(`/dashboard/connections/${cid}/disconnect`)).status).toBe(404);
  });

  it('Disconnect without the CSRF token is refused', async () => {
    const { tokens } = await connectAs('grace');
    const cid = (await connectionStatus(server, tokens['access_token']!)).id;
    const res = await browsers['grace']!.post(`/dashboard/connections/${cid}/disconnect`, {});
    expect(res.status).toBe(403);
    expect(await live(tokens['access_token']!)).toBe(true);
  });

  it('Members is managed by owners and admins only', async () => {
    expect(await view('ada', 'members')).toMatch(/Change role/);
    const graceView = await view('grace', 'members');
    expect(graceView).toContain('linus');
    expect(graceView).not.toMatch(/Change role|name="role"|Remove/);
    const page = await view('ada', 'members');
    const linusMember = /action="\/dashboard\/members\/(mem_[A-Za-z0-9]+)\/role"[\s\S]*?Role of linus/.exec(
      page,
    );
    expect(linusMember).not.toBeNull();
    const res = await browsers['grace']!.post(`/dashboard/members/${linusMember![1]}/role`, {
      csrf: browsers['grace']!.csrf,
      role: 'admin',
    });
    expect(res.status).toBe(403);
  });

  it('a role change narrows every connection of that member to ceiling ∩ new role, at once', async () => {
    const { tokens } = await connectAs('grace');
    const before = await connectionStatus(server, tokens['access_token']!);
    expect(parseList(before.ceiling)).toContain('tasks:write');
    const memberId = before.member_id!;
    const res = await browsers['ada']!.post(`/dashboard/members/${memberId}/role`, {
      csrf: browsers['ada']!.csrf,
      role: 'viewer',
    });
    expect(res.status).toBe(303);
    const after = await connectionStatus(server, tokens['access_token']!);
    expect(parseList(after.ceiling)).toEqual([
      'agency:read',
      'members:read',
      'clients:read',
      'projects:read',
      'tasks:read',
    ]);
    expect(after.status).toBe('active');
    // The effective permissions follow the row: no write, although the token still says agency:mcp:write.
    const perms = effectivePermissions({
      ceiling: parseList(after.ceiling),
      role: 'viewer',
      scopes: new Set(parseList(after.scopes)),
      agencyAllowsWrite: true,
    });
    expect(perms.some((p) => p.endsWith(':write'))).toBe(false);
    const history = textOf(await view('ada', 'history'));
    expect(history).toContain("ada changed grace's role from manager to viewer");
    expect(history).toMatch(
      /grace's Planner Bot can no longer create and change clients.*: grace's role became viewer/,
    );
    expect(textOf(await view('grace', 'history'))).toContain(
      "ada changed grace's role from manager to viewer",
    );
    // Put grace back for the other tests.
    await browsers['ada']!.post(`/dashboard/members/${memberId}/role`, {
      csrf: browsers['ada']!.csrf,
      role: 'manager',
    });
  });

  it('removing a member ends every connection of that member', async () => {
    const { tokens } = await connectAs('linus', 'agency:mcp:read offline_access');
    const memberId = (await connectionStatus(server, tokens['access_token']!)).member_id!;
    const res = await browsers['ada']!.post(`/dashboard/members/${memberId}/remove`, {
      csrf: browsers['ada']!.csrf,
    });
    expect(res.status).toBe(303);
    await expectEnded(tokens, 'member_removed');
    const history = textOf(await view('ada', 'history'));
    const removed = history.indexOf('ada removed linus (viewer) from the agency');
    const disconnected = history.indexOf(
      "linus's Planner Bot was disconnected because linus was removed from the agency",
    );
    expect(removed).toBeGreaterThan(-1);
    // Written in one millisecond, listed newest first in the order they were written: the consequence above its cause.
    expect(disconnected).toBeGreaterThan(-1);
    expect(disconnected).toBeLessThan(removed);
    expect(await view('ada', 'members')).not.toMatch(/Role of linus/);
    // linus is no longer a member: no agency to connect.
    const back = await authorize(
      server,
      browsers['linus']!,
      { clientId, redirectUri: REDIRECT },
      pkce().challenge,
    );
    expect(back.searchParams.get('error')).toBe('access_denied');
  });

  it('Remove asks first: a page names the member and what ends, and only its form removes', async () => {
    // On a phone Remove sat a finger's width below Change role, and one tap removed the member for good.
    const members = await view('ada', 'members');
    const grace =
      /action="\/dashboard\/members\/(mem_[A-Za-z0-9]+)\/remove"[^>]*>\s*<button[^>]*Remove grace/.exec(
        members,
      );
    expect(grace).not.toBeNull();
    expect(members).toMatch(/<form method="get" action="\/dashboard\/members\/mem_[A-Za-z0-9]+\/remove">/);
    const memberId = grace![1]!;
    const ask = await browsers['ada']!.get(`/dashboard/members/${memberId}/remove`);
    expect(ask.status).toBe(200);
    const page = await ask.text();
    expect(textOf(page)).toContain('Remove grace from Northwind Studio?');
    expect(textOf(page)).toContain(
      'grace (manager) will lose access to Northwind Studio, and every app grace connected to it will be disconnected at once.',
    );
    expect(page).toMatch(new RegExp(`<form method="post" action="/dashboard/members/${memberId}/remove"`));
    expect(page).toContain(`href="/dashboard/agencies/${northwind}/members"`);
    // Asking removed nothing.
    expect(await view('ada', 'members')).toMatch(/Role of grace/);
    // Only those who may remove the member are asked: grace (a manager) may not, nor may anyone remove themself.
    expect((await browsers['grace']!.get(`/dashboard/members/${memberId}/remove`)).status).toBe(403);
    const own = await server.services.ctx.db
      .selectFrom('members')
      .innerJoin('users', 'users.id', 'members.user_id')
      .select('members.id')
      .where('users.username', '=', 'ada')
      .where('members.agency_id', '=', northwind)
      .executeTakeFirstOrThrow();
    expect((await browsers['ada']!.get(`/dashboard/members/${own.id}/remove`)).status).toBe(403);
    expect((await browsers['ada']!.get('/dashboard/members/mem_nosuchmember/remove')).status).toBe(404);
  });

  it('an owner cannot be removed by themself, and owners are changed only by owners', async () => {
    const page = await view('ada', 'members');
    expect(page).toMatch(/Remove grace/);
    expect(page).not.toMatch(/Remove ada/);
  });

  it('Settings toggles "allow agent write"; consent then stops offering write', async () => {
    let res = await browsers['ada']!.post(`/dashboard/agencies/${northwind}/settings`, {
      csrf: browsers['ada']!.csrf,
    });
    expect(res.status).toBe(303);
    const agency = await server.services.ctx.db
      .selectFrom('agencies')
      .selectAll()
      .where('id', '=', northwind)
      .executeTakeFirstOrThrow();
    expect(agency.agent_write_enabled).toBe(0);
    expect(await view('ada', 'history')).toContain('ada stopped connected apps from making changes');
    const consent = await browsers['ada']!.get(
      `/oauth2/auth?${new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().challenge, code_challenge_method: 'S256', resource: RESOURCE, scope: 'agency:mcp:write' })}`,
    );
    let html = await consent.text();
    if (html.includes('type="radio"')) {
      html = await (
        await browsers['ada']!.get(
          `/oauth2/auth/consent?${new URLSearchParams({ request: hidden(html, 'request'), agency_id: northwind })}`,
        )
      ).text();
    }
    expect(html).toMatch(/does not allow agents to make changes/);
    expect(html).not.toMatch(/value="clients:write"/);
    res = await browsers['ada']!.post(`/dashboard/agencies/${northwind}/settings`, {
      csrf: browsers['ada']!.csrf,
      agent_write_enabled: 'on',
    });
    expect(res.status).toBe(303);
    expect(await view('ada', 'settings')).toMatch(/name="agent_write_enabled" value="on" checked/);
    expect(await view('ada', 'history')).toContain('ada allowed connected apps to make changes');
    expect(textOf(await view('grace', 'settings'))).toContain(
      'Connected apps may make changes in Northwind Studio',
    );
  });

  it('a re-authorization of a connected app reads as an update in the history', async () => {
    const count = (page: string, sentence: string) => page.split(sentence).length - 1;
    const connected = 'ada connected Planner Bot to read';
    const updated = "ada updated Planner Bot's access to read and make changes";
    const before = textOf(await view('ada', 'history'));
    const first = await connectAs('ada', 'agency:mcp:read offline_access');
    const second = await connectAs('ada');
    const cid = (await connectionStatus(server, first.tokens['access_token']!)).id;
    expect((await connectionStatus(server, second.tokens['access_token']!)).id).toBe(cid);
    const after = textOf(await view('ada', 'history'));
    expect(count(after, connected)).toBe(count(before, connected) + 1);
    expect(count(after, updated)).toBe(count(before, updated) + 1);
  });

  it('a consent whose code is never exchanged connects nothing, and the history does not say it did', async () => {
    const count = (page: string) =>
      page.split('ada connected Planner Bot').length + page.split('ada updated Planner Bot').length;
    const before = count(textOf(await view('ada', 'history')));
    expect(before).toBeGreaterThan(2); // the sentences are found: the count below could not stay equal by missing them
    await consentWithoutExchange('ada');
    expect(count(textOf(await view('ada', 'history')))).toBe(before);
  });

  it('a manager may not change settings', async () => {
    const res = await browsers['grace']!.post(`/dashboard/agencies/${northwind}/settings`, {
      csrf: browsers['grace']!.csrf,
    });
    expect(res.status).toBe(403);
  });

  it('an expired connection is neither listed nor offered as one to update: its tokens are refused', async () => {
    const { tokens } = await connectAs('ada');
    const cid = (await connectionStatus(server, tokens['access_token']!)).id;
    const disconnect = `/dashboard/connections/${cid}/disconnect`;
    expect(await dashboard('ada')).toContain(disconnect);
    const now = server.services.ctx.clock.now();
    await server.services.ctx.db
      .updateTable('connections')
      .set({ expires_at: now - 1 })
      .where('id', '=', cid)
      .execute();
    server.services.ctx.connectionLiveness.forget(cid);
    expect(await live(tokens['access_token']!)).toBe(false);
    expect(await dashboard('ada')).not.toContain(disconnect);
    const html = await consentPage('ada', 'agency:mcp:read');
    expect(html).toContain('Connect Planner Bot');
    expect(html).not.toContain('Update access');
  });

  it('Deny is answered access_denied to the client even when the consent could no longer be offered', async () => {
    // linus was removed above: no model of what he could grant exists, and his answer is still a Deny.
    const request = hidden(await consentPage('ada', 'agency:mcp:read'), 'request');
    const linus = browsers['linus']!;
    const res = await linus.post('/oauth2/auth/consent', {
      csrf: linus.csrf,
      request,
      agency_id: northwind,
      decision: 'deny',
    });
    expect(res.status).toBe(303);
    const back = new URL(res.headers.get('location')!);
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
    expect(back.searchParams.get('error')).toBe('access_denied');
  });

  it('a pending consent that is ended or narrowed leaves nothing in the history', async () => {
    await consentWithoutExchange('grace');
    const { db, clock } = server.services.ctx;
    const pending = await db
      .selectFrom('connections')
      .selectAll()
      .where('status', '=', 'pending')
      .where('member_id', 'is not', null)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    expect(await narrowMemberConnections(db, clock, pending.member_id!, 'viewer', null)).not.toContain(
      pending.id,
    );
    expect(await endConnection(server.services.ctx, pending.id, 'disconnected')).toBe(false);
    const row = await db
      .selectFrom('connections')
      .select('status')
      .where('id', '=', pending.id)
      .executeTakeFirst();
    expect(row?.status).toBe('revoked');
    expect(await auditTypesOf(db, pending.id)).toEqual([]);
  });

  it('sign-out ends the browser session', async () => {
    const b = new Browser(server.url.auth);
    await b.signIn('grace');
    const res = await b.post('/sign-out', { csrf: b.csrf });
    expect(res.status).toBe(303);
    expect((await b.get('/dashboard')).status).toBe(303);
  });
});
