import {
  type McpServer,
  ProtocolError,
  ProtocolErrorCode,
  type ReadResourceResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { AppContext } from '../context.js';
import { callerOf } from '../mcp-kit/auth.js';
import { API_VERSION_META_KEY, renderMe } from './user-me.js';

export const ME_URI = 'user://me';

export const ME_RESOURCE = {
  title: 'My profile',
  description: 'The signed-in user’s profile as JSON, the same object the get_me tool returns.',
  mimeType: 'application/json',
  // MCP 2026-07-28 caching: one user's data, so never from a shared cache; re-read rather than trust a copy.
  cacheHint: { cacheScope: 'private' as const, ttlMs: 0 },
};

export function registerUserResources(server: McpServer, ctx: AppContext): void {
  server.registerResource('me', ME_URI, ME_RESOURCE, async (_uri, call) => readMe(ctx, call));
}

async function readMe(ctx: AppContext, call: ServerContext): Promise<ReadResourceResult> {
  const me = await renderMe(ctx, callerOf(call.http?.authInfo));
  if (!me)
    throw new ProtocolError(ProtocolErrorCode.InvalidRequest, 'The user of this token no longer exists');
  return {
    contents: [{ uri: ME_URI, mimeType: 'application/json', text: JSON.stringify(me.user) }],
    _meta: { [API_VERSION_META_KEY]: me.version },
  };
}
