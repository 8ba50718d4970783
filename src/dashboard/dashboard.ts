import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ClientRegistry } from '../auth/clients/registry.js';
import type { AppContext } from '../context.js';
import {
  activeMembership,
  agencyOfMember,
  changeRole,
  MembershipError,
  removeMember,
  setAgentWrite,
} from '../domain/agencies.js';
import { endConnection, findConnection } from '../domain/connections.js';
import { isRole } from '../domain/permissions.js';
import { type Html, PageError } from '../web/html.js';
import { sendPage } from '../web/page-scope.js';
import { signedInNav, type WebUser } from '../web/web-session.js';
import {
  agencyPageTitle,
  historyView,
  membersView,
  removalTitle,
  removalView,
  settingsView,
} from './agency-pages.js';
import {
  CONNECTED_APPS_TITLE,
  connectedAppsView,
  disconnectionTitle,
  disconnectionView,
} from './connected-apps-page.js';
import {
  loadConnectedApps,
  loadDisconnection,
  loadHistory,
  loadMembers,
  loadRemoval,
  loadSettings,
} from './dashboard-data.js';
import type { Notice } from './notices.js';

/**
 * The member pages: Connected apps (every app the member allowed, in every agency, with Disconnect), and per agency
 * Members (owners and admins change a role, which narrows that member's connections, or remove a member, which ends
 * them), Settings (allow agent write) and History (the audit events in sentences). Each route loads from the domain
 * (dashboard-data.ts) or runs one domain operation, and renders a view.
 */
export async function dashboardRoutes(
  app: FastifyInstance,
  ctx: AppContext,
  registry: ClientRegistry,
): Promise<void> {
  app.get('/', async (_request, reply) => reply.code(303).header('location', '/dashboard').send());
  const page = memberPage(ctx);

  app.get('/dashboard', async (request, reply) =>
    page(request, reply, async (userId, _csrf, done) => {
      const apps = await loadConnectedApps(ctx, registry, userId);
      return [CONNECTED_APPS_TITLE, connectedAppsView(apps, ctx.clock.now(), done)];
    }),
  );
  app.get('/dashboard/connections/:id/disconnect', async (request, reply) =>
    page(request, reply, async (userId, csrf) => {
      const disconnection = await loadDisconnection(ctx, registry, userId, idParam(request));
      return [disconnectionTitle(disconnection), disconnectionView(disconnection, csrf)];
    }),
  );
  app.get('/dashboard/agencies/:id/members', async (request, reply) =>
    page(request, reply, async (userId, csrf, done) => {
      const members = await loadMembers(ctx, userId, idParam(request));
      return [agencyPageTitle(members, 'members'), membersView(members, csrf, done)];
    }),
  );
  app.get('/dashboard/agencies/:id/settings', async (request, reply) =>
    page(request, reply, async (userId, csrf, done) => {
      const settings = await loadSettings(ctx, userId, idParam(request));
      return [agencyPageTitle(settings, 'settings'), settingsView(settings, csrf, done)];
    }),
  );
  app.get('/dashboard/agencies/:id/history', async (request, reply) =>
    page(request, reply, async (userId) => {
      const history = await loadHistory(ctx, registry, userId, idParam(request));
      return [agencyPageTitle(history, 'history'), historyView(history, ctx.clock.now())];
    }),
  );

  const actions = new DashboardActions(ctx);

  app.post('/dashboard/connections/:id/disconnect', async (request, reply) =>
    actions.run(request, reply, async (user) => {
      const c = await findConnection(ctx.db, idParam(request));
      // Only the member's own connections (docs/contract.md#revocation).
      if (!c || c.user_id !== user.userId) throw new PageError(404, 'Not found', 'No such connection.');
      await endConnection(ctx, c.id, 'disconnected', user.userId);
      return { to: '/dashboard', done: 'disconnected' };
    }),
  );

  app.post('/dashboard/members/:id/role', async (request, reply) =>
    actions.run(request, reply, async (user, form) => {
      const role = form.get('role');
      if (!isRole(role)) throw new PageError(400, 'Bad request', 'Choose a role.');
      const { agencyId, actor } = await actions.targetAndActor(user.userId, idParam(request));
      await changeRole(ctx, actor, idParam(request), role);
      return { to: `/dashboard/agencies/${agencyId}/members`, done: 'role-changed' };
    }),
  );

  app.get('/dashboard/members/:id/remove', async (request, reply) =>
    page(request, reply, async (userId, csrf) => {
      const removal = await loadRemoval(ctx, userId, idParam(request));
      return [removalTitle(removal), removalView(removal, csrf)];
    }),
  );

  app.post('/dashboard/members/:id/remove', async (request, reply) =>
    actions.run(request, reply, async (user) => {
      const { agencyId, actor } = await actions.targetAndActor(user.userId, idParam(request));
      await removeMember(ctx, actor, idParam(request));
      return { to: `/dashboard/agencies/${agencyId}/members`, done: 'member-removed' };
    }),
  );

  app.post('/dashboard/agencies/:id/settings', async (request, reply) =>
    actions.run(request, reply, async (user, form) => {
      const agencyId = idParam(request);
      const actor = await actions.membershipIn(user.userId, agencyId);
      const values = form.getAll('agent_write_enabled');
      if (values.length > 1 || (values.length === 1 && values[0] !== 'on'))
        throw new PageError(400, 'Bad request', 'Invalid setting.');
      await setAgentWrite(ctx, actor, values.length === 1);
      return { to: `/dashboard/agencies/${agencyId}/settings`, done: 'settings-saved' };
    }),
  );
}

type PageBody = [title: string | Html, body: ReturnType<typeof connectedAppsView>];

/** A member page: signed in (else to sign-in and back), with the header's account navigation and CSRF token. */
function memberPage(ctx: AppContext) {
  return async (
    request: FastifyRequest,
    reply: FastifyReply,
    render: (userId: string, csrf: string, done: unknown) => Promise<PageBody>,
  ): Promise<FastifyReply> => {
    const user = await requireUser(ctx, request, reply);
    if (!user) return reply;
    const nav = await signedInNav(ctx.db, ctx.webSessions, request, reply, user.userId);
    const [title, body] = await render(
      user.userId,
      nav.csrf,
      (request.query as Record<string, unknown>)['done'],
    );
    return sendPage(reply, 200, title, body, nav);
  };
}

/** The signed-in user, or undefined after sending the browser to sign in (and back here). */
async function requireUser(
  ctx: AppContext,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<WebUser | undefined> {
  const user = await ctx.webSessions.currentUser(request);
  if (!user) {
    void reply
      .code(303)
      .header('location', `/sign-in?next=${encodeURIComponent(request.url)}`)
      .send();
  }
  return user;
}

const idParam = (request: FastifyRequest) => (request.params as { id: string }).id;

/** The form actions of the dashboard: CSRF, the signed-in member of the agency concerned, then back to the page. */
class DashboardActions {
  constructor(private readonly ctx: AppContext) {}

  async run(
    request: FastifyRequest,
    reply: FastifyReply,
    fn: (user: WebUser, form: URLSearchParams) => Promise<{ to: string; done: Notice }>,
  ): Promise<FastifyReply> {
    const form = request.body;
    if (!(form instanceof URLSearchParams)) throw new PageError(400, 'Bad request', 'Send the form.');
    this.ctx.webSessions.checkCsrf(request, form);
    const user = await requireUser(this.ctx, request, reply);
    if (!user) return reply;
    try {
      const { to, done } = await fn(user, form);
      return reply.code(303).header('location', `${to}?done=${done}`).send();
    } catch (e) {
      if (e instanceof MembershipError) throw new PageError(403, 'Not allowed', e.message);
      throw e;
    }
  }

  async membershipIn(userId: string, agencyId: string) {
    const member = await activeMembership(this.ctx.db, userId, agencyId);
    if (!member) throw new PageError(403, 'Not allowed', 'You are not a member of that agency.');
    return member;
  }

  /** The agency of the member an action is about, and the acting user's own membership there. */
  async targetAndActor(userId: string, targetId: string) {
    const agencyId = await agencyOfMember(this.ctx.db, targetId);
    if (!agencyId) throw new PageError(404, 'Not found', 'No such member.');
    return { agencyId, actor: await this.membershipIn(userId, agencyId) };
  }
}
