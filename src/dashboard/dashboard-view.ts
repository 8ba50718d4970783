import { toRfc3339 } from '../base/clock.js';
import type { AuditRow } from '../domain/audit.js';
import { parseList, ROLES } from '../domain/permissions.js';
import { markup } from '../web/html.js';
import type { AgencyDashboard, ConnectedApp, Dashboard } from './dashboard-data.js';

/** The member dashboard as HTML: pure functions of what dashboard-data.ts loaded. */

type Markup = ReturnType<typeof markup>;

const NOTICES: Record<string, string> = {
  disconnected: 'The application was disconnected.',
  'role-changed': "The role was changed; that member's connected apps were narrowed to match.",
  'member-removed': 'The member was removed; their connected apps were disconnected.',
  'settings-saved': 'Settings saved.',
};

const when = (ms: number | null) =>
  ms === null ? 'never' : toRfc3339(ms).replace('T', ' ').slice(0, 16) + ' UTC';

export function dashboardTitle(d: Dashboard): string {
  return d.agency ? d.agency.membership.agency.name : 'Dashboard';
}

export function dashboardView(d: Dashboard, csrf: string, notice: unknown): Markup {
  const account = accountAppsView(d, csrf);
  if (!d.agency) return markup`<p>You are not a member of any agency yet.</p>${account}`;
  const a = d.agency;
  const { agency, member } = a.membership;
  return markup`${typeof notice === 'string' && NOTICES[notice] ? markup`<p class="warning" role="status">${NOTICES[notice]}</p>` : ''}
${agencyPickerView(d)}
<p class="muted">Your role: ${member.role}. Plan: ${agency.plan}.</p>
<h2 id="connected-apps">Settings → Connected apps</h2>
${appsTable(a.apps, csrf, `No applications are connected to ${agency.name} for you.`)}
${account}
${a.members ? membersView(a, csrf) : ''}
${a.canManageSettings ? settingsView(a, csrf) : ''}
${auditView(a.audit)}`;
}

function agencyPickerView(d: Dashboard): Markup | '' {
  if (d.memberships.length <= 1) return '';
  const current = d.agency?.membership.agency.id;
  return markup`<form method="get" action="/dashboard"><label for="agency">Agency</label>
<select id="agency" name="agency">${d.memberships.map((m) => markup`<option value="${m.agency.id}"${m.agency.id === current ? markup` selected` : ''}>${m.agency.name}</option>`)}</select>
<button type="submit">Show</button></form>`;
}

function accountAppsView(d: Dashboard, csrf: string): Markup | '' {
  if (!d.accountApps) return '';
  return markup`<h2 id="account-apps">Your account → Connected apps</h2>
${appsTable(d.accountApps, csrf, 'No applications are connected to your account.')}`;
}

function appsTable(apps: ConnectedApp[], csrf: string, empty: string): Markup {
  if (apps.length === 0) return markup`<p class="muted">${empty}</p>`;
  const rows = apps.map(
    ({ connection: c, client }) => markup`<tr>
  <td>${client.name}${client.host ? markup`<br><span class="muted">${client.host}</span>` : ''}</td>
  <td>${parseList(c.scopes).map((s) => markup`<code>${s}</code> `)}</td>
  <td>${parseList(c.ceiling).map((s) => markup`<code>${s}</code> `)}</td>
  <td>${when(c.created_at)}</td>
  <td>${when(c.last_used_at)}</td>
  <td><form method="post" action="/dashboard/connections/${c.id}/disconnect">
    <input type="hidden" name="csrf" value="${csrf}">
    <button type="submit" aria-label="Disconnect ${client.name}">Disconnect</button></form></td>
</tr>`,
  );
  return markup`<table><thead><tr><th>Application</th><th>Scopes</th><th>Permissions allowed</th><th>Connected</th><th>Last used</th><th><span class="muted">Action</span></th></tr></thead><tbody>${rows}</tbody></table>`;
}

function membersView(a: AgencyDashboard, csrf: string): Markup {
  const self = a.membership.member.id;
  return markup`<h2 id="members">Members</h2>
<table><thead><tr><th>Member</th><th>Role</th><th><span class="muted">Remove</span></th></tr></thead><tbody>
${(a.members ?? []).map((x) =>
  x.id === self
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

function settingsView(a: AgencyDashboard, csrf: string): Markup {
  const { agency } = a.membership;
  return markup`<h2 id="settings">Settings</h2>
<form method="post" action="/dashboard/agencies/${agency.id}/settings">
  <input type="hidden" name="csrf" value="${csrf}">
  <label><input type="checkbox" name="agent_write_enabled" value="on"${agency.agent_write_enabled ? markup` checked` : ''}> Allow agent write (connected apps may make changes within each member's permissions)</label>
  <div class="actions"><button type="submit">Save settings</button></div>
</form>`;
}

function auditView(events: AuditRow[]): Markup {
  return markup`<h2 id="audit">Audit events</h2>
${events.length ? markup`<table><thead><tr><th>When</th><th>Event</th><th>Details</th></tr></thead><tbody>${events.map((e) => markup`<tr><td>${when(e.created_at)}</td><td>${e.type}</td><td>${describe(e)}</td></tr>`)}</tbody></table>` : markup`<p class="muted">No events yet.</p>`}`;
}

const describe = (e: AuditRow) => {
  const d = JSON.parse(e.detail) as Record<string, unknown>;
  return Object.entries(d)
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(' ') : String(v)}`)
    .join('; ');
};
