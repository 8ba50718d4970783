import type { ErrorBody } from '../http/errors.js';
import { canonicalToolCall, type FastPath, MODERN_REVISION, toolResultAnswer } from '../mcp-kit/fast-path.js';
import { MCP_PROTOCOL_VERSIONS } from '../mcp-kit/protocol-versions.js';
import { agencyCallOf } from './auth.js';
import type { DashboardGateway } from './gateway.js';
import { AGENCY_SERVER_INFO, refuse, toolResult } from './server.js';
import { AGENCY_TOOLS, type AgencyToolDefinition } from './tools.js';

const LEGACY_REVISIONS = MCP_PROTOCOL_VERSIONS.filter((v) => v !== MODERN_REVISION);

/** Read tools a call may name with no arguments at all (the only calls `canonicalToolCall` recognises). */
const NO_ARGUMENT_READ_TOOLS = new Map<string, AgencyToolDefinition>(
  AGENCY_TOOLS.filter((t) => !t.write && t.inputSchema.safeParse({}).success).map((t) => [t.name, t]),
);

/**
 * `tools/call` of a read tool without arguments (get_agency, list_members, list_clients, list_projects, list_tasks)
 * answered without building an SDK server, through the same gateway and dashboard API operation as the registered
 * tool; the shared `canonicalToolCall` decides what is canonical. Any other request, and any call the dashboard API
 * refuses, goes to the SDK, which stays the authority (and renders tool errors).
 */
export function agencyFastPath(gateway: DashboardGateway): FastPath {
  return async (request) => {
    const name = (request.body as { params?: { name?: unknown } } | undefined)?.params?.name;
    const tool = typeof name === 'string' ? NO_ARGUMENT_READ_TOOLS.get(name) : undefined;
    if (!tool || !request.mcpAuth) return undefined;
    const call = canonicalToolCall(request, tool.name, LEGACY_REVISIONS);
    if (!call) return undefined;
    const caller = agencyCallOf(request.mcpAuth);
    if (!caller.dashboardToken) return undefined;
    const res = await gateway.call(
      tool.operation,
      caller.dashboardToken,
      caller.principal.agencyId,
      {},
      caller.requestId,
    );
    // The grant has ended: the endpoint answers 401 (refusedDuringCall), as the SDK path does.
    if (res.status === 401)
      refuse(gateway, caller, request.mcpAuth.token, (res.body as ErrorBody).error.message);
    if (res.status >= 300) return undefined;
    const result = toolResult(res.body as Record<string, unknown>);
    // The SDK writes `_meta` (the server's identity) first on the modern wire and none on the 2025 wire.
    const shaped = call.wire === 'modern' ? { _meta: {}, ...result } : result;
    return toolResultAnswer(
      call,
      shaped as typeof shaped & { _meta: Record<string, unknown> },
      AGENCY_SERVER_INFO,
    );
  };
}
