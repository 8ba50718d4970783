import { createMcpHandler } from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type DocumentBuilders, servePublicDocuments } from '../http/public-documents.js';
import { type AppContext, publicPath, urls } from '../context.js';
import { authenticateMcpRequest, callerOf, type McpAuthPolicy, toAuthInfo } from '../mcp-kit/auth.js';
import { mountMcpEndpoint } from '../mcp-kit/endpoint.js';
import { allowedHostnames } from '../mcp-kit/host-guard.js';
import {
  protectedResourceMetadataUrl,
  registerProtectedResourceMetadata,
} from '../mcp-kit/protected-resource.js';
import { reportSdkError } from '../mcp-kit/sdk-errors.js';
import { getMeFastPath } from './user-fast-path.js';
import { userServerFactory } from './user-server.js';

/** The scope OAuth tokens need here (docs/contract.md#authentication); session tokens need none. */
const USER_READ = 'user:read';

/** The user MCP server at `{MCP_URL}/mcp` (docs/contract.md#mcp-servers); `companions` are the host's public documents. */
export async function mcpSurface(
  app: FastifyInstance,
  ctx: AppContext,
  companions: DocumentBuilders,
): Promise<void> {
  // Public URLs are known only once the surfaces listen (port 0 in tests), so everything URL-shaped is built lazily.
  const site = lazy(() => userMcpSite(ctx));
  registerProtectedResourceMetadata(app, '/mcp', publicPath(ctx.config, 'mcp'), () => ({
    resource: site().resource,
    authorizationServers: [urls.issuer(ctx.config)],
    scopesSupported: [USER_READ],
    resourceName: 'Svc user MCP server',
  }));
  // SEP-2127 server card, at `<mcp-url>/server-card` and the well-known location.
  servePublicDocuments(app, companions);
  const handler = createMcpHandler(userServerFactory(ctx), {
    maxRequestBodySize: ctx.config.bodyLimitBytes,
    onerror: (error) => reportSdkError(ctx.log, error),
  });
  app.addHook('onClose', async () => handler.close());
  await mountMcpEndpoint(app, {
    path: '/mcp',
    allowedHosts: () => site().allowedHosts,
    authenticate: async (request: FastifyRequest) => {
      const { token, principal } = await authenticateMcpRequest(ctx, request, site().policy);
      return toAuthInfo(token, principal, site().resourceUrl);
    },
    handler,
    ...(ctx.config.mcpFastPath ? { fastPath: getMeFastPath(ctx) } : {}),
    // A handler that could not answer marked why on the caller (user-me.ts): an outage, or a bug.
    interruption: (request) => (request.mcpAuth ? callerOf(request.mcpAuth).interruption : undefined),
  });
}

function userMcpSite(ctx: AppContext) {
  const resource = urls.mcpResource(ctx.config);
  const policy: McpAuthPolicy = {
    audience: resource,
    accept: ['session', 'oauth'],
    requiredScope: USER_READ,
    resourceMetadataUrl: protectedResourceMetadataUrl(resource),
  };
  return {
    resource,
    resourceUrl: new URL(resource),
    policy,
    allowedHosts: allowedHostnames(ctx.config, urls.of(ctx.config, 'mcp')),
  };
}

/** A value computed on first use and kept. */
export function lazy<T>(make: () => T): () => T {
  let value: T | undefined;
  let made = false;
  return () => {
    if (!made) {
      value = make();
      made = true;
    }
    return value as T;
  };
}
