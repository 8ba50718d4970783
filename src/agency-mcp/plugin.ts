import { createMcpHandler } from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SCOPES } from '../domain/scopes.js';
import { type DocumentBuilders, servePublicDocuments } from '../http/public-documents.js';
import { type AppContext, publicPath, urls } from '../context.js';
import type { Access } from '../dashboard-api/resources.js';
import { McpAuthError } from '../mcp-kit/auth.js';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../http/dependency-outage.js';
import { mountMcpEndpoint, sendAuthError, sendJsonRpcError } from '../mcp-kit/endpoint.js';
import { JSON_RPC_ERRORS } from '../mcp-kit/json-rpc.js';
import { allowedHostnames } from '../mcp-kit/host-guard.js';
import { lazy } from '../mcp/plugin.js';
import {
  protectedResourceMetadataUrl,
  registerProtectedResourceMetadata,
} from '../mcp-kit/protected-resource.js';
import { reportSdkError } from '../mcp-kit/sdk-errors.js';
import {
  type AgencyCall,
  agencyAuthPolicy,
  authenticateAgencyRequest,
  insufficientScopeChallenge,
  toAgencyAuthInfo,
  unauthorized,
} from './auth.js';
import { agencyFastPath } from './fast-path.js';
import { DashboardGateway, ExchangeRefused, ExchangeUnavailable } from './gateway.js';
import { agencyServerFactory } from './server.js';
import { WRITE_TOOL_NAMES } from './tools.js';

/** A misconfigured deployment (the client secret) is not fixed in seconds: clients are told to wait longer. */
const MISCONFIGURED_RETRY_AFTER_SECONDS = 30;

/** docs/contract.md#the-oauth-flow lists these in the metadata; the AS takes them as aliases of agency:mcp:read / write (docs/contract.md#the-oauth-flow). */
const SCOPES_SUPPORTED = ['mcp:read', 'mcp:write'];

/**
 * The agency MCP server at `{AGENCY_MCP_URL}/mcp` (docs/contract.md#agency-mcp-server): an OAuth 2.1 protected resource
 * that acts for one member of one agency and reaches agency data only through the dashboard API (docs/contract.md#agency-mcp-server). `companions` are the host's public documents, built by the composition root.
 */
export async function agencyMcpSurface(
  app: FastifyInstance,
  ctx: AppContext,
  companions: DocumentBuilders,
): Promise<void> {
  const site = lazy(() => agencyMcpSite(ctx));
  // SEP-2127 server card, at `<mcp-url>/server-card` and the well-known location.
  servePublicDocuments(app, companions);
  registerProtectedResourceMetadata(app, '/mcp', publicPath(ctx.config, 'agency-mcp'), () => ({
    resource: site().resource,
    authorizationServers: [urls.issuer(ctx.config)],
    scopesSupported: SCOPES_SUPPORTED,
    resourceName: 'Svc agency MCP server',
  }));
  const gateway = new DashboardGateway(ctx);
  const handler = createMcpHandler(agencyServerFactory(gateway), {
    maxRequestBodySize: ctx.config.bodyLimitBytes,
    onerror: (error) => reportSdkError(ctx.log, error),
  });
  app.addHook('onClose', async () => handler.close());
  // After the body is parsed, before the SDK: the scope step-up (403) and the token exchange (401 when refused).
  app.addHook('preHandler', async (request, reply) =>
    prepareCall(gateway, site().metadataUrl, request, reply),
  );
  await mountMcpEndpoint(app, {
    path: '/mcp',
    allowedHosts: () => site().allowedHosts,
    authenticate: async (request) => {
      const { token, principal } = await authenticateAgencyRequest(ctx, request, site().policy);
      return toAgencyAuthInfo(token, principal, site().resourceUrl, request.id);
    },
    handler,
    ...(ctx.config.mcpFastPath ? { fastPath: agencyFastPath(gateway) } : {}),
    interruption: (request) => {
      const call = request.mcpAuth?.extra?.['agency'] as AgencyCall | undefined;
      if (call?.refused !== undefined)
        return { refused: unauthorized(site().metadataUrl, 'invalid_token', call.refused) };
      if (call?.failed !== undefined) return { failed: call.failed };
      return call?.unavailable === undefined ? undefined : { unavailable: call.unavailable };
    },
  });
}

function agencyMcpSite(ctx: AppContext) {
  const resource = urls.agencyMcpResource(ctx.config);
  const metadataUrl = protectedResourceMetadataUrl(resource);
  return {
    resource,
    resourceUrl: new URL(resource),
    metadataUrl,
    policy: agencyAuthPolicy(resource, metadataUrl),
    allowedHosts: allowedHostnames(ctx.config, urls.of(ctx.config, 'agency-mcp')),
  };
}

/** The JSON-RPC method and tool name of a parsed body, when it is a single request object. */
function rpcOf(body: unknown): { method: string | undefined; tool: string | undefined } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return NO_RPC;
  const b = body as { method?: unknown; params?: { name?: unknown } };
  const name = b.params?.name;
  return {
    method: typeof b.method === 'string' ? b.method : undefined,
    tool: typeof name === 'string' ? name : undefined,
  };
}

const NO_RPC = { method: undefined, tool: undefined };

async function prepareCall(
  gateway: DashboardGateway,
  metadataUrl: string,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply | undefined> {
  const auth = request.mcpAuth;
  if (!auth) return undefined;
  const { method, tool } = rpcOf(request.body);
  if (method !== 'tools/call' && method !== 'tools/list') return undefined;
  const call = auth.extra?.['agency'] as AgencyCall;
  if (method === 'tools/call') call.calledTool = tool ?? '';
  // docs/contract.md#tokens: a write tool with a read-only token is refused before anything runs, so the client steps up.
  if (
    method === 'tools/call' &&
    tool &&
    WRITE_TOOL_NAMES.has(tool) &&
    !call.principal.scopes.has(SCOPES.agencyWrite)
  ) {
    const message = 'This tool makes changes: authorize again with agency:mcp:write';
    return sendAuthError(
      request,
      reply,
      new McpAuthError(403, 'insufficient_scope', message, insufficientScopeChallenge(metadataUrl)),
    );
  }
  try {
    call.dashboardToken = await gateway.dashboardToken(auth.token);
    if (method === 'tools/list') call.permissions = await permissionsNow(gateway, call, auth.token);
  } catch (e) {
    if (e instanceof ExchangeUnavailable) {
      // The caller did nothing wrong: say so. An outage is logged once by the gateway's watch; anything else is this
      // deployment's to fix, and the log line names what.
      if (!e.outage) request.log.error({ err: e }, 'agency MCP cannot exchange tokens');
      reply.header(
        'retry-after',
        String(e.outage ? OUTAGE_RETRY_AFTER_SECONDS : MISCONFIGURED_RETRY_AFTER_SECONDS),
      );
      const message = 'The agency MCP server cannot reach its authorization server right now; retry later';
      return sendJsonRpcError(request, reply, 503, JSON_RPC_ERRORS.serverError, message);
    }
    if (!(e instanceof ExchangeRefused)) throw e;
    gateway.forget(auth.token, call.principal.connectionId);
    return sendAuthError(request, reply, unauthorized(metadataUrl, 'invalid_token', e.message));
  }
  return undefined;
}

/** The effective permissions now (docs/contract.md#permissions), as the dashboard API computes them on every call. */
async function permissionsNow(
  gateway: DashboardGateway,
  call: AgencyCall,
  inbound: string,
): Promise<ReadonlySet<string>> {
  // A 401 or 503 is marked on the call: the endpoint answers it before the SDK lists anything.
  const res = await gateway.callFor(call, inbound, 'access.get', {});
  return new Set(res.status === 200 ? (res.body as Access).permissions : []);
}
