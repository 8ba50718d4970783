import type { AppContext } from '../context.js';
import type { Principal } from '../tokens/verifier.js';

/**
 * SPEC §9.3: the header's version, else the caller's pin — the OAuth client's, then the user's account setting —
 * else the baseline. A pin naming a version no longer served falls through to the next rule.
 */
export async function resolveVersion(
  ctx: AppContext,
  requested: string | undefined,
  principal: Principal,
  userPin: string | null,
): Promise<string> {
  if (requested) return requested;
  if (principal.kind === 'oauth') {
    const clientPin = await ctx.clientPins.get(principal.clientId);
    if (ctx.versions.has(clientPin)) return clientPin;
  }
  if (ctx.versions.has(userPin)) return userPin;
  return ctx.versions.baseline;
}
