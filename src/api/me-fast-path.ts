import type { IncomingMessage } from 'node:http';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import type { UserRow } from '../domain/users.js';
import { extractBearer } from '../http/bearer.js';
import type { FastResponse, RawFastPath } from '../http/server.js';
import type { Principal } from '../tokens/verifier.js';
import { VERSION_HEADER } from '../versions/registry.js';
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
  return (request) => {
    if (request.method !== 'GET' || request.url !== '/me' || mayHaveBody(request)) return undefined;
    const caller = cachedCaller(ctx, request);
    if (!caller) return undefined;
    ctx.verifier.countCachedHit(caller.principal);
    ctx.users.countHit();
    if (caller.countedPin) ctx.clientPins.countHit();
    return answer(ctx, caller.user, caller.version);
  };
}

interface CachedCaller {
  principal: Principal;
  user: UserRow;
  version: string;
  /** Whether the route would have looked up the OAuth client's pin. */
  countedPin: boolean;
}

/** The caller, its user and its version when every one of them is answered from memory, else undefined. */
function cachedCaller(ctx: AppContext, request: IncomingMessage): CachedCaller | undefined {
  const requested = validVersion(ctx, request.rawHeaders);
  if (requested === false) return undefined;
  let token: string;
  try {
    token = extractBearer(request);
  } catch {
    return undefined;
  }
  const principal = ctx.verifier.cachedPrincipal(token, urls.api(ctx.config), ME_ACCEPTS);
  if (!principal || (principal.kind === 'oauth' && !principal.scopes.has(ME_SCOPE))) return undefined;
  const user = ctx.users.peek(principal.userId);
  if (!user) return undefined;
  const version = requested ?? pinnedVersion(ctx, principal, user.api_version);
  if (version === undefined) return undefined;
  return { principal, user, version, countedPin: requested === undefined && principal.kind === 'oauth' };
}

/** The `Svc-Version` header's version, undefined when absent, false when the route would refuse it. */
function validVersion(ctx: AppContext, rawHeaders: string[]): string | undefined | false {
  try {
    return ctx.versions.fromHeader(rawHeaders);
  } catch {
    return false;
  }
}

/** versions/resolve.ts without a header, from the caches only: undefined when the client's pin is not cached. */
function pinnedVersion(ctx: AppContext, principal: Principal, userPin: string | null): string | undefined {
  if (principal.kind === 'oauth') {
    const clientPin = ctx.clientPins.peek(principal.clientId);
    if (clientPin === undefined) return undefined;
    if (ctx.versions.has(clientPin)) return clientPin;
  }
  return ctx.versions.has(userPin) ? userPin : ctx.versions.baseline;
}

/** A GET with a body (or framing that announces one) is left to Fastify, whatever it would do with it. */
function mayHaveBody(request: IncomingMessage): boolean {
  const raw = request.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== 14 && name.length !== 17) continue;
    const lower = name.toLowerCase();
    if (lower === 'content-length' || lower === 'transfer-encoding') return true;
  }
  return false;
}

/** The route's headers in the order it sets them (`vary`, the version, then the JSON type Fastify adds). */
function answer(ctx: AppContext, user: UserRow, version: string): FastResponse {
  return {
    route: '/me',
    status: 200,
    headers: {
      vary: VERSION_HEADER,
      [VERSION_HEADER.toLowerCase()]: version,
      'content-type': 'application/json; charset=utf-8',
    },
    body: JSON.stringify(meBody(ctx, user, version)),
  };
}
