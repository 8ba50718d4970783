import type { FastifyInstance, FastifyRequest } from 'fastify';
import { healthRoute } from '../http/health.js';
import { type DocumentBuilders, servePublicDocuments } from '../http/public-documents.js';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { authenticateRest, authenticationError } from '../http/rest-auth.js';
import { restErrors } from '../http/rest-errors.js';
import type { SurfaceServerOptions } from '../http/server.js';
import type { Principal } from '../tokens/verifier.js';
import { VERSION_HEADER } from '../versions/registry.js';
import { resolveVersion } from '../versions/resolve.js';
import { ME_ACCEPTS, ME_SCOPE, meBody } from './me.js';
import { meFastPath } from './me-fast-path.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The version the `Svc-Version` header asked for, once validated. */
    requestedVersion: string | undefined;
  }
}

/**
 * The REST host's server: every response, raw connection errors included, points agents at its AI catalog (RFC 8288
 * web linking), and those raw errors carry `Svc-Version` like every other error (docs/contract.md#errors). With
 * REST_FAST_PATH on, `GET /me` in its hottest shape is answered beside Fastify (me-fast-path.ts).
 */
export function apiServerOptions(ctx: AppContext, aiCatalogPath: string): SurfaceServerOptions {
  return {
    responseHeaders: { link: `<${aiCatalogPath}>; rel="ai-catalog"` },
    connectionErrorHeaders: () => ({ [VERSION_HEADER.toLowerCase()]: ctx.versions.baseline }),
    ...(ctx.config.restFastPath ? { fastPath: meFastPath(ctx) } : {}),
  };
}

/** The REST API surface at BASE_URL (docs/contract.md#rest-api); `companions` are the host's public documents, built by the composition root. */
export async function apiSurface(
  app: FastifyInstance,
  ctx: AppContext,
  companions: DocumentBuilders,
): Promise<void> {
  // docs/contract.md#errors: error responses carry Svc-Version too, on unversioned routes and unknown paths alike.
  await app.register(restErrors, {
    errorHeaders: (request) => ({
      [VERSION_HEADER]: request.requestedVersion ?? lenientVersion(ctx, request),
    }),
  });
  app.decorateRequest('requestedVersion', undefined);
  app.removeContentTypeParser('text/plain');

  healthRoute(app);

  app.get('/me', async (request, reply) => {
    // The version header is checked before anything else: a bad one is a 400 whatever the token (docs/contract.md#versioning).
    reply.header('vary', VERSION_HEADER);
    request.requestedVersion = ctx.versions.fromHeader(request.raw.rawHeaders);
    const principal = await authenticateRest(ctx, request, {
      audience: urls.api(ctx.config),
      accept: ME_ACCEPTS,
      scope: ME_SCOPE,
    });
    const user = await currentUser(ctx, principal);
    const version = await resolveVersion(ctx, request.requestedVersion, principal, user.api_version);
    reply.header(VERSION_HEADER, version);
    return meBody(ctx, user, version);
  });

  // The machine-readable companions (docs/contract.md#surfaces), generated from the running configuration.
  servePublicDocuments(app, companions);
}

async function currentUser(ctx: AppContext, principal: Principal) {
  const user = await ctx.users.get(principal.userId);
  // The token verified but its user is gone: the credential is dead, not the route.
  if (!user)
    throw authenticationError('revoked', 'The user of this token no longer exists', urls.api(ctx.config));
  return user;
}

/** The version an error on an unversioned path is labelled with: a valid header's, else the baseline. */
function lenientVersion(ctx: AppContext, request: FastifyRequest): string {
  try {
    return ctx.versions.fromHeader(request.raw.rawHeaders) ?? ctx.versions.baseline;
  } catch {
    return ctx.versions.baseline;
  }
}
