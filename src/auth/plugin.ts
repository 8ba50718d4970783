import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { pageScope } from '../web/page-scope.js';
import { restErrors } from '../http/rest-errors.js';
import { serveChangingDocument } from '../http/public-documents.js';
import { authorizeRoutes } from './authorize.js';
import { registrationRoutes } from './clients/registration.js';
import { ClientRegistry } from './clients/registry.js';
import { acceptForms } from '../web/form.js';
import { metadataRoutes } from './metadata.js';
import { oauthJsonErrors } from '../http/oauth-errors.js';
import { revokeRoutes } from './revoke.js';
import { sessionRoutes } from './sessions.js';
import { tokenRoutes } from './token.js';
import { tokenFastPath } from './token-fast-path.js';
import { ANY_ORIGIN } from './token-response.js';
import type { SurfaceServerOptions } from '../http/server.js';

/** The OAuth JSON endpoints' scope: POST /oauth/token, /oauth/revoke and /oauth/register (their modules name the rest). */
const OAUTH_PREFIX = '/oauth';

/**
 * Endpoints a browser-based client calls cross-origin (no cookies involved, so any origin may). The metadata document
 * and the JWK Set answer their own preflights as every public document does (http/public-documents.ts).
 */
const CORS_PATHS = ['/oauth/token', '/oauth/register', '/oauth/revoke'];

/** With TOKEN_FAST_PATH on, the refresh_token grant is answered beside Fastify (token-fast-path.ts). */
export function authServerOptions(ctx: AppContext): SurfaceServerOptions {
  return ctx.config.tokenFastPath ? { formFastPath: tokenFastPath(ctx) } : {};
}

/**
 * What the member-facing part of this host adds, handed over by the composition root so that `auth/` never imports
 * the folders built on top of it (dashboard, dashboard API).
 */
export interface MemberRoutes {
  /** Sign-in pages, registered in the pages scope before the authorization endpoint. */
  signIn(pages: FastifyInstance): Promise<void>;
  /** Member pages (dashboard), in the pages scope; they read client names from the registry. */
  dashboard(pages: FastifyInstance, registry: ClientRegistry): Promise<void>;
  /** The first-party dashboard API (REST errors), beside the session API. */
  api(app: FastifyInstance): Promise<void>;
}

/**
 * The authorization server at AUTH_URL: discovery and JWKS, the OAuth endpoints (RFC 6749 errors), the sign-in,
 * consent and dashboard pages (HTML errors), and the first-party session API (REST errors).
 */
export async function authSurface(
  app: FastifyInstance,
  ctx: AppContext,
  member: MemberRoutes,
): Promise<void> {
  await app.register(restErrors);
  app.removeContentTypeParser('text/plain');
  const registry = new ClientRegistry(ctx);

  // RFC 7517 JWK Set, served as the other public documents are (CORS, Cache-Control, an ETag to revalidate with);
  // verifiers may cache it briefly, and rotation keeps old keys published for the overlap.
  serveChangingDocument(app, '/.well-known/jwks.json', 'application/json; charset=utf-8', async () =>
    JSON.stringify(await ctx.keys.jwks()),
  );
  await metadataRoutes(app, ctx);
  for (const path of CORS_PATHS) {
    app.options(path, async (_request, reply) =>
      reply
        .code(204)
        .headers({
          'access-control-allow-origin': '*',
          'access-control-allow-methods': 'GET, POST, OPTIONS',
          'access-control-allow-headers': 'content-type, authorization, mcp-protocol-version',
          'access-control-max-age': '86400',
        })
        .send(),
    );
  }

  // OAuth JSON endpoints: RFC 6749 §5.2 errors, form bodies; under their prefix, so that a wrong method or path there
  // is answered in that shape too (Fastify keeps one not-found handler per prefix).
  await app.register(
    async (oauth) => {
      await oauth.register(oauthJsonErrors);
      acceptForms(oauth);
      oauth.addHook('onSend', async (_request, reply, payload) => {
        reply.header(...ANY_ORIGIN);
        return payload;
      });
      await tokenRoutes(oauth, ctx, registry);
      await revokeRoutes(oauth, ctx);
      await registrationRoutes(oauth, ctx);
    },
    { prefix: OAUTH_PREFIX },
  );

  // Pages: authorization endpoint, sign-in, consent, dashboard.
  await app.register(async (pages) => {
    pageScope(pages);
    await member.signIn(pages);
    await authorizeRoutes(pages, ctx, registry);
    await member.dashboard(pages, registry);
  });

  await sessionRoutes(app, ctx);
  await member.api(app);
}
