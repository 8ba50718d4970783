import type { Config } from '../config/config.js';
import { urls } from '../context.js';
import { OAuthError } from '../http/oauth-errors.js';
import type { Params } from '../web/form.js';
import type { ResourceKind } from '../domain/scopes.js';

export type { ResourceKind };

/** The resources this authorization server issues tokens for (RFC 8707), and which scopes belong to each. */

export interface KnownResource {
  uri: string;
  kind: ResourceKind;
}

const SCHEME_AUTHORITY = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*)(.*)$/s;
/** RFC 3986 §2: a URI is printable ASCII without spaces (WHATWG's parser would accept, and encode, the rest). */
const URI_CHARACTERS = /^[\x21-\x7E]+$/;

/**
 * The canonical form of a resource indicator: scheme and host lower-cased, the rest byte for byte (docs/contract.md#the-oauth-flow).
 * RFC 8707 §2: an absolute URI without a fragment. Undefined when it is not one.
 */
export function canonicalResource(raw: string): string | undefined {
  if (raw.includes('#') || !URI_CHARACTERS.test(raw) || !URL.canParse(raw)) return undefined;
  const m = SCHEME_AUTHORITY.exec(raw);
  if (!m) return undefined;
  return m[1]!.toLowerCase() + m[2]!;
}

/** The resources tokens can be requested for: the agency MCP server always; the user resources behind the flag. */
export function knownResources(config: Config): KnownResource[] {
  const list: KnownResource[] = [{ uri: urls.agencyMcpResource(config), kind: 'agency' }];
  if (config.oauth.userResources) {
    list.push({ uri: urls.api(config), kind: 'user' }, { uri: urls.mcpResource(config), kind: 'user' });
  }
  return list;
}

/** The known resource a raw indicator names, or undefined (→ `invalid_target`, RFC 8707 §2). */
export function resolveResource(config: Config, raw: string): KnownResource | undefined {
  const canonical = canonicalResource(raw);
  if (canonical === undefined) return undefined;
  return knownResources(config).find((r) => canonicalResource(r.uri) === canonical);
}

/**
 * An optional `resource` at the token endpoint: it may be omitted; when sent it must match the one the grant was made
 * for (RFC 8707 §2.2, docs/contract.md#the-oauth-flow).
 */
export function checkTokenResource(p: Params, expected: string): void {
  const requested = requestedTokenResource(p);
  if (requested === null) return;
  if (requested === undefined || requested !== canonicalResource(expected)) {
    throw new OAuthError('invalid_target', 'The resource does not match the one this grant was made for');
  }
}

/**
 * The canonical `resource` a token request names: null when it names none, undefined when it names several or one
 * that is not an absolute URI (which checkTokenResource refuses).
 */
export function requestedTokenResource(p: Params): string | null | undefined {
  const all = p.all('resource').filter((r) => r !== '');
  if (all.length === 0) return null;
  return all.length === 1 ? canonicalResource(all[0]!) : undefined;
}
