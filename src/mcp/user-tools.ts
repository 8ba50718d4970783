import type { CallToolResult, McpServer, ServerContext } from '@modelcontextprotocol/server';
import type { AppContext } from '../context.js';
import { type User, UserSchema } from '../domain/resources.js';
import { callerOf } from '../mcp-kit/auth.js';
import { NO_ARGUMENTS, precompiledSchema } from '../mcp-kit/schema-validator.js';
import { API_VERSION_META_KEY, type RenderedMe, renderMe } from './user-me.js';

const USER_OUTPUT = precompiledSchema<User>(UserSchema);

export const GET_ME = {
  title: 'Get my profile',
  description:
    'Returns the profile of the signed-in user this server acts for: id, username and avatar URL (null when none ' +
    'is set). Takes no arguments. The same object as GET /me of the REST API, in the caller’s API version.',
  inputSchema: NO_ARGUMENTS,
  outputSchema: USER_OUTPUT,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
};

/** The user MCP server's tools, in the order `tools/list` shows them (registration order). */
export function registerUserTools(server: McpServer, ctx: AppContext): void {
  server.registerTool('get_me', GET_ME, async (_args, call) => getMe(ctx, call));
}

async function getMe(ctx: AppContext, call: ServerContext): Promise<CallToolResult> {
  const me = await renderMe(ctx, callerOf(call.http?.authInfo));
  if (!me) {
    return { isError: true, content: [{ type: 'text', text: 'The user of this token no longer exists.' }] };
  }
  return getMeResult(me);
}

/** get_me's result: the user as structured content, its JSON as text, and the API version it is rendered in. */
export function getMeResult(me: RenderedMe) {
  // `_meta` first: the order the SDK writes a result in, so the fast path's bytes equal the SDK's.
  return {
    _meta: { [API_VERSION_META_KEY]: me.version },
    content: [{ type: 'text' as const, text: JSON.stringify(me.user) }],
    structuredContent: me.user,
  };
}
