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
  const clientPin = principal.kind === 'oauth' ? await ctx.clientPins.get(principal.clientId) : null;
  return pinnedVersion(ctx.versions, clientPin, userPin);
}

/** The rule without a header: the OAuth client's pin (null for other callers), then the user's, then the baseline. */
export function pinnedVersion(
  versions: VersionRegistry,
  clientPin: string | null,
  userPin: string | null,
): string {
  if (versions.has(clientPin)) return clientPin;
  if (versions.has(userPin)) return userPin;
  return versions.baseline;
}
