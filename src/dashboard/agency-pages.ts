import { ROLES } from '../domain/permissions.js';
import { isolated, markup } from '../web/html.js';
import { timeView } from '../web/when.js';
import { auditSentence } from './audit-sentences.js';
import type { AgencyPage, HistoryPage, MembersPage, RemovalPage, SettingsPage } from './dashboard-data.js';
import { confirmationView } from './confirmation.js';
import { noticeView } from './notices.js';

/** The pages of one agency: Members, Settings, History, with tabs between them and links to the other agencies. */

type Markup = ReturnType<typeof markup>;
type Tab = 'members' | 'settings' | 'history';

const TAB_NAMES: Record<Tab, string> = { members: 'Members', settings: 'Settings', history: 'History' };

export const agencyPageTitle = (page: AgencyPage, tab: Tab) =>
  markup`${TAB_NAMES[tab]} of ${isolated(page.current.agency.name)}`;

/** The tabs of the agency, and the same page in the member's other agencies. */
function agencyNav(page: AgencyPage, tab: Tab): Markup {
  const id = page.current.agency.id;
  const others = page.memberships.filter((m) => m.agency.id !== id);
  return markup`<nav aria-label="${page.current.agency.name}" class="tabs">
${(Object.keys(TAB_NAMES) as Tab[]).map((t) => markup`<a href="/dashboard/agencies/${id}/${t}"${t === tab ? markup` aria-current="page"` : ''}>${TAB_NAMES[t]}</a>`)}
<a href="/dashboard">Connected apps</a>
</nav>
${others.length ? markup`<p class="muted">Other agencies: ${others.map((m, i) => markup`${i ? ', ' : ''}<a href="/dashboard/agencies/${m.agency.id}/${tab}">${isolated(m.agency.name)}</a>`)}</p>` : ''}
<p class="muted">Your role in ${isolated(page.current.agency.name)}: ${page.current.member.role}.</p>`;
}

export function membersView(page: MembersPage, csrf: string, notice: unknown): Markup {
  const self = page.current.member.id;
  return markup`${agencyNav(page, 'members')}${noticeView(notice)}
<ul class="members">
${page.members.map((x) => {
  if (x.id === self || !page.canManage) {
    return markup`<li><span><strong>${x.username}</strong>${x.id === self ? markup` <span class="muted">(you)</span>` : ''}</span> <span>${x.role}</span></li>`;
  }
  return markup`<li><span><strong>${x.username}</strong></span>
<form method="post" action="/dashboard/members/${x.id}/role" class="row">
  <input type="hidden" name="csrf" value="${csrf}">
  <label for="role-${x.id}" class="inline">Role of ${x.username}</label>
  <select id="role-${x.id}" name="role">${ROLES.map((r) => markup`<option value="${r}"${r === x.role ? markup` selected` : ''}>${r}</option>`)}</select>
  <button type="submit">Change role</button>
</form>
<form method="get" action="/dashboard/members/${x.id}/remove">
  <button type="submit" aria-label="Remove ${x.username}">Remove</button>
</form></li>`;
})}
</ul>
${
  page.canManage
    ? markup`<p class="muted">Changing a role narrows that member's connected apps to what the new role allows. Removing a member ends all their connections.</p>`
    : markup`<p class="muted">Only owners and admins change roles or remove members.</p>`
}`;
}

export const removalTitle = (page: RemovalPage) =>
  markup`Remove ${page.member.username} from ${isolated(page.current.agency.name)}?`;

/**
 * Removing a member asks first: it cannot be undone from the dashboard (no page adds a member), and on a phone its
 * button sat a finger's width below "Change role".
 */
export function removalView(page: RemovalPage, csrf: string): Markup {
  const { member } = page;
  const agency = page.current.agency;
  return confirmationView({
    consequence: markup`${member.username} (${member.role}) will lose access to ${isolated(agency.name)}, and every app ${member.username} connected to it will be disconnected at once. This cannot be undone here.`,
    action: `/dashboard/members/${member.id}/remove`,
    csrf,
    confirm: markup`Remove ${member.username}`,
    keep: { href: `/dashboard/agencies/${agency.id}/members`, label: markup`Keep ${member.username}` },
  });
}

export function settingsView(page: SettingsPage, csrf: string, notice: unknown): Markup {
  const { agency } = page.current;
  const allowed = agency.agent_write_enabled === 1;
  if (!page.canManage) {
    return markup`${agencyNav(page, 'settings')}
<p>Connected apps ${allowed ? 'may' : 'may not'} make changes in ${isolated(agency.name)}${allowed ? ", within each member's permissions" : ''}.</p>
<p class="muted">Only owners and admins change the settings.</p>`;
  }
  return markup`${agencyNav(page, 'settings')}${noticeView(notice)}
<form method="post" action="/dashboard/agencies/${agency.id}/settings">
  <input type="hidden" name="csrf" value="${csrf}">
  <label class="check"><input type="checkbox" name="agent_write_enabled" value="on"${allowed ? markup` checked` : ''}> Allow agent write (connected apps may make changes within each member's permissions)</label>
  <div class="actions"><button type="submit">Save settings</button></div>
</form>`;
}

export function historyView(page: HistoryPage, now: number): Markup {
  const app = (clientId: string) => page.appNames.get(clientId) ?? 'an application';
  const scope = page.wholeAgency
    ? markup`What happened in ${isolated(page.current.agency.name)}, newest first.`
    : 'What happened to your membership and your connected apps, newest first.';
  return markup`${agencyNav(page, 'history')}
<p class="muted">${scope}</p>
${
  page.events.length
    ? markup`<ol class="history">${page.events.map((e) => markup`<li><span>${auditSentence(e, { app })}</span> <span class="muted">${timeView(e.created_at, now)}</span></li>`)}</ol>`
    : markup`<p class="muted">Nothing yet.</p>`
}`;
}
