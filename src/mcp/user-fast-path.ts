import type { AppContext } from '../context.js';
import { callerOf } from '../mcp-kit/auth.js';
import { canonicalToolCall, type FastPath, MODERN_REVISION, toolResultAnswer } from '../mcp-kit/fast-path.js';
import { MCP_PROTOCOL_VERSIONS } from '../mcp-kit/protocol-versions.js';
import { renderMe } from './user-me.js';
import { SERVER_INFO } from './user-server.js';
import { getMeResult } from './user-tools.js';

const LEGACY_REVISIONS = MCP_PROTOCOL_VERSIONS.filter((v) => v !== MODERN_REVISION);

/** `tools/call get_me` without the SDK, in its canonical shape only; the same result the registered tool returns. */
export function getMeFastPath(ctx: AppContext): FastPath {
  return async (request) => {
    const call = canonicalToolCall(request, 'get_me', LEGACY_REVISIONS);
    if (!call || !request.mcpAuth) return undefined;
    const me = await renderMe(ctx, callerOf(request.mcpAuth));
    // Only the latest shape is certain to satisfy the tool's outputSchema as the SDK checks it; the rest go to the SDK.
    if (!me || me.version !== ctx.versions.latest) return undefined;
    return toolResultAnswer(call, getMeResult(me), SERVER_INFO);
  };
}
