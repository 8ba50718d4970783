import type { AppContext } from '../context.js';
import { renderUser } from '../domain/resources.js';
import type { Principal } from '../tokens/verifier.js';
import { resolveVersion } from '../versions/resolve.js';

/** The caller's profile in the version GET /me would use for them (docs/contract.md#versioning: no header on MCP, so pin → baseline). */
export interface RenderedMe {
  version: string;
  user: Record<string, unknown>;
}

/** Undefined when the token's user no longer exists. */
export async function renderMe(ctx: AppContext, principal: Principal): Promise<RenderedMe | undefined> {
  // The same cached read GET /me uses, so both surfaces see a profile change at the same moment.
  const row = await ctx.users.get(principal.userId);
  if (!row) return undefined;
  const version = await resolveVersion(ctx, undefined, principal, row.api_version);
  return { version, user: ctx.versions.render('user', renderUser(row), version) };
}

/** `_meta` key naming the API version a result was rendered in, as `Svc-Version` does on REST (docs/contract.md#versioning). */
export const API_VERSION_META_KEY = 'svc/api-version';
