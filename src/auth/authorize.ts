import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { listMemberships } from '../domain/agencies.js';
import { issueAuthorizationCode } from '../domain/authorization-codes.js';
import { pruneExpiredHourly } from '../domain/pruning.js';
import { noteAnsweredError } from '../http/answered-error.js';
import { queryOf } from '../http/request-target.js';
import { signedInNav } from '../web/web-session.js';
import { PageError } from '../web/html.js';
import { contentSecurityPolicy, sendPage } from '../web/page-scope.js';
import {
  type AuthorizationRequest,
  RedirectError,
  type RequestResolvers,
  validateAuthorizationRequest,
} from './authorization-request.js';
import type { ResolvedClient } from './clients/client.js';
import { type ClientRegistry, UnknownClientError } from './clients/registry.js';
import { consentAnswer, consentModel, decideConsent } from './consent.js';
import { agencyChoiceView, consentFormActions, consentTitle, consentView } from './consent-page.js';
import { resolveResource } from './resource-indicator.js';
import { clientNetwork } from '../http/server.js';

/**
 * The authorization endpoint (RFC 6749 §3.1) and its pages: validate the request, make sure a member is signed in,
 * pick the agency, show the consent, and answer the client with a code (RFC 6749 §4.1.2) or an error
 * (§4.1.2.1), always with `iss` (RFC 9207). Each route reads as those steps; the checks live in
 * authorization-request.ts, the consent in consent.ts, the pages in consent-page.ts.
 */
export async function authorizeRoutes(
  app: FastifyInstance,
  ctx: AppContext,
  registry: ClientRegistry,
): Promise<void> {
  const flow = new AuthorizationFlow(ctx, registry);

  app.get('/oauth2/auth', async (request, reply) =>
    flow.step(request, reply, 302, async () => {
      const req = await flow.validate(queryOf(request.url), clientNetwork(request));
      const userId = await flow.signedIn(request);
      if (!userId) return signInFirst(reply, 302, req);
      if (req.resource.kind === 'user') return flow.consentPage(request, reply, req, userId, undefined);
      const memberships = await listMemberships(ctx.db, userId);
      if (memberships.length === 0) {
        throw new RedirectError(req, 'access_denied', 'The signed-in user is not a member of any agency');
      }
      if (memberships.length === 1)
        return flow.consentPage(request, reply, req, userId, memberships[0]!.agency.id);
      const nav = await flow.nav(request, reply, userId);
      return sendPage(reply, 200, 'Choose an agency', agencyChoiceView(req, memberships), nav);
    }),
  );

  app.get('/oauth2/auth/consent', async (request, reply) => {
    const query = request.query as Record<string, unknown>;
    return flow.step(request, reply, 302, async () => {
      const req = await flow.validate(stringOr(query['request'], ''), clientNetwork(request));
      const userId = await flow.signedIn(request);
      if (!userId) return signInFirst(reply, 302, req);
      const agencyId = stringOr(query['agency_id'], undefined);
      if (req.resource.kind === 'agency' && !agencyId)
        throw new PageError(400, 'Choose an agency', 'No agency was chosen.');
      return flow.consentPage(request, reply, req, userId, agencyId);
    });
  });

  app.post('/oauth2/auth/consent', async (request, reply) => {
    const form = request.body;
    if (!(form instanceof URLSearchParams)) throw new PageError(400, 'Bad request', 'Send the consent form.');
    ctx.webSessions.checkCsrf(request, form);
    return flow.step(request, reply, 303, async () => {
      const req = await flow.validate(form.get('request') ?? '', clientNetwork(request));
      const userId = await flow.signedIn(request);
      if (!userId) return signInFirst(reply, 303, req);
      if (consentAnswer(form) === 'deny')
        throw new RedirectError(req, 'access_denied', 'The user denied the request');
      const model = await consentModel(ctx.db, req, userId, form.get('agency_id') ?? undefined);
      const decision = decideConsent(form, req, model);
      const code = await issueAuthorizationCode(ctx.db, ctx.clock, {
        userId,
        agencyId: model.agency?.id ?? null,
        memberId: model.memberId ?? null,
        clientId: req.client.clientId,
        resource: req.resource.uri,
        scopes: decision.scopes,
        ceiling: decision.ceiling,
        redirectUri: req.redirectUri,
        codeChallenge: req.codeChallenge,
      });
      request.log.info({ client_id: req.client.clientId, user_id: userId }, 'authorization granted');
      // Housekeeping on the consent path rather than a timer: expired codes and abandoned pending grants.
      await pruneExpiredHourly(ctx.db, ctx.clock);
      // RFC 6749 §4.1.2 and RFC 9207 §2: code, state and iss.
      return redirect(reply, 303, flow.answer(req, { code, state: req.state }));
    });
  });
}

/** What the routes of the authorization endpoint share: validation, the signed-in member, and how errors answer. */
class AuthorizationFlow {
  private readonly resolvers: (requester: string) => RequestResolvers;

  constructor(
    private readonly ctx: AppContext,
    private readonly registry: ClientRegistry,
  ) {
    this.resolvers = (requester) => ({
      resolveClient: (clientId) => resolveClient(registry, clientId, requester),
      resolveResource: (raw) => resolveResource(ctx.config, raw),
    });
  }

  validate(query: string, requester: string): Promise<AuthorizationRequest> {
    return validateAuthorizationRequest(query, this.resolvers(requester));
  }

  async signedIn(request: FastifyRequest): Promise<string | undefined> {
    return (await this.ctx.webSessions.currentUser(request))?.userId;
  }

  nav(request: FastifyRequest, reply: FastifyReply, userId: string) {
    return signedInNav(this.ctx.db, this.ctx.webSessions, request, reply, userId);
  }

  /** The redirect URI with response parameters and `iss` (RFC 9207 §2), keeping its own query (RFC 6749 §3.1.2). */
  answer(target: { redirectUri: string }, params: Record<string, string | undefined>): string {
    const u = new URL(target.redirectUri);
    for (const [k, v] of Object.entries({ ...params, iss: urls.issuer(this.ctx.config) }))
      if (v !== undefined) u.searchParams.append(k, v);
    return u.toString();
  }

  async consentPage(
    request: FastifyRequest,
    reply: FastifyReply,
    req: AuthorizationRequest,
    userId: string,
    agencyId: string | undefined,
  ): Promise<FastifyReply> {
    const model = await consentModel(this.ctx.db, req, userId, agencyId, { now: this.ctx.clock.now() });
    const nav = await this.nav(request, reply, userId);
    reply.header('content-security-policy', contentSecurityPolicy(consentFormActions(req)));
    return sendPage(reply, 200, consentTitle(req, model), consentView(req, model, nav.csrf), nav);
  }

  /**
   * Runs a step; a RedirectError goes back to the client, anything else to the page error handler. An error in the
   * request of a self-registered client is shown as a page instead while that client has never been used or nobody
   * is signed in: otherwise anyone could register a URL and have this server bounce visitors to it at once
   * (RFC 9700 §4.11.2, MCP authorization "Open Redirection").
   */
  async step(
    request: FastifyRequest,
    reply: FastifyReply,
    status: 302 | 303,
    fn: () => Promise<FastifyReply>,
  ): Promise<FastifyReply> {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof RedirectError)) throw e;
      if (e.requestOf && !(await this.mayRedirectErrors(e.requestOf, request))) {
        throw new PageError(400, 'The application sent an invalid request', `${e.description} (${e.code}).`);
      }
      const error = { error: e.code, error_description: e.description, state: e.target.state };
      noteAnsweredError(request.raw, e.code);
      return redirect(reply, status, this.answer(e.target, error));
    }
  }

  private async mayRedirectErrors(client: ResolvedClient, request: FastifyRequest): Promise<boolean> {
    if (client.kind === 'preregistered') return true;
    return (await this.signedIn(request)) !== undefined && (await this.registry.hasBeenUsed(client.clientId));
  }
}

/** The client, or a page: an unknown client's redirect URI cannot be trusted (RFC 6749 §4.1.2.1). */
async function resolveClient(registry: ClientRegistry, clientId: string, requester: string) {
  try {
    return await registry.resolve(clientId, requester);
  } catch (e) {
    if (e instanceof UnknownClientError) throw new PageError(400, 'Unknown application', e.message);
    throw e;
  }
}

function redirect(reply: FastifyReply, status: 302 | 303, to: string): FastifyReply {
  return reply.code(status).header('location', to).header('cache-control', 'no-store').send();
}

/** Back to the authorization endpoint with the same request once the member has signed in. */
function signInFirst(reply: FastifyReply, status: 302 | 303, req: AuthorizationRequest): FastifyReply {
  return redirect(reply, status, `/sign-in?next=${encodeURIComponent(`/oauth2/auth?${req.query}`)}`);
}

function stringOr<T>(value: unknown, fallback: T): string | T {
  return typeof value === 'string' ? value : fallback;
}
