import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { restErrors } from '../http/rest-errors.js';
import { sessionRoutes } from './sessions.js';

/** The authorization server at AUTH_URL: JWKS and first-party sessions (OAuth endpoints and pages build on this). */
export async function authSurface(app: FastifyInstance, ctx: AppContext): Promise<void> {
  await app.register(restErrors);
  app.removeContentTypeParser('text/plain');

  // RFC 7517 JWK Set; verifiers may cache it briefly, rotation keeps old keys published for the overlap.
  app.get('/.well-known/jwks.json', async (_request, reply) =>
    reply.header('cache-control', 'public, max-age=300').send(await ctx.keys.jwks()),
  );

  await sessionRoutes(app, ctx);
}
