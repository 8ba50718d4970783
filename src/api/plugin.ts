import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { renderUser } from '../domain/resources.js';
import { findUserById } from '../domain/users.js';
import { authenticateRest, authenticationError } from '../http/rest-auth.js';
import { restErrors } from '../http/rest-errors.js';
import type { Principal } from '../tokens/verifier.js';
import { VERSION_HEADER } from '../versions/registry.js';
import { resolveVersion } from '../versions/resolve.js';
import { buildOpenApi } from './openapi.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's response shape depends on the API version (SPEC §9). */
    versioned?: boolean;
  }
  interface FastifyRequest {
    /** The version the `Svc-Version` header asked for, once validated. */
    requestedVersion: string | undefined;
  }
}

/** The REST API surface at BASE_URL (SPEC §4.1). */
export async function apiSurface(app: FastifyInstance, ctx: AppContext): Promise<void> {
  await app.register(restErrors);
  app.decorateRequest('requestedVersion', undefined);
  app.removeContentTypeParser('text/plain');

  app.addHook('onRequest', async (request, reply) => {
    const versioned = request.routeOptions.config.versioned === true;
    if (versioned) reply.header('vary', VERSION_HEADER);
    try {
      request.requestedVersion = ctx.versions.fromHeader(request.raw.rawHeaders);
    } catch (e) {
      if (versioned) throw e;
    }
    if (versioned) reply.header(VERSION_HEADER, request.requestedVersion ?? ctx.versions.baseline);
  });
  // SPEC §7.1: error responses carry Svc-Version too, on unversioned routes and unknown paths alike.
  app.addHook('onSend', async (request, reply) => {
    if (reply.statusCode >= 400 && !reply.hasHeader(VERSION_HEADER)) {
      reply.header(VERSION_HEADER, request.requestedVersion ?? ctx.versions.baseline);
    }
  });

  app.get('/health', async () => ({ status: 'healthy', uptime: Math.floor(process.uptime()) }));

  app.get('/me', { config: { versioned: true } }, async (request, reply) => {
    const principal = await authenticateRest(ctx, request, {
      audience: urls.api(ctx.config),
      accept: ['session', 'oauth'],
      scope: 'user:read',
    });
    const user = await currentUser(ctx, principal);
    const version = await resolveVersion(ctx, request.requestedVersion, principal, user.api_version);
    reply.header(VERSION_HEADER, version);
    return ctx.versions.render('user', renderUser(user), version);
  });

  let openApi: string | undefined;
  app.get('/openapi.json', async (_request, reply) => {
    openApi ??= JSON.stringify(buildOpenApi(ctx.config, ctx.versions));
    return reply
      .type('application/json; charset=utf-8')
      .header('cache-control', 'public, max-age=300')
      .send(openApi);
  });
}

async function currentUser(ctx: AppContext, principal: Principal) {
  const user = await findUserById(ctx.db, principal.userId);
  // The token verified but its user is gone: the credential is dead, not the route.
  if (!user)
    throw authenticationError('revoked', 'The user of this token no longer exists', urls.api(ctx.config));
  return user;
}
