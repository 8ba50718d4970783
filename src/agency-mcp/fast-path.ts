import type { ErrorBody } from '../http/errors.js';
import {
  type CanonicalToolCall,
  canonicalToolCall,
  canonicalToolCallWithArguments,
  type FastAnswer,
  type FastPath,
  MODERN_REVISION,
  toolResultAnswer,
} from '../mcp-kit/fast-path.js';
import { MCP_PROTOCOL_VERSIONS } from '../mcp-kit/protocol-versions.js';
import { type AgencyCall, agencyCallOf } from './auth.js';
import type { DashboardGateway } from './gateway.js';
import { AGENCY_SERVER_INFO, toolError, toolResult } from './server.js';
import { AGENCY_TOOLS, type AgencyToolDefinition } from './tools.js';

const LEGACY_REVISIONS = MCP_PROTOCOL_VERSIONS.filter((v) => v !== MODERN_REVISION);

/** Read tools a call may name with no arguments at all (the only reads `canonicalToolCall` recognises). */
const NO_ARGUMENT_READ_TOOLS = new Map<string, AgencyToolDefinition>(
  AGENCY_TOOLS.filter((t) => !t.write && t.inputSchema.safeParse({}).success).map((t) => [t.name, t]),
);
/** Write tools: an agent creating tasks or notes in a loop calls them as often as the reads. */
const WRITE_TOOLS = new Map<string, AgencyToolDefinition>(
  AGENCY_TOOLS.filter((t) => t.write).map((t) => [t.name, t]),
);

/**
 * `tools/call` answered without building an SDK server, through the same gateway and dashboard API operation as the
 * registered tool: a read tool without arguments (get_agency, list_members, list_clients, list_projects, list_tasks),
 * or a write tool whose arguments pass its input schema, validated as the SDK validates them. The shared recognisers
 * decide what is canonical. Any other request goes to the SDK, which stays the authority: reads with arguments,
 * invalid arguments (the SDK names the field), and a read the dashboard API refuses. A write the dashboard API refuses
 * is answered here with the tool error the SDK would send, so that the write is never attempted twice.
 */
export function agencyFastPath(gateway: DashboardGateway): FastPath {
  return async (request) => {
    const name = (request.body as { params?: { name?: unknown } } | undefined)?.params?.name;
    if (typeof name !== 'string' || !request.mcpAuth) return undefined;
    const caller = agencyCallOf(request.mcpAuth);
    if (!caller.dashboardToken) return undefined;
    const read = NO_ARGUMENT_READ_TOOLS.get(name);
    if (read) {
      const call = canonicalToolCall(request, name, LEGACY_REVISIONS);
      return call && answerRead(gateway, caller, read, call, request.mcpAuth.token);
    }
    const write = WRITE_TOOLS.get(name);
    const call = write && canonicalToolCallWithArguments(request, name, LEGACY_REVISIONS);
    const args = call && write.inputSchema.safeParse(call.arguments);
    if (!args?.success) return undefined;
    return answerWrite(gateway, caller, write!, call!, args.data, request.mcpAuth.token);
  };
}

async function answerRead(
  gateway: DashboardGateway,
  caller: AgencyCall,
  tool: AgencyToolDefinition,
  call: CanonicalToolCall,
  inbound: string,
): Promise<FastAnswer | undefined> {
  // The grant has ended, or a dependency is down: `callFor` marks it, and the endpoint answers 401 or 503 (its
  // interruption), as it does on the SDK path.
  const res = await gateway.callFor(caller, inbound, tool.operation, {});
  if (res.status >= 300) return undefined;
  return answer(call, toolResult(res.body as Record<string, unknown>));
}

async function answerWrite(
  gateway: DashboardGateway,
  caller: AgencyCall,
  tool: AgencyToolDefinition,
  call: CanonicalToolCall,
  args: Record<string, unknown>,
  inbound: string,
): Promise<FastAnswer> {
  const res = await gateway.callFor(caller, inbound, tool.operation, args);
  if (res.status < 300) return answer(call, toolResult(res.body as Record<string, unknown>));
  return answer(call, toolError(res.body as ErrorBody));
}

function answer(call: CanonicalToolCall, result: Record<string, unknown>): FastAnswer {
  return toolResultAnswer(call, result, AGENCY_SERVER_INFO);
}
