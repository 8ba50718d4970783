import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { markup, PageError } from '../web/html.js';
import { contentSecurityPolicy, sendPage } from '../web/page-scope.js';
import { checkCsrf, csrfToken, currentUser } from '../dashboard/web-session.js';
import { activeMembership, findAgency, listMemberships } from '../domain/agencies.js';
import { audit } from '../domain/audit.js';
import { createPendingConnection, pruneExpiredGrants } from '../domain/connections.js';
import {
  isPermission,
  isWritePermission,
  offerablePermissions,
  PERMISSION_LABELS,
  type Permission,
  type Role,
  roleHasWrite,
} from '../domain/permissions.js';
import { findUserById } from '../domain/users.js';
import type { ResolvedClient } from './clients/client.js';
import { type ClientRegistry, clientHost, UnknownClientError } from './clients/registry.js';
import { Params } from '../web/form.js';
import { OAuthError, type OAuthErrorCode } from '../http/oauth-errors.js';
import { isS256Challenge } from './pkce.js';
import { isLoopbackRedirect, matchRedirectUri } from './redirect-uri.js';
import { type KnownResource, resolveResource } from './resource-indicator.js';
import { SCOPE_LABELS, SCOPES } from '../domain/scopes.js';
import { parseScope } from './scope-parameter.js';
import { hashSecret, randomSecret } from '../web/secrets.js';

/** docs/contract.md#limits: authorization codes live 60 seconds and are single use. */
export const CODE_TTL_MS = 60_000;

/** A validated authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3, RFC 8707 §2). */
export interface AuthorizationRequest {
  client: ResolvedClient;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  resource: KnownResource;
  scopes: string[];
  /** The query string as received: the pages carry it so every step re-validates the whole request. */
  query: string;
}

/** An error after the redirect URI is trusted: sent back to the client (RFC 6749 §4.1.2.1) with `iss` (RFC 9207). */
class RedirectError extends Error {
  constructor(
    readonly target: { redirectUri: string; state: string | undefined },
    readonly code: OAuthErrorCode,
    readonly description: string,
    /** Set for errors in the request itself, found before anyone decided anything (see `mayRedirectErrors`). */
    readonly requestOf?: ResolvedClient,
  ) {
    super(description);
  }
}

/** Appends response parameters to a redirect URI, keeping its own query (RFC 6749 §3.1.2). */
function withParams(redirectUri: string, params: Record<string, string | undefined>): string {
  const u = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.append(k, v);
  return u.toString();
}

export async function authorizeRoutes(
  app: FastifyInstance,
  ctx: AppContext,
  registry: ClientRegistry,
): Promise<void> {
  const issuer = () => urls.issuer(ctx.config);

  /** Validates in RFC 6749 order: client and redirect URI first (page errors), then the rest (redirect errors). */
  async function validate(query: string, requester?: string): Promise<AuthorizationRequest> {
    const p = new Params(new URLSearchParams(query));
    // RFC 6749 §4.1.2.1: if the client or redirect URI is missing, invalid or mismatching, do NOT redirect.
    if (p.repeated('client_id'))
      throw new PageError(400, 'Invalid request', 'The client_id parameter is repeated.');
    const clientId = p.raw.get('client_id');
    if (!clientId) throw new PageError(400, 'Invalid request', 'The client_id parameter is missing.');
    let client: ResolvedClient;
    try {
      client = await registry.resolve(clientId, requester);
    } catch (e) {
      if (e instanceof UnknownClientError) throw new PageError(400, 'Unknown application', e.message);
      throw e;
    }
    if (p.repeated('redirect_uri'))
      throw new PageError(400, 'Invalid request', 'The redirect_uri parameter is repeated.');
    let redirectUri = p.raw.get('redirect_uri') || undefined;
    if (redirectUri === undefined) {
      // RFC 6749 §3.1.2.3: it may be omitted only when the client registered exactly one (non-loopback) URI.
      const only = client.redirectUris.length === 1 ? client.redirectUris[0] : undefined;
      if (!only || isLoopbackRedirect(only)) {
        throw new PageError(400, 'Invalid request', 'The redirect_uri parameter is missing.');
      }
      redirectUri = only;
    } else if (!matchRedirectUri(client.redirectUris, redirectUri)) {
      throw new PageError(
        400,
        'Invalid redirect URI',
        'The redirect_uri is not registered for this application, so you are not sent back to it.',
      );
    }
    const state = p.raw.get('state') ?? undefined;
    const target = { redirectUri, state };
    const fail = (code: OAuthErrorCode, description: string) =>
      new RedirectError(target, code, description, client);
    try {
      const responseType = p.get('response_type');
      if (responseType === undefined) throw fail('invalid_request', 'response_type is missing');
      // OAuth 2.1 §4.1.1: only the authorization code flow.
      if (responseType !== 'code')
        throw fail('unsupported_response_type', 'Only response_type=code is supported');
      p.get('state');
      // RFC 7636 §4.4.1 and OAuth 2.1 §7.5.2: PKCE is mandatory, S256 only.
      const challenge = p.get('code_challenge');
      if (challenge === undefined)
        throw fail('invalid_request', 'code_challenge is required (PKCE with S256)');
      const method = p.get('code_challenge_method');
      if (method === undefined)
        throw fail('invalid_request', 'code_challenge_method is required and must be S256');
      if (method !== 'S256')
        throw fail('invalid_request', `code_challenge_method ${method} is not supported; use S256`);
      if (!isS256Challenge(challenge))
        throw fail('invalid_request', 'code_challenge is not a valid S256 challenge');
      // RFC 8707 §2: the resource is mandatory here (docs/contract.md#the-oauth-flow), exactly one, and one of ours.
      const resources = p.all('resource');
      if (resources.length === 0 || resources[0] === '') throw fail('invalid_target', 'resource is required');
      if (resources.length > 1) throw fail('invalid_target', 'Send exactly one resource');
      const resource = resolveResource(ctx.config, resources[0]!);
      if (!resource) throw fail('invalid_target', 'The resource is not one this server issues tokens for');
      const scopes = parseScope(p.get('scope'), resource.kind);
      return { client, redirectUri, state, codeChallenge: challenge, resource, scopes, query };
    } catch (e) {
      if (e instanceof OAuthError) throw fail(e.code, e.description);
      throw e;
    }
  }

  function redirect(reply: FastifyReply, status: 302 | 303, to: string): FastifyReply {
    return reply.code(status).header('location', to).header('cache-control', 'no-store').send();
  }

  function redirectError(reply: FastifyReply, status: 302 | 303, e: RedirectError): FastifyReply {
    return redirect(
      reply,
      status,
      withParams(e.target.redirectUri, {
        error: e.code,
        error_description: e.description,
        state: e.target.state,
        iss: issuer(),
      }),
    );
  }

  /**
   * Runs a step; a RedirectError goes back to the client, anything else to the page error handler. An error in the
   * request of a self-registered client is shown as a page instead while that client has never been used or nobody
   * is signed in: otherwise anyone could register a URL and have this server bounce visitors to it at once
   * (RFC 9700 §4.11.2, MCP authorization "Open Redirection").
   */
  async function step(
    request: FastifyRequest,
    reply: FastifyReply,
    status: 302 | 303,
    fn: () => Promise<FastifyReply>,
  ): Promise<FastifyReply> {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof RedirectError)) throw e;
      if (e.requestOf && !(await mayRedirectErrors(e.requestOf, request))) {
        throw new PageError(400, 'The application sent an invalid request', `${e.description} (${e.code}).`);
      }
      return redirectError(reply, status, e);
    }
  }

  async function mayRedirectErrors(client: ResolvedClient, request: FastifyRequest): Promise<boolean> {
    if (client.kind === 'preregistered') return true;
    return (await currentUser(ctx, request)) !== undefined && (await registry.hasBeenUsed(client.clientId));
  }

  const queryOf = (url: string) => {
    const i = url.indexOf('?');
    return i < 0 ? '' : url.slice(i + 1);
  };

  // GET /oauth2/auth: the authorization endpoint (RFC 6749 §3.1).
  app.get('/oauth2/auth', async (request, reply) =>
    step(request, reply, 302, async () => {
      const req = await validate(queryOf(request.url), request.ip);
      const user = await currentUser(ctx, request);
      if (!user) {
        return redirect(reply, 302, `/sign-in?next=${encodeURIComponent(`/oauth2/auth?${req.query}`)}`);
      }
      if (req.resource.kind === 'user') return consentPage(reply, request, req, user.userId, undefined);
      const memberships = await listMemberships(ctx.db, user.userId);
      if (memberships.length === 0) {
        throw new RedirectError(req, 'access_denied', 'The signed-in user is not a member of any agency');
      }
      if (memberships.length === 1)
        return consentPage(reply, request, req, user.userId, memberships[0]!.agency.id);
      const username = (await findUserById(ctx.db, user.userId))?.username ?? '';
      const csrf = csrfToken(ctx, request, reply);
      return sendPage(
        reply,
        200,
        'Choose an agency',
        markup`<p>${req.client.name ?? req.client.clientId} wants to connect to one of your agencies. Which one?</p>
<form method="get" action="/oauth2/auth/consent">
  <input type="hidden" name="request" value="${req.query}">
  <fieldset><legend>Agency</legend>
  ${memberships.map(
    (m, i) =>
      markup`<label><input type="radio" name="agency_id" value="${m.agency.id}"${i === 0 ? markup` checked` : ''}> ${m.agency.name} <span class="muted">(your role: ${m.member.role})</span></label>`,
  )}
  </fieldset>
  <div class="actions"><button type="submit" class="primary">Continue</button></div>
</form>`,
        { signedInAs: username, csrf },
      );
    }),
  );

  // GET /oauth2/auth/consent: the consent page for the chosen agency.
  app.get('/oauth2/auth/consent', async (request, reply) => {
    const q = request.query as Record<string, unknown>;
    const query = typeof q['request'] === 'string' ? q['request'] : '';
    return step(request, reply, 302, async () => {
      const req = await validate(query, request.ip);
      const user = await currentUser(ctx, request);
      if (!user)
        return redirect(reply, 302, `/sign-in?next=${encodeURIComponent(`/oauth2/auth?${req.query}`)}`);
      const agencyId = typeof q['agency_id'] === 'string' ? q['agency_id'] : undefined;
      if (req.resource.kind === 'agency' && !agencyId)
        throw new PageError(400, 'Choose an agency', 'No agency was chosen.');
      return consentPage(reply, request, req, user.userId, agencyId);
    });
  });

  interface ConsentModel {
    role: Role | undefined;
    agencyName: string | undefined;
    memberId: string | undefined;
    offered: Permission[];
    writeRequested: boolean;
    writeOffered: boolean;
    writeRefusal: string | undefined;
  }

  async function consentModel(
    req: AuthorizationRequest,
    userId: string,
    agencyId: string | undefined,
  ): Promise<ConsentModel> {
    const writeRequested = req.scopes.includes(SCOPES.agencyWrite);
    if (req.resource.kind === 'user') {
      return {
        role: undefined,
        agencyName: undefined,
        memberId: undefined,
        offered: [],
        writeRequested,
        writeOffered: false,
        writeRefusal: undefined,
      };
    }
    const member = agencyId ? await activeMembership(ctx.db, userId, agencyId) : undefined;
    const agency = member ? await findAgency(ctx.db, member.agency_id) : undefined;
    if (!member || !agency) {
      throw new PageError(403, 'Not a member', 'You are not an active member of that agency.');
    }
    const agencyAllowsWrite = agency.agent_write_enabled === 1;
    const offered = offerablePermissions({
      role: member.role,
      wantsWrite: writeRequested,
      agencyAllowsWrite,
    });
    const writeOffered = writeRequested && agencyAllowsWrite && roleHasWrite(member.role);
    const writeRefusal = !writeRequested
      ? undefined
      : !roleHasWrite(member.role)
        ? `Write access is not offered: your role (${member.role}) cannot make changes.`
        : !agencyAllowsWrite
          ? `Write access is not offered: ${agency.name} does not allow agents to make changes.`
          : undefined;
    return {
      role: member.role,
      agencyName: agency.name,
      memberId: member.id,
      offered,
      writeRequested,
      writeOffered,
      writeRefusal,
    };
  }

  async function consentPage(
    reply: FastifyReply,
    request: Parameters<typeof currentUser>[1],
    req: AuthorizationRequest,
    userId: string,
    agencyId: string | undefined,
  ): Promise<FastifyReply> {
    const m = await consentModel(req, userId, agencyId);
    const csrf = csrfToken(ctx, request, reply);
    const username = (await findUserById(ctx.db, userId))?.username ?? '';
    const name = req.client.name ?? req.client.clientId;
    const host = clientHost(req.client);
    const redirect = new URL(req.redirectUri);
    const redirectHost = redirect.host || `${redirect.protocol}`;
    const loopback = isLoopbackRedirect(req.redirectUri);
    const shownScopes = req.scopes.filter((s) => s !== SCOPES.agencyWrite || m.writeOffered);
    // CSP form-action must let the form's redirect reach the client (browsers apply it to redirects after submit).
    const redirectSource =
      redirect.protocol === 'http:' || redirect.protocol === 'https:' ? redirect.origin : redirect.protocol;
    reply.header('content-security-policy', contentSecurityPolicy(["'self'", redirectSource]));
    return sendPage(
      reply,
      200,
      `Connect ${name}`,
      markup`<p><strong>${name}</strong>${host ? markup` <span class="muted">(${host})</span>` : ''} wants to act for you${m.agencyName ? markup` in <strong>${m.agencyName}</strong>${m.role ? markup` <span class="muted">(your role: ${m.role})</span>` : ''}` : ''}.</p>
${req.client.kind === 'dcr' ? markup`<p class="muted">This application registered itself; its name is not verified. Check the address you are sent back to.</p>` : ''}
<p>After you decide, you go back to <strong>${redirectHost}</strong>.</p>
${loopback ? markup`<p class="warning" role="note">This application receives the answer on your own computer (${redirectHost}). Continue only if you started this from an application running on this device.</p>` : ''}
<h2>It asks to</h2>
<ul class="scopes">${shownScopes.map((s) => markup`<li>${SCOPE_LABELS[s] ?? s} <code class="muted">${s}</code></li>`)}</ul>
${m.writeRefusal ? markup`<p class="muted">${m.writeRefusal}</p>` : ''}
<form method="post" action="/oauth2/auth/consent">
  <input type="hidden" name="csrf" value="${csrf}">
  <input type="hidden" name="request" value="${req.query}">
  ${agencyId ? markup`<input type="hidden" name="agency_id" value="${agencyId}">` : ''}
  ${
    m.offered.length
      ? markup`<fieldset><legend>What the application may use of your permissions</legend>
  ${m.offered.map(
    (perm) =>
      markup`<label><input type="checkbox" name="ceiling" value="${perm}" checked> ${PERMISSION_LABELS[perm]} <code class="muted">${perm}</code></label>`,
  )}
  </fieldset>`
      : ''
  }
  ${
    req.scopes.includes(SCOPES.offline)
      ? ''
      : markup`<label><input type="checkbox" name="stay_connected" value="on" checked> Stay connected: the application may renew its access without asking you again, until you disconnect it</label>`
  }
  <div class="actions">
    <button type="submit" name="decision" value="allow" class="primary">Allow</button>
    <button type="submit" name="decision" value="deny">Deny</button>
  </div>
</form>`,
      { signedInAs: username, csrf },
    );
  }

  // POST /oauth2/auth/consent: the member's decision.
  app.post('/oauth2/auth/consent', async (request, reply) => {
    const form = request.body;
    if (!(form instanceof URLSearchParams)) throw new PageError(400, 'Bad request', 'Send the consent form.');
    checkCsrf(ctx, request, form);
    return step(request, reply, 303, async () => {
      const req = await validate(form.get('request') ?? '', request.ip);
      const user = await currentUser(ctx, request);
      if (!user)
        return redirect(reply, 303, `/sign-in?next=${encodeURIComponent(`/oauth2/auth?${req.query}`)}`);
      const decision = form.getAll('decision');
      if (decision.length !== 1 || (decision[0] !== 'allow' && decision[0] !== 'deny')) {
        throw new PageError(400, 'Bad request', 'Choose Allow or Deny.');
      }
      if (decision[0] === 'deny')
        throw new RedirectError(req, 'access_denied', 'The user denied the request');
      const agencyId = form.get('agency_id') ?? undefined;
      const m = await consentModel(req, user.userId, req.resource.kind === 'agency' ? agencyId : undefined);
      const ticked = form.getAll('ceiling');
      for (const t of ticked) {
        if (!isPermission(t) || !m.offered.includes(t)) {
          throw new PageError(400, 'Bad request', `The permission ${t} cannot be granted here.`);
        }
      }
      const ceiling = m.offered.filter((p) => ticked.includes(p));
      if (req.resource.kind === 'agency' && ceiling.length === 0) {
        throw new PageError(400, 'Nothing to allow', 'Tick at least one permission, or choose Deny.');
      }
      // RFC 6749 §3.3: the granted scope may be narrower than requested; write only when it can be used.
      const grantsWrite = m.writeOffered && ceiling.some(isWritePermission);
      const scopes = req.scopes.filter((s) => s !== SCOPES.agencyWrite || grantsWrite);
      // Hosts that never ask for offline_access lose the connection when the 1-hour access token expires. RFC 6749
      // §3.3 lets the granted scope differ from the requested one (the token response then names it), and RFC 6749
      // §5.1 leaves issuing a refresh token to the server: the member may grant "stay connected" on consent.
      if (!scopes.includes(SCOPES.offline) && form.get('stay_connected') === 'on')
        scopes.push(SCOPES.offline);
      const code = randomSecret();
      const now = ctx.clock.now();
      await ctx.db.transaction().execute(async (trx) => {
        const connection = await createPendingConnection(trx, ctx.clock, {
          userId: user.userId,
          agencyId: req.resource.kind === 'agency' ? (agencyId ?? null) : null,
          memberId: m.memberId ?? null,
          clientId: req.client.clientId,
          resource: req.resource.uri,
          scopes,
          ceiling,
          pendingUntil: now + CODE_TTL_MS,
        });
        await trx
          .insertInto('authorization_codes')
          .values({
            hash: hashSecret(code),
            connection_id: connection.id,
            client_id: req.client.clientId,
            user_id: user.userId,
            redirect_uri: req.redirectUri,
            code_challenge: req.codeChallenge,
            resource: req.resource.uri,
            scope: scopes.join(' '),
            created_at: now,
            expires_at: now + CODE_TTL_MS,
            consumed_at: null,
          })
          .execute();
        await audit(trx, ctx.clock, {
          type: 'connection.created',
          agencyId: connection.agency_id,
          memberId: connection.member_id,
          connectionId: connection.id,
          actorUserId: user.userId,
          detail: { client_id: req.client.clientId, scopes, ceiling },
        });
      });
      request.log.info({ client_id: req.client.clientId, user_id: user.userId }, 'authorization granted');
      // Housekeeping on the (rare) consent path rather than a timer: expired codes and abandoned pending grants.
      await pruneExpiredGrants(ctx.db, ctx.clock);
      // RFC 6749 §4.1.2 and RFC 9207 §2: code, state and iss.
      return redirect(reply, 303, withParams(req.redirectUri, { code, state: req.state, iss: issuer() }));
    });
  });
}
