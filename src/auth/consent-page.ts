import type { MembershipView } from '../domain/agencies.js';
import { isWritePermission, PERMISSION_LABELS, type Permission } from '../domain/permissions.js';
import { SCOPE_LABELS, SCOPES } from '../domain/scopes.js';
import { isolated, lowerFirst, markup } from '../web/html.js';
import { dateLabel } from '../web/when.js';
import type { AuthorizationRequest } from './authorization-request.js';
import { CLIENT_TRUST, clientHost } from './clients/registry.js';
import type { ConsentModel, ExistingConnection } from './consent.js';
import { isLoopbackRedirect } from './redirect-uri.js';

/** The pages of the authorization endpoint: which agency, then what the application may do there. */

type Markup = ReturnType<typeof markup>;

/** The app's name inside a sentence: its author's, in any script, so isolated (web/html.ts). */
const app = (req: AuthorizationRequest) => isolated(req.client.name ?? req.client.clientId);

/** Which of the member's agencies the application should act in. */
export function agencyChoiceView(req: AuthorizationRequest, memberships: MembershipView[]): Markup {
  return markup`<p>${app(req)} wants to connect to one of your agencies. Which one?</p>
<form method="get" action="/oauth2/auth/consent">
  <input type="hidden" name="request" value="${req.query}">
  <fieldset><legend>Agency</legend>
  ${memberships.map(
    (m, i) =>
      markup`<label><input type="radio" name="agency_id" value="${m.agency.id}"${i === 0 ? markup` checked` : ''}> ${isolated(m.agency.name)} <span class="muted">(your role: ${m.member.role})</span></label>`,
  )}
  </fieldset>
  <div class="actions"><button type="submit" class="primary">Continue</button></div>
</form>`;
}

/**
 * CSP `form-action` sources of the consent page: the form posts here, and its answer redirects to the client (browsers
 * apply form-action to the redirects that follow a submission).
 */
export function consentFormActions(req: AuthorizationRequest): string[] {
  const redirect = new URL(req.redirectUri);
  const web = redirect.protocol === 'http:' || redirect.protocol === 'https:';
  return ["'self'", web ? redirect.origin : redirect.protocol];
}

export function consentTitle(req: AuthorizationRequest, m: ConsentModel): Markup {
  return m.existing ? markup`Update access for ${app(req)}` : markup`Connect ${app(req)}`;
}

/**
 * Who asks, where the answer goes, in which agency, what changes when the app is already connected, what it asks
 * for, and the member's choice: ticked, only what the tools the request asks for can use (domain/agency-tools.ts).
 */
export function consentView(req: AuthorizationRequest, m: ConsentModel, csrf: string): Markup {
  const shownScopes = req.scopes.filter((s) => s !== SCOPES.agencyWrite || m.writeOffered);
  return markup`${whoAsksView(req, m)}
${m.existing ? changeView(req, m, m.existing) : ''}
<h2>It asks to</h2>
<ul class="scopes">${shownScopes.map((s) => markup`<li>${SCOPE_LABELS[s] ?? s}</li>`)}</ul>
${writeRefusalView(m)}
<form method="post" action="/oauth2/auth/consent">
  <input type="hidden" name="csrf" value="${csrf}">
  <input type="hidden" name="request" value="${req.query}">
  ${m.agency ? markup`<input type="hidden" name="agency_id" value="${m.agency.id}">` : ''}
  ${ceilingView(req, m)}
  ${
    req.scopes.includes(SCOPES.offline)
      ? ''
      : markup`<label class="check"><input type="checkbox" name="stay_connected" value="on" checked> Stay connected: the application may renew its access without asking you again, until you disconnect it</label>`
  }
  <p class="muted">You can disconnect ${app(req)} at any time: <a href="/dashboard">Dashboard</a> → Connected apps.</p>
  <div class="actions">
    <button type="submit" name="decision" value="allow" class="primary">Allow</button>
    <button type="submit" name="decision" value="deny">Deny</button>
  </div>
  ${technicalDetails(req, m, shownScopes)}
</form>`;
}

/** Why write access, asked for, is not offered. */
function writeRefusalView(m: ConsentModel): Markup | '' {
  if (m.writeRefusal === 'role')
    return markup`<p class="muted">Write access is not offered: your role (${m.role}) cannot make changes.</p>`;
  if (m.writeRefusal === 'agency' && m.agency)
    return markup`<p class="muted">Write access is not offered: ${isolated(m.agency.name)} does not allow agents to make changes.</p>`;
  return '';
}

/** The application, its host, whether its name is verified, where the answer goes, and the agency. */
function whoAsksView(req: AuthorizationRequest, m: ConsentModel): Markup {
  const host = clientHost(req.client);
  const redirect = new URL(req.redirectUri);
  const redirectHost = redirect.host || `${redirect.protocol}`;
  return markup`<p><strong>${app(req)}</strong>${host ? markup` <span class="muted">(${host})</span>` : ''} wants to act for you${m.agency ? markup` in <strong>${isolated(m.agency.name)}</strong>${m.role ? markup` <span class="muted">(your role: ${m.role})</span>` : ''}` : ''}.</p>
<p class="${req.client.kind === 'dcr' ? 'warning' : 'muted'}">${CLIENT_TRUST[req.client.kind].sentence}</p>
<p>After you decide, you go back to <strong>${redirectHost}</strong>.</p>
${isLoopbackRedirect(req.redirectUri) ? markup`<p class="warning" role="note">This application receives the answer on your own computer (${redirectHost}). Continue only if you started this from an application running on this device.</p>` : ''}`;
}

/** A re-authorization: what the app may do today, and what allowing this (as ticked) adds or takes away. */
function changeView(req: AuthorizationRequest, m: ConsentModel, existing: ExistingConnection): Markup {
  const adds = m.offered.filter((p) => !existing.permissions.includes(p));
  const drops = existing.permissions.filter((p) => !m.offered.includes(p));
  const words = (list: Permission[]) => list.map((p) => lowerFirst(PERMISSION_LABELS[p])).join(', ');
  const what = existing.permissions.some(isWritePermission) ? 'read and write access' : 'read access';
  return markup`<p class="notice" role="note"><strong>${app(req)}</strong> is already connected${m.agency ? markup` to ${isolated(m.agency.name)}` : ''} with ${what}, since ${dateLabel(existing.since)}.
${adds.length ? markup` Allowing this adds: ${words(adds)}.` : ''}${drops.length ? markup` It would no longer: ${words(drops)}.` : ''}${adds.length + drops.length === 0 ? ' Allowing this changes nothing it may do.' : ''}
What you allow here replaces what it was allowed before.</p>`;
}

function ceilingView(req: AuthorizationRequest, m: ConsentModel): Markup | '' {
  if (m.offered.length === 0) return '';
  const reads = m.offered.filter((p) => !isWritePermission(p));
  const writes = m.offered.filter(isWritePermission);
  const group = (legend: string, perms: Permission[]) =>
    perms.length
      ? markup`<fieldset><legend>${legend}</legend>
  ${perms.map((perm) => markup`<label class="check"><input type="checkbox" name="ceiling" value="${perm}" checked> ${PERMISSION_LABELS[perm]}</label>`)}
  </fieldset>`
      : '';
  return markup`<h2>What ${app(req)} may do${m.agency ? markup` in ${isolated(m.agency.name)}` : ''}</h2>
<p class="muted">Untick anything it should not do. It never gets more than your own role allows.</p>
${group('See', reads)}
${group('Make changes', writes)}`;
}

/** The codes behind the words, for those who want them (developers, support). */
function technicalDetails(req: AuthorizationRequest, m: ConsentModel, scopes: string[]): Markup {
  return markup`<details><summary>Technical details</summary>
<dl>
  <dt>Client ID</dt><dd><code>${req.client.clientId}</code></dd>
  <dt>Scopes</dt><dd>${scopes.map((s) => markup`<code>${s}</code> `)}</dd>
  ${m.offered.length ? markup`<dt>Permissions</dt><dd>${m.offered.map((p) => markup`<code>${p}</code> `)}</dd>` : ''}
  <dt>Resource</dt><dd><code>${req.resource.uri}</code></dd>
</dl>
</details>`;
}
