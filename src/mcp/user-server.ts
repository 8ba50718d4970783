import { McpServer, type McpServerFactory } from '@modelcontextprotocol/server';
import type { AppContext } from '../context.js';
import { LIST_WITHOUT_NOTIFICATIONS } from '../mcp-kit/capabilities.js';
import { checkParamsBeforeHandlers } from '../mcp-kit/invalid-params.js';
import { MCP_PROTOCOL_VERSIONS } from '../mcp-kit/protocol-versions.js';
import { sharedJsonSchemaValidator } from '../mcp-kit/schema-validator.js';
import { PACKAGE_IDENTITY } from '../base/package-identity.js';
import { registerUserResources } from './user-resources.js';
import { registerUserTools } from './user-tools.js';

export const USER_SERVER_INSTRUCTIONS = [
  'This server acts as one signed-in user of Svc: the user who owns the bearer token.',
  'It is read-only and shows only that user’s own data.',
  'Call get_me (or read the resource user://me) to learn who the user is: id, username and avatar URL.',
  'Objects are rendered in the user’s pinned API version, else the baseline; `_meta["svc/api-version"]` names it.',
].join(' ');

export const SERVER_INFO = {
  name: PACKAGE_IDENTITY.name,
  title: 'Svc user MCP server',
  version: PACKAGE_IDENTITY.version,
};

/** Static lists are the same for every caller and change only with a deploy (MCP 2026-07-28 caching). */
const LIST_HINT = { ttlMs: 300_000, cacheScope: 'public' as const };

/**
 * The user MCP server (docs/contract.md#mcp-servers): one fresh McpServer per request, as the SDK's stateless serving needs, built from
 * module-scope schemas and the shared validator so a construction costs little.
 */
export function userServerFactory(ctx: AppContext): McpServerFactory {
  checkParamsBeforeHandlers();
  return () => {
    const server = new McpServer(SERVER_INFO, {
      instructions: USER_SERVER_INSTRUCTIONS,
      // 2025 clients may set a log level (MCP 2025-11-25 server/utilities/logging); the server sends no log messages.
      capabilities: { logging: {}, tools: LIST_WITHOUT_NOTIFICATIONS, resources: LIST_WITHOUT_NOTIFICATIONS },
      supportedProtocolVersions: MCP_PROTOCOL_VERSIONS,
      jsonSchemaValidator: sharedJsonSchemaValidator,
      cacheHints: { 'tools/list': LIST_HINT, 'resources/list': LIST_HINT, 'server/discover': LIST_HINT },
    });
    registerUserTools(server, ctx);
    registerUserResources(server, ctx);
    return server;
  };
}
