import type { IncomingMessage } from 'node:http';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import type { UserRow } from '../domain/users.js';
import type { FastResponse, RawFastPath } from '../http/server.js';
import type { Principal } from '../tokens/verifier.js';
import { VERSION_HEADER } from '../versions/registry.js';
import { pinnedVersion } from '../versions/resolve.js';
import { ME_ACCEPTS, ME_SCOPE, meBody } from './me.js';

/**
 * `GET /me` answered beside Fastify (http/server.ts) in its one hottest shape: exactly `GET /me`, no body, one bearer
 * token whose verification, liveness and user row (and, for an OAuth token without `Svc-Version`, its client's pin)
 * are all in the caches, and no `Svc-Version` or a valid one. Anything else — HEAD, a query, a cache miss, a token or
 * header that would be refused — returns undefined and goes to the route in plugin.ts, which stays the authority on
 * every error. The answer is the route's, byte for byte (`test/api/me-fast-path.test.ts`); the caches' hit counts are
 * the ones the route would have counted. Measured: see docs/performance.md (levers).
 */
export function meFastPath(ctx: AppContext): RawFastPath {
  const bodies = new WeakMap<UserRow, Map<string, string>>();
  return (request) => {
    if (request.method !== 'GET' || request.url !== '/me') return undefined;
    const caller = cachedCaller(ctx, request);
    if (!caller) return undefined;
    ctx.verifier.countCachedHit(caller.principal);
    ctx.users.countHit();
    return answer(bodyOf(ctx, bodies, caller.user, caller.version), caller.version);
  };
}

interface CachedCaller {
  principal: Principal;
  user: UserRow;
  version: string;
}

/** The caller, its user and its version when every one of them is answered from memory, else undefined. */
function cachedCaller(ctx: AppContext, request: IncomingMessage): CachedCaller | undefined {
  const headers = scanHeaders(request.rawHeaders);
  if (!headers) return undefined;
  const requested = headers.version ? validVersion(ctx, request.rawHeaders) : undefined;
  if (requested === false) return undefined;
  const principal = ctx.verifier.cachedPrincipal(headers.token, urls.api(ctx.config), ME_ACCEPTS);
  if (!principal || (principal.kind === 'oauth' && !principal.scopes.has(ME_SCOPE))) return undefined;
  const user = ctx.users.peek(principal.userId);
  if (!user) return undefined;
  const version = requested ?? cachedPinnedVersion(ctx, principal, user.api_version);
  if (version === undefined) return undefined;
  return { principal, user, version };
}

/** The `Svc-Version` header's version, undefined when absent, false when the route would refuse it. */
function validVersion(ctx: AppContext, rawHeaders: string[]): string | undefined | false {
  try {
    return ctx.versions.fromHeader(rawHeaders);
  } catch {
    return false;
  }
}

/** versions/resolve.ts's rule without a header, from the caches only: undefined when the client's pin is not cached. */
function cachedPinnedVersion(
  ctx: AppContext,
  principal: Principal,
  userPin: string | null,
): string | undefined {
  const clientPin = principal.kind === 'oauth' ? ctx.clientPins.peek(principal.clientId) : null;
  return clientPin === undefined ? undefined : pinnedVersion(ctx.versions, clientPin, userPin);
}

const BEARER_PREFIX = /^bearer /i;

/**
 * One pass over the raw headers: the token of the one `Authorization: Bearer <token>` header, and whether
 * `Svc-Version` was sent; undefined for a request the fast path leaves alone (no or several Authorization headers,
 * another scheme, or a body: `Content-Length` or `Transfer-Encoding` on a GET). The token is not checked against
 * RFC 6750's syntax here (http/bearer.ts does that, 1–2 µs of regular expression over ~700 characters per request):
 * it is only looked up, and the verified-token cache holds nothing but tokens that passed it; any other spelling
 * (extra spaces, trailing blanks) misses and goes to the route.
 */
function scanHeaders(raw: string[]): { token: string; version: boolean } | undefined {
  let authorization: string | undefined;
  let version = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const n = name.length;
    if (n !== 11 && n !== 13 && n !== 14 && n !== 17) continue;
    const lower = name.toLowerCase();
    if (lower === 'authorization') {
      if (authorization !== undefined) return undefined;
      authorization = raw[i + 1]!;
    } else if (lower === 'svc-version') version = true;
    else if (lower === 'content-length' || lower === 'transfer-encoding') return undefined;
  }
  if (authorization === undefined || !BEARER_PREFIX.test(authorization)) return undefined;
  return { token: authorization.slice(7), version };
}

/**
 * The serialised body, kept per user row and version: the user cache hands out the same row object until it reads
 * the row again (a change made here or LIVENESS_CACHE_SECONDS later), so a new row is a new key and nothing stale is
 * served. Rendering and serialising on every request was ~3 % of a fast `GET /me` (bench/rest.mjs profile).
 */
function bodyOf(
  ctx: AppContext,
  bodies: WeakMap<UserRow, Map<string, string>>,
  user: UserRow,
  version: string,
): string {
  let byVersion = bodies.get(user);
  if (!byVersion) bodies.set(user, (byVersion = new Map()));
  let body = byVersion.get(version);
  if (body === undefined) byVersion.set(version, (body = JSON.stringify(meBody(ctx, user, version))));
  return body;
}

const [VARY, VERSION, CONTENT_TYPE, JSON_TYPE] = [
  'vary',
  VERSION_HEADER.toLowerCase(),
  'content-type',
  'application/json; charset=utf-8',
];

/** The route's headers in the order it sets them (`vary`, the version, then the JSON type Fastify adds). */
function answer(body: string, version: string): FastResponse {
  return {
    route: '/me',
    status: 200,
    headers: [VARY, VERSION_HEADER, VERSION, version, CONTENT_TYPE, JSON_TYPE],
    body,
  };
}
