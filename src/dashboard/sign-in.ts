import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { MAX_PASSWORD_LENGTH } from '../domain/passwords.js';
import { createSession, endSession } from '../domain/sessions.js';
import { signInGuard } from '../auth/sign-in-guard.js';
import { issueSessionToken } from '../tokens/session-token.js';
import { markup, PageError } from '../web/html.js';
import { sendPage } from '../web/page-scope.js';
import { safeNext } from '../web/safe-next.js';
import { clientNetwork } from '../http/server.js';

/**
 * The sign-in page (username and password → a browser session cookie) and sign-out. Rate limited like the session
 * API, sharing its limiter keys: per address, and per username after failures.
 */
export async function signInRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const signIn = signInGuard(ctx);

  const form = (csrf: string, next: string, username = '', message?: string) => markup`
${message ? markup`<p class="error" role="alert">${message}</p>` : ''}
<form method="post" action="/sign-in">
  <input type="hidden" name="csrf" value="${csrf}">
  <input type="hidden" name="next" value="${next}">
  <label for="username">Username</label>
  <input type="text" id="username" name="username" value="${username}" autocomplete="username" autocapitalize="none" autocorrect="off" spellcheck="false" required maxlength="64">
  <label for="password">Password</label>
  <input type="password" id="password" name="password" autocomplete="current-password" required maxlength="${MAX_PASSWORD_LENGTH}">
  <div class="actions"><button type="submit" class="primary">Sign in</button></div>
</form>`;

  app.get('/sign-in', async (request, reply) => {
    const next = safeNext((request.query as Record<string, unknown>)['next']);
    if (await ctx.webSessions.currentUser(request)) return reply.code(303).header('location', next).send();
    return sendPage(reply, 200, 'Sign in', form(ctx.webSessions.csrfToken(request, reply), next));
  });

  app.post('/sign-in', async (request, reply) => {
    const body = request.body;
    if (!(body instanceof URLSearchParams)) throw new PageError(400, 'Bad request', 'Send the sign-in form.');
    ctx.webSessions.checkCsrf(request, body);
    const csrf = ctx.webSessions.csrfToken(request, reply);
    const next = safeNext(body.get('next') ?? undefined);
    const username = (body.get('username') ?? '').trim().slice(0, 64);
    const password = body.get('password') ?? '';
    if (!username || !password || password.length > MAX_PASSWORD_LENGTH) {
      return sendPage(reply, 400, 'Sign in', form(csrf, next, username, 'Enter your username and password.'));
    }
    const outcome = await signIn(clientNetwork(request), username, password, request.log);
    if (!outcome.ok && outcome.reason === 'rate_limited') {
      reply.header('retry-after', String(outcome.retryAfterSeconds));
      const message = 'Too many sign-in attempts. Wait a while and try again.';
      return sendPage(reply, 429, 'Sign in', form(csrf, next, username, message));
    }
    if (!outcome.ok) {
      const message = 'The username or password is incorrect.';
      return sendPage(reply, 401, 'Sign in', form(csrf, next, username, message));
    }
    const { user } = outcome;
    const session = await createSession(ctx.db, ctx.clock, user.id, ctx.config.sessionTtlSeconds, 'browser');
    ctx.webSessions.setSessionCookie(reply, await issueSessionToken(ctx, session));
    request.log.info({ user_id: user.id, session_id: session.id }, 'browser session created');
    return reply.code(303).header('location', next).send();
  });

  app.post('/sign-out', async (request, reply) => {
    const body = request.body;
    if (!(body instanceof URLSearchParams))
      throw new PageError(400, 'Bad request', 'Send the sign-out form.');
    ctx.webSessions.checkCsrf(request, body);
    const user = await ctx.webSessions.currentUser(request);
    if (user) await endSession(ctx, user.sessionId);
    ctx.webSessions.clearSessionCookie(reply);
    return reply.code(303).header('location', '/sign-in').send();
  });
}
