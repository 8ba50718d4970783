import {
  type CallToolResult,
  McpServer,
  type McpServerFactory,
  type ServerContext,
  type StandardSchemaWithJSON,
} from '@modelcontextprotocol/server';
import type { z } from 'zod';
import type { ErrorBody } from '../http/errors.js';
import { LIST_WITHOUT_NOTIFICATIONS } from '../mcp-kit/capabilities.js';
import { checkParamsBeforeHandlers } from '../mcp-kit/invalid-params.js';
import { MCP_PROTOCOL_VERSIONS } from '../mcp-kit/protocol-versions.js';
import {
  precompiledSchema,
  sharedJsonSchemaValidator,
  toolInputSchema,
} from '../mcp-kit/schema-validator.js';
import { type AgencyCall, agencyCallOf } from './auth.js';
import type { DashboardGateway } from './gateway.js';
import { AGENCY_TOOLS, type AgencyToolDefinition } from './tools.js';

/** docs/contract.md#versioning: the agency MCP server is at its own version 1.0.0. */
export const AGENCY_SERVER_INFO = {
  name: 'svc-agency-mcp',
  title: 'Svc agency MCP server',
  version: '1.0.0',
};

export const AGENCY_SERVER_INSTRUCTIONS = [
  'This server acts for one member of one agency, within the permissions the member granted this connection.',
  'Start with get_agency. Lists page with limit and cursor (pass next_cursor back as cursor).',
  'Tools that make changes need the agency:mcp:write scope and are listed only when the connection may use them.',
].join(' ');

/** tools/list depends on the caller's permissions: a private, short-lived cache hint (MCP 2026-07-28 caching). */
const PRIVATE_LIST_HINT = { ttlMs: 0, cacheScope: 'private' as const };
const PUBLIC_HINT = { ttlMs: 300_000, cacheScope: 'public' as const };

interface CompiledTool {
  definition: AgencyToolDefinition;
  config: {
    title: string;
    description: string;
    inputSchema: StandardSchemaWithJSON<Record<string, unknown>, Record<string, unknown>>;
    outputSchema: StandardSchemaWithJSON<unknown, unknown>;
    annotations: AgencyToolDefinition['annotations'];
  };
}

const COMPILED: readonly CompiledTool[] = AGENCY_TOOLS.map((definition) => ({
  definition,
  config: {
    title: definition.title,
    description: definition.description,
    inputSchema: toolInputSchema(definition.inputSchema),
    outputSchema: precompiledSchema(definition.outputSchema as z.ZodType<unknown>),
    annotations: definition.annotations,
  },
}));

/**
 * One McpServer per request (stateless serving). For tools/list only the tools the effective permissions allow are
 * registered (docs/contract.md#agency-mcp-server); for other requests all are, so that a call outside the permissions reaches the dashboard
 * API and comes back as a tool error naming the missing permission.
 */
export function agencyServerFactory(gateway: DashboardGateway): McpServerFactory {
  checkParamsBeforeHandlers();
  return ({ authInfo }) => {
    const server = new McpServer(AGENCY_SERVER_INFO, {
      instructions: AGENCY_SERVER_INSTRUCTIONS,
      capabilities: { logging: {}, tools: LIST_WITHOUT_NOTIFICATIONS },
      supportedProtocolVersions: MCP_PROTOCOL_VERSIONS,
      jsonSchemaValidator: sharedJsonSchemaValidator,
      cacheHints: { 'tools/list': PRIVATE_LIST_HINT, 'server/discover': PUBLIC_HINT },
    });
    for (const tool of toolsToRegister(authInfo?.extra?.['agency'] as AgencyCall | undefined)) {
      server.registerTool(tool.definition.name, tool.config, (args, call) =>
        runTool(gateway, tool.definition, args as Record<string, unknown>, call),
      );
    }
    return server;
  };
}

const BY_NAME = new Map<string, CompiledTool>(COMPILED.map((t) => [t.definition.name, t]));

/**
 * tools/list: the tools the effective permissions allow. tools/call: only the called tool (registering fifteen tools
 * per request was a third of a call's CPU). An unknown name registers all, so that the tools capability is declared
 * and the SDK answers as MCP specifies for an unknown tool (-32602 naming it, HTTP 200), not "method not found".
 * Anything else (initialize, server/discover): all, so the tools capability is declared.
 */
function toolsToRegister(call: AgencyCall | undefined): readonly CompiledTool[] {
  if (call?.permissions) return COMPILED.filter((t) => call.permissions!.has(t.definition.permission));
  if (call?.calledTool !== undefined) {
    const one = BY_NAME.get(call.calledTool);
    return one ? [one] : COMPILED;
  }
  return COMPILED;
}

async function runTool(
  gateway: DashboardGateway,
  tool: AgencyToolDefinition,
  args: Record<string, unknown>,
  call: ServerContext,
): Promise<CallToolResult> {
  const caller = agencyCallOf(call.http?.authInfo);
  // A 401 or 503 is marked on the caller: the endpoint then answers it instead of this tool error.
  const res = await gateway.callFor(caller, call.http?.authInfo?.token ?? '', tool.operation, args);
  if (res.status < 300) return toolResult(res.body as Record<string, unknown>);
  return toolError(res.body as ErrorBody);
}

/** A refusal of the dashboard API as a tool error naming its code and parameter (docs/contract.md#agency-mcp-server). */
export function toolError(body: ErrorBody) {
  const { message, code, param } = body.error;
  // In the order the SDK writes a tool error, so that the fast path's bytes equal the SDK's.
  return {
    content: [{ type: 'text' as const, text: `${message} (${code}${param ? `, ${param}` : ''})` }],
    isError: true,
  };
}

/** A tool's success: the object as structured content and a short text rendering of it. */
export function toolResult(object: Record<string, unknown>) {
  return { content: [{ type: 'text' as const, text: summarize(object) }], structuredContent: object };
}

/** A short text rendering beside the structured content (MCP tools: structured results SHOULD also be in text). */
export function summarize(o: Record<string, unknown>): string {
  if (o['object'] === 'list') {
    const data = o['data'] as Record<string, unknown>[];
    const items = data.map(label).join('; ');
    const more = o['has_more'] ? ` More: pass cursor "${String(o['next_cursor'])}".` : '';
    return `${data.length} item${data.length === 1 ? '' : 's'}${items ? `: ${items}` : ''}.${more}`;
  }
  return `${String(o['object'])} ${label(o)}`;
}

function label(o: Record<string, unknown>): string {
  const name = o['name'] ?? o['title'] ?? o['username'] ?? o['body'];
  return name === undefined ? String(o['id']) : `${String(name)} (${String(o['id'])})`;
}
