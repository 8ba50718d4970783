import type { AppContext } from '../context.js';
import { renderUser } from '../domain/resources.js';
import type { McpCaller } from '../mcp-kit/auth.js';
import { resolveVersion } from '../versions/resolve.js';

/** The caller's profile in the version GET /me would use for them (docs/contract.md#versioning: no header on MCP, so pin → baseline). */
export interface RenderedMe {
  version: string;
  user: Record<string, unknown>;
}

/**
 * Undefined when the token's user no longer exists. A failure is marked on the caller, and thrown on: the endpoint
 * answers it as any error is answered (a database that cannot answer 503 with Retry-After, a bug 500, logged),
 * whichever path the request took.
 */
export async function renderMe(ctx: AppContext, caller: McpCaller): Promise<RenderedMe | undefined> {
  try {
    // The same cached read GET /me uses, so both surfaces see a profile change at the same moment.
    const row = await ctx.users.get(caller.principal.userId);
    if (!row) return undefined;
    const version = await resolveVersion(ctx, undefined, caller.principal, row.api_version);
    return { version, user: ctx.versions.render('user', renderUser(row), version) };
  } catch (e) {
    caller.interruption = { failed: e };
    throw e;
  }
}

/** `_meta` key naming the API version a result was rendered in, as `Svc-Version` does on REST (docs/contract.md#versioning). */
export const API_VERSION_META_KEY = 'svc/api-version';
