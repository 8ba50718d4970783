import type { MembershipView } from '../domain/agencies.js';
import { PERMISSION_LABELS } from '../domain/permissions.js';
import { SCOPE_LABELS, SCOPES } from '../domain/scopes.js';
import { markup } from '../web/html.js';
import type { AuthorizationRequest } from './authorization-request.js';
import { clientHost } from './clients/registry.js';
import type { ConsentModel } from './consent.js';
import { isLoopbackRedirect } from './redirect-uri.js';

/** The pages of the authorization endpoint: which agency, then what the application may do there. */

type Markup = ReturnType<typeof markup>;

const appName = (req: AuthorizationRequest) => req.client.name ?? req.client.clientId;

/** Which of the member's agencies the application should act in. */
export function agencyChoiceView(req: AuthorizationRequest, memberships: MembershipView[]): Markup {
  return markup`<p>${appName(req)} wants to connect to one of your agencies. Which one?</p>
<form method="get" action="/oauth2/auth/consent">
  <input type="hidden" name="request" value="${req.query}">
  <fieldset><legend>Agency</legend>
  ${memberships.map(
    (m, i) =>
      markup`<label><input type="radio" name="agency_id" value="${m.agency.id}"${i === 0 ? markup` checked` : ''}> ${m.agency.name} <span class="muted">(your role: ${m.member.role})</span></label>`,
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

export function consentTitle(req: AuthorizationRequest): string {
  return `Connect ${appName(req)}`;
}

/** Who asks, where the answer goes, in which agency, what it asks for, and the member's choice. */
export function consentView(req: AuthorizationRequest, m: ConsentModel, csrf: string): Markup {
  const shownScopes = req.scopes.filter((s) => s !== SCOPES.agencyWrite || m.writeOffered);
  return markup`${whoAsksView(req, m)}
<h2>It asks to</h2>
<ul class="scopes">${shownScopes.map((s) => markup`<li>${SCOPE_LABELS[s] ?? s} <code class="muted">${s}</code></li>`)}</ul>
${m.writeRefusal ? markup`<p class="muted">${m.writeRefusal}</p>` : ''}
<form method="post" action="/oauth2/auth/consent">
  <input type="hidden" name="csrf" value="${csrf}">
  <input type="hidden" name="request" value="${req.query}">
  ${m.agency ? markup`<input type="hidden" name="agency_id" value="${m.agency.id}">` : ''}
  ${ceilingView(m)}
  ${
    req.scopes.includes(SCOPES.offline)
      ? ''
      : markup`<label><input type="checkbox" name="stay_connected" value="on" checked> Stay connected: the application may renew its access without asking you again, until you disconnect it</label>`
  }
  <div class="actions">
    <button type="submit" name="decision" value="allow" class="primary">Allow</button>
    <button type="submit" name="decision" value="deny">Deny</button>
  </div>
</form>`;
}

/** The application, its host, whether its name is verified, where the answer goes, and the agency. */
function whoAsksView(req: AuthorizationRequest, m: ConsentModel): Markup {
  const host = clientHost(req.client);
  const redirect = new URL(req.redirectUri);
  const redirectHost = redirect.host || `${redirect.protocol}`;
  return markup`<p><strong>${appName(req)}</strong>${host ? markup` <span class="muted">(${host})</span>` : ''} wants to act for you${m.agency ? markup` in <strong>${m.agency.name}</strong>${m.role ? markup` <span class="muted">(your role: ${m.role})</span>` : ''}` : ''}.</p>
${req.client.kind === 'dcr' ? markup`<p class="muted">This application registered itself; its name is not verified. Check the address you are sent back to.</p>` : ''}
<p>After you decide, you go back to <strong>${redirectHost}</strong>.</p>
${isLoopbackRedirect(req.redirectUri) ? markup`<p class="warning" role="note">This application receives the answer on your own computer (${redirectHost}). Continue only if you started this from an application running on this device.</p>` : ''}`;
}

function ceilingView(m: ConsentModel): Markup | '' {
  if (m.offered.length === 0) return '';
  return markup`<fieldset><legend>What the application may use of your permissions</legend>
  ${m.offered.map(
    (perm) =>
      markup`<label><input type="checkbox" name="ceiling" value="${perm}" checked> ${PERMISSION_LABELS[perm]} <code class="muted">${perm}</code></label>`,
  )}
  </fieldset>`;
}
