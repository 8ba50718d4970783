import type { CachedLookup } from '../store/cached-lookup.js';
import type { Principal } from '../tokens/verifier.js';
import type { VersionRegistry } from './registry.js';

/**
 * docs/contract.md#versioning: the header's version, else the caller's pin — the OAuth client's, then the user's account setting —
 * else the baseline. A pin naming a version no longer served falls through to the next rule.
 */
export async function resolveVersion(
  ctx: { clientPins: Pick<CachedLookup<string | null>, 'get'>; versions: VersionRegistry },
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
