import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type ClientRegistry, clientHost } from '../auth/clients/registry.js';
import type { AppContext } from '../context.js';
import {
  activeMembership,
  changeRole,
  listAgencyMembers,
  listMemberships,
  MembershipError,
  type MembershipView,
  removeMember,
  setAgentWrite,
} from '../domain/agencies.js';
import { type AuditRow, listAuditEvents } from '../domain/audit.js';
import { toRfc3339 } from '../base/clock.js';
import {
  type ConnectionRow,
  endConnection,
  findConnection,
  listMemberConnections,
  listUserLevelConnections,
} from '../domain/connections.js';
import { isRole, parseList, ROLES, roleAllows } from '../domain/permissions.js';
import { findUserById } from '../domain/users.js';
import { markup, PageError } from '../web/html.js';
import { sendPage } from '../web/page-scope.js';
import { checkCsrf, csrfToken, currentUser, type WebUser } from './web-session.js';

/**
 * The member dashboard: per agency, Settings → Connected apps (Disconnect), Members (owner/admin: change a role,
 * which narrows that member's connections; remove, which ends them), Settings (owner/admin: allow agent write),
 * and the audit events these write.
 */
export async function dashboardRoutes(
  app: FastifyInstance,
  ctx: AppContext,
  registry: ClientRegistry,
): Promise<void> {
  async function requireUser(request: FastifyRequest, reply: FastifyReply): Promise<WebUser | undefined> {
    const user = await currentUser(ctx, request);
    if (!user) {
      void reply
        .code(303)
        .header('location', `/sign-in?next=${encodeURIComponent(request.url)}`)
        .send();
      return undefined;
    }
    return user;
  }

  const fmt = (ms: number | null) =>
    ms === null ? 'never' : toRfc3339(ms).replace('T', ' ').slice(0, 16) + ' UTC';

  app.get('/', async (_request, reply) => reply.code(303).header('location', '/dashboard').send());

  app.get('/dashboard', async (request, reply) => {
    const user = await requireUser(request, reply);
    if (!user) return reply;
    const memberships = await listMemberships(ctx.db, user.userId);
    const wanted = (request.query as Record<string, unknown>)['agency'];
    const current = memberships.find((m) => m.agency.id === wanted) ?? memberships[0];
    const csrf = csrfToken(ctx, request, reply);
    const username = (await findUserById(ctx.db, user.userId))?.username ?? '';
    const nav = { signedInAs: username, csrf };
    const notice = (request.query as Record<string, unknown>)['done'];
    if (!current) {
      return sendPage(
        reply,
        200,
        'Dashboard',
        markup`<p>You are not a member of any agency yet.</p>${await accountApps(user.userId, csrf)}`,
        nav,
      );
    }
    return sendPage(
      reply,
      200,
      `${current.agency.name}`,
      markup`${typeof notice === 'string' && NOTICES[notice] ? markup`<p class="warning" role="status">${NOTICES[notice]}</p>` : ''}
${
  memberships.length > 1
    ? markup`<form method="get" action="/dashboard"><label for="agency">Agency</label>
<select id="agency" name="agency">${memberships.map((m) => markup`<option value="${m.agency.id}"${m.agency.id === current.agency.id ? markup` selected` : ''}>${m.agency.name}</option>`)}</select>
<button type="submit">Show</button></form>`
    : ''
}
<p class="muted">Your role: ${current.member.role}. Plan: ${current.agency.plan}.</p>
${await connectedApps(current, csrf)}
${await accountApps(user.userId, csrf)}
${roleAllows(current.member.role, 'members:manage') ? await membersSection(current, csrf) : ''}
${roleAllows(current.member.role, 'settings:manage') ? settingsSection(current, csrf) : ''}
${await auditSection(current)}`,
      nav,
    );
  });

  async function connectedApps(m: MembershipView, csrf: string) {
    const connections = await listMemberConnections(ctx.db, m.member.id);
    return markup`<h2 id="connected-apps">Settings → Connected apps</h2>
${await appsTable(connections, csrf, `No applications are connected to ${m.agency.name} for you.`)}`;
  }

  /** Grants of the user's own resources (OAUTH_USER_RESOURCES=on): the REST API and the user MCP server. */
  async function accountApps(userId: string, csrf: string) {
    const connections = await listUserLevelConnections(ctx.db, userId);
    if (connections.length === 0 && !ctx.config.oauth.userResources) return '';
    return markup`<h2 id="account-apps">Your account → Connected apps</h2>
${await appsTable(connections, csrf, 'No applications are connected to your account.')}`;
  }

  async function appsTable(connections: ConnectionRow[], csrf: string, empty: string) {
    const rows = await Promise.all(
      connections.map(async (c) => {
        const name = await registry.displayName(c.client_id);
        let host: string | undefined;
        try {
          host = clientHost(await clientFor(c.client_id));
        } catch {
          host = undefined;
        }
        return markup`<tr>
  <td>${name}${host ? markup`<br><span class="muted">${host}</span>` : ''}</td>
  <td>${parseList(c.scopes).map((s) => markup`<code>${s}</code> `)}</td>
  <td>${parseList(c.ceiling).map((s) => markup`<code>${s}</code> `)}</td>
  <td>${fmt(c.created_at)}</td>
  <td>${fmt(c.last_used_at)}</td>
  <td><form method="post" action="/dashboard/connections/${c.id}/disconnect">
    <input type="hidden" name="csrf" value="${csrf}">
    <button type="submit" aria-label="Disconnect ${name}">Disconnect</button></form></td>
</tr>`;
      }),
    );
    return rows.length
      ? markup`<table><thead><tr><th>Application</th><th>Scopes</th><th>Permissions allowed</th><th>Connected</th><th>Last used</th><th><span class="muted">Action</span></th></tr></thead><tbody>${rows}</tbody></table>`
      : markup`<p class="muted">${empty}</p>`;
  }

  async function clientFor(clientId: string) {
    const pre = registry.preregistered.get(clientId);
    if (pre) return pre;
    const row = await ctx.db
      .selectFrom('oauth_clients')
      .selectAll()
      .where('client_id', '=', clientId)
      .executeTakeFirstOrThrow();
    const meta = JSON.parse(row.metadata) as { client_uri?: string; redirect_uris: string[] };
    return {
      clientId,
      kind: row.kind as 'dcr' | 'cimd',
      name: undefined,
      clientUri: meta.client_uri,
      applicationType: 'web' as const,
      redirectUris: meta.redirect_uris,
    };
  }

  async function membersSection(m: MembershipView, csrf: string) {
    const members = await listAgencyMembers(ctx.db, m.agency.id);
    return markup`<h2 id="members">Members</h2>
<table><thead><tr><th>Member</th><th>Role</th><th><span class="muted">Remove</span></th></tr></thead><tbody>
${members.map((x) =>
  x.id === m.member.id
    ? markup`<tr><td>${x.username} <span class="muted">(you)</span></td><td>${x.role}</td><td></td></tr>`
    : markup`<tr><td>${x.username}</td>
<td><form method="post" action="/dashboard/members/${x.id}/role">
  <input type="hidden" name="csrf" value="${csrf}">
  <label for="role-${x.id}" class="inline">Role of ${x.username}</label>
  <select id="role-${x.id}" name="role">${ROLES.map((r) => markup`<option value="${r}"${r === x.role ? markup` selected` : ''}>${r}</option>`)}</select>
  <button type="submit">Change role</button></form></td>
<td><form method="post" action="/dashboard/members/${x.id}/remove">
  <input type="hidden" name="csrf" value="${csrf}">
  <button type="submit" aria-label="Remove ${x.username}">Remove</button></form></td></tr>`,
)}
</tbody></table>
<p class="muted">Changing a role narrows that member's connected apps to what the new role allows. Removing a member ends all their connections.</p>`;
  }

  function settingsSection(m: MembershipView, csrf: string) {
    return markup`<h2 id="settings">Settings</h2>
<form method="post" action="/dashboard/agencies/${m.agency.id}/settings">
  <input type="hidden" name="csrf" value="${csrf}">
  <label><input type="checkbox" name="agent_write_enabled" value="on"${m.agency.agent_write_enabled ? markup` checked` : ''}> Allow agent write (connected apps may make changes within each member's permissions)</label>
  <div class="actions"><button type="submit">Save settings</button></div>
</form>`;
  }

  async function auditSection(m: MembershipView) {
    const manager = roleAllows(m.member.role, 'members:manage');
    const events = await listAuditEvents(ctx.db, {
      agencyId: m.agency.id,
      ...(manager ? {} : { memberId: m.member.id }),
      limit: 30,
    });
    return markup`<h2 id="audit">Audit events</h2>
${events.length ? markup`<table><thead><tr><th>When</th><th>Event</th><th>Details</th></tr></thead><tbody>${events.map((e) => markup`<tr><td>${fmt(e.created_at)}</td><td>${e.type}</td><td>${describe(e)}</td></tr>`)}</tbody></table>` : markup`<p class="muted">No events yet.</p>`}`;
  }

  const describe = (e: AuditRow) => {
    const d = JSON.parse(e.detail) as Record<string, unknown>;
    return Object.entries(d)
      .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(' ') : String(v)}`)
      .join('; ');
  };

  /** Runs a dashboard form action for the signed-in member of the agency it concerns, then back to the dashboard. */
  async function action(
    request: FastifyRequest,
    reply: FastifyReply,
    fn: (user: WebUser, form: URLSearchParams) => Promise<{ agencyId: string; done: string }>,
  ) {
    const form = request.body;
    if (!(form instanceof URLSearchParams)) throw new PageError(400, 'Bad request', 'Send the form.');
    checkCsrf(ctx, request, form);
    const user = await requireUser(request, reply);
    if (!user) return reply;
    try {
      const { agencyId, done } = await fn(user, form);
      return reply
        .code(303)
        .header('location', `/dashboard?agency=${encodeURIComponent(agencyId)}&done=${done}`)
        .send();
    } catch (e) {
      if (e instanceof MembershipError) throw new PageError(403, 'Not allowed', e.message);
      throw e;
    }
  }

  const membershipIn = async (userId: string, agencyId: string) => {
    const member = await activeMembership(ctx.db, userId, agencyId);
    if (!member) throw new PageError(403, 'Not allowed', 'You are not a member of that agency.');
    return member;
  };
  /** The member a members action is about, and the acting user's own membership in that member's agency. */
  const targetAndActor = async (userId: string, targetId: string) => {
    const target = await ctx.db
      .selectFrom('members')
      .select('agency_id')
      .where('id', '=', targetId)
      .executeTakeFirst();
    if (!target) throw new PageError(404, 'Not found', 'No such member.');
    return { agencyId: target.agency_id, actor: await membershipIn(userId, target.agency_id) };
  };

  app.post('/dashboard/connections/:id/disconnect', async (request, reply) =>
    action(request, reply, async (user) => {
      const id = (request.params as { id: string }).id;
      const c = await findConnection(ctx.db, id);
      // Only the member's own connections (docs/contract.md#revocation).
      if (!c || c.user_id !== user.userId) throw new PageError(404, 'Not found', 'No such connection.');
      await endConnection(ctx, c.id, 'disconnected', user.userId);
      return { agencyId: c.agency_id ?? '', done: 'disconnected' };
    }),
  );

  app.post('/dashboard/members/:id/role', async (request, reply) =>
    action(request, reply, async (user, form) => {
      const targetId = (request.params as { id: string }).id;
      const role = form.get('role');
      if (!isRole(role)) throw new PageError(400, 'Bad request', 'Choose a role.');
      const { agencyId, actor } = await targetAndActor(user.userId, targetId);
      const narrowed = await changeRole(ctx.db, ctx.clock, actor, targetId, role);
      for (const id of narrowed) ctx.connectionLiveness.forget(id);
      return { agencyId, done: 'role-changed' };
    }),
  );

  app.post('/dashboard/members/:id/remove', async (request, reply) =>
    action(request, reply, async (user) => {
      const targetId = (request.params as { id: string }).id;
      const { agencyId, actor } = await targetAndActor(user.userId, targetId);
      const ended = await removeMember(ctx.db, ctx.clock, actor, targetId);
      for (const id of ended) ctx.connectionLiveness.forget(id);
      ctx.metrics.connectionRevoked('member_removed', ended.length);
      return { agencyId, done: 'member-removed' };
    }),
  );

  app.post('/dashboard/agencies/:id/settings', async (request, reply) =>
    action(request, reply, async (user, form) => {
      const agencyId = (request.params as { id: string }).id;
      const actor = await membershipIn(user.userId, agencyId);
      const values = form.getAll('agent_write_enabled');
      if (values.length > 1 || (values.length === 1 && values[0] !== 'on'))
        throw new PageError(400, 'Bad request', 'Invalid setting.');
      await setAgentWrite(ctx.db, ctx.clock, actor, values.length === 1);
      return { agencyId, done: 'settings-saved' };
    }),
  );
}

const NOTICES: Record<string, string> = {
  disconnected: 'The application was disconnected.',
  'role-changed': "The role was changed; that member's connected apps were narrowed to match.",
  'member-removed': 'The member was removed; their connected apps were disconnected.',
  'settings-saved': 'Settings saved.',
};
