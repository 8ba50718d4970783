import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type AppContext, urls } from '../context.js';
import { toRfc3339 } from '../base/clock.js';
import { issueText } from '../base/issue-text.js';
import { MAX_PASSWORD_LENGTH } from '../domain/passwords.js';
import { createSession, endSession } from '../domain/sessions.js';
import { ApiError } from '../http/errors.js';
import { authenticateRest } from '../http/rest-auth.js';
import { clientNetwork } from '../http/server.js';
import { issueSessionToken } from '../tokens/session-token.js';
import { signInGuard } from './sign-in-guard.js';

const SignInBody = z.object({
  username: z.string().min(1).max(64),
  password: z.string().min(1).max(MAX_PASSWORD_LENGTH),
});

const WRONG_CREDENTIALS = 'The username or password is incorrect';

/**
 * First-party sessions (docs/contract.md#demo-and-local-use): POST /api/sessions trades a username and password for a session token;
 * DELETE /api/sessions/current ends the session whose token is presented.
 */
export async function sessionRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const signIn = signInGuard(ctx);

  app.post('/api/sessions', async (request, reply) => {
    const { username, password } = parseBody(request.body);
    const outcome = await signIn(clientNetwork(request), username, password, request.log);
    if (!outcome.ok && outcome.reason === 'rate_limited') {
      throw new ApiError('rate_limited', 'Too many sign-in attempts; retry later', {
        headers: { 'retry-after': String(outcome.retryAfterSeconds) },
      });
    }
    if (!outcome.ok) throw new ApiError('invalid_credentials', WRONG_CREDENTIALS);
    const { user } = outcome;
    const session = await createSession(ctx.db, ctx.clock, user.id, ctx.config.sessionTtlSeconds);
    request.log.info({ user_id: user.id, session_id: session.id }, 'session created');
    return reply
      .code(201)
      .header('cache-control', 'no-store')
      .send({
        object: 'session',
        id: session.id,
        token: await issueSessionToken(ctx, session),
        expires_at: toRfc3339(session.expires_at),
      });
  });

  app.delete('/api/sessions/current', async (request, reply) => {
    const principal = await authenticateRest(ctx, request, {
      audience: urls.sessionApi(ctx.config),
      accept: ['session'],
    });
    if (principal.kind !== 'session') throw new Error('unreachable: only session tokens are accepted');
    await endSession(ctx, principal.sessionId);
    request.log.info({ session_id: principal.sessionId }, 'session revoked');
    return reply.code(204).send();
  });
}

function parseBody(body: unknown): z.infer<typeof SignInBody> {
  const parsed = SignInBody.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const param = issue.path.length ? String(issue.path[0]) : undefined;
  throw new ApiError(
    'invalid_request',
    param ? `${param}: ${issueText(issue.message)}` : 'Send a JSON object with username and password',
    param ? { param } : {},
  );
}
