import { PERMISSION_LABELS } from '../domain/permissions.js';
import { SCOPE_LABELS } from '../domain/scopes.js';
import { parseList } from '../domain/permissions.js';
import { CLIENT_TRUST } from '../auth/clients/registry.js';
import { isolated, lowerFirst, markup } from '../web/html.js';
import { timeView } from '../web/when.js';
import type { AppGroup, ConnectedApp, ConnectedAppsPage, DisconnectionPage } from './dashboard-data.js';
import { confirmationView } from './confirmation.js';
import { noticeView } from './notices.js';

/**
 * The Connected apps page: one entry per application the member allowed to act for them, in every agency and on
 * their own account, each with what it may do in plain words (the codes behind a disclosure), when it was connected
 * and last used, and Disconnect — the model of GitHub's "Authorized OAuth Apps" and Google's "Third-party apps with
 * account access".
 */

type Markup = ReturnType<typeof markup>;

export const CONNECTED_APPS_TITLE = 'Connected apps';

export function connectedAppsView(page: ConnectedAppsPage, now: number, notice: unknown): Markup {
  const intro = markup`<p class="muted">Applications you allowed to act for you. Disconnect one and it loses access at once; it has to ask you again to come back.</p>`;
  if (page.groups.length === 0) {
    return markup`${noticeView(notice)}${intro}<p>You are not a member of any agency yet, and no application is connected to your account.</p>`;
  }
  return markup`${noticeView(notice)}${intro}
${page.groups.map((g) => groupView(g, now))}`;
}

function groupView(group: AppGroup, now: number): Markup {
  const m = group.membership;
  const id = m ? `apps-${m.agency.id}` : 'apps-account';
  const empty = m
    ? markup`No applications are connected to ${isolated(m.agency.name)} for you.`
    : 'No applications are connected to your account.';
  return markup`<section aria-labelledby="${id}">
<h2 id="${id}">${m ? m.agency.name : 'Your account'}</h2>
${m ? agencyLinks(m.agency.id, m.member.role) : ''}
${group.apps.length ? markup`<ul class="apps">${group.apps.map((a) => appView(a, now))}</ul>` : markup`<p class="muted">${empty}</p>`}
</section>`;
}

function agencyLinks(agencyId: string, role: string): Markup {
  const base = `/dashboard/agencies/${agencyId}`;
  return markup`<p class="muted">Your role: ${role} · <a href="${base}/members">Members</a> · <a href="${base}/settings">Settings</a> · <a href="${base}/history">History</a></p>`;
}

function appView(app: ConnectedApp, now: number): Markup {
  const { connection: c, client } = app;
  return markup`<li class="app" id="app-${c.id}">
  <p class="app-head"><strong>${isolated(client.name)}</strong>${client.host ? markup` <span class="muted">${client.host}</span>` : ''}${client.kind ? markup` <span class="badge">${CLIENT_TRUST[client.kind].word}</span>` : ''}</p>
  <p>${mayDoSentence(app)}</p>
  <p class="muted">Connected ${timeView(c.created_at, now)} · Last used ${timeView(c.last_used_at, now)}</p>
  <details><summary>Technical details</summary>
  <dl>
    <dt>Client ID</dt><dd><code>${c.client_id}</code></dd>
    <dt>Scopes</dt><dd>${parseList(c.scopes).map((s) => markup`<code>${s}</code> `)}</dd>
    ${c.agency_id ? markup`<dt>Permissions allowed</dt><dd>${parseList(c.ceiling).map((p) => markup`<code>${p}</code> `)}</dd>` : ''}
    <dt>Connection</dt><dd><code>${c.id}</code></dd>
  </dl>
  </details>
  <form method="get" action="/dashboard/connections/${c.id}/disconnect">
    <button type="submit" aria-label="Disconnect ${client.name}">Disconnect</button>
  </form>
</li>`;
}

export const disconnectionTitle = ({ app }: DisconnectionPage) =>
  markup`Disconnect ${isolated(app.client.name)}?`;

/**
 * Disconnecting asks first, as GitHub's and Google's pages do: on a phone the apps' Disconnect buttons sit one above
 * the other, and a wrong one cut an agent off until its user connected it again.
 */
export function disconnectionView({ app, membership }: DisconnectionPage, csrf: string): Markup {
  const name = isolated(app.client.name);
  const where = membership ? isolated(membership.agency.name) : 'your account';
  return confirmationView({
    consequence: markup`${name} will lose access to ${where} at once. To use it again, you will have to allow it again when it asks.`,
    action: `/dashboard/connections/${app.connection.id}/disconnect`,
    csrf,
    confirm: markup`Disconnect ${name}`,
    keep: { href: '/dashboard', label: markup`Keep ${name} connected` },
  });
}

/** "It may: see clients, see tasks, create and change tasks." — what the app can do now, in words. */
function mayDoSentence(app: ConnectedApp): string {
  const words = app.connection.agency_id
    ? app.permissions.map((p) => PERMISSION_LABELS[p])
    : parseList(app.connection.scopes).map((s) => SCOPE_LABELS[s] ?? s);
  if (words.length === 0)
    return 'It may do nothing at the moment: your role or the agency settings leave it no permission.';
  return `It may: ${words.map(lowerFirst).join(', ')}.`;
}
